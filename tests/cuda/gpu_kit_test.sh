#!/usr/bin/env bash
# The GPU kit is self-contained (suite cuda; docs/gpu.md, "The GPU kit"): scripts/gpu-kit packs
# this build, and inside a minimal Debian root filesystem that holds none of our libraries (made
# by scripts/setup; glibc and libstdc++ only, as a bare CUDA image) the unpacked kit
#   1. resolves every library of every program it carries from the kit or the C/C++ runtimes,
#      missing only the NVIDIA libraries a CUDA image provides;
#   2. runs `singularity info` (which finds the kit's CUDA module beside the binary and names the
#      CUDA runtime as what it lacks here), and the embedded quickstart for a few steps on 1 process and, with
#      the kit's own mpirun, on 2;
#   3. runs gpu-check as far as a machine without a GPU allows: one clear line, exit 1, the
#      summary and logs written with plain names.
# Exits 77 (skipped) without CUDA in the build, without root (chroot) or without the tree.
set -uo pipefail
source_root="$1"
build="$2"
if [[ ! -f $build/kernels/cuda/libsingularity_cuda.so ]]; then
  echo "skipped: this build has no CUDA module, so there is no GPU kit to make"
  exit 77
fi
rootfs="${SINGULARITY_BARE_ROOTFS:-${XDG_CACHE_HOME:-$HOME/.cache}/singularity/bare-rootfs}"
if [[ ! -x $rootfs/bin/sh ]]; then
  echo "skipped: no minimal root filesystem in $rootfs (scripts/setup makes it as root with mmdebstrap)"
  exit 77
fi
if [[ $(id -u) -ne 0 ]] || ! unshare --mount true 2>/dev/null; then
  echo "skipped: chroot and a mount namespace need root"
  exit 77
fi
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The kit of this build, packed into a scratch folder (the repository's kit/ is left alone).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$source_root" && GPU_KIT_OUT="$work/out" scripts/gpu-kit "$build") > "$work/kit.log" 2>&1 || { cat "$work/kit.log"; exit 1; }
cat "$work/kit.log"
tarball="$work/out/singularity-gpu-kit.tar.xz"
mkdir -p "$work/kit"
tar -xJf "$tarball" -C "$work/kit" || { echo "FAIL: the kit does not unpack"; exit 1; }

# in_root CMD: CMD under /bin/sh inside the root filesystem, the kit at /tmp/kit, /proc and /sys,
# all in a private mount namespace (nothing stays mounted).
in_root() {
  unshare --mount --propagation private sh -c '
    root="$1"; kit="$2"; cmd="$3"
    mount -t proc proc "$root/proc" && mount --rbind /sys "$root/sys" &&
    mkdir -p "$root/tmp/kit" && mount --bind "$kit" "$root/tmp/kit" &&
    exec chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp /bin/sh -c "$cmd"' \
    _ "$rootfs" "$work/kit" "$1"
}
run=/tmp/kit/singularity-gpu-kit/run

# 1. Every library from the kit or the runtimes; only NVIDIA's missing.
in_root "for f in /tmp/kit/singularity-gpu-kit/bin/* /tmp/kit/singularity-gpu-kit/lib/singularity/*.so \
           /tmp/kit/singularity-gpu-kit/mpi/bin/orterun /tmp/kit/singularity-gpu-kit/mpi/lib/openmpi3/*.so; do
           echo \"== \$f\"; $run ldd \"\$f\"; done" > "$work/ldd.txt" 2>&1
runtimes='(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil\.so|libanl|libnsl|libstdc\+\+|libgcc_s)'
nvidia='(libcuda\.so|libcudart|libcublas|libcublasLt|libcudnn|libnccl|libnvrtc|libnvJitLink)'
grep -q '^== .*bin/singularity' "$work/ldd.txt" || fail "ldd did not run in the root filesystem: $(head -3 "$work/ldd.txt")"
outside=$(grep '=>' "$work/ldd.txt" | grep -v 'not found' | grep -v '/tmp/kit/' | grep -Ev "^\s*$runtimes" || true)
[[ -z $outside ]] || fail "libraries resolved outside the kit: $outside"
missing=$(grep 'not found' "$work/ldd.txt" | awk '{print $1}' | grep -Ev "^$nvidia" | sort -u || true)
[[ -z $missing ]] || fail "missing in the root filesystem: $missing"
grep -q 'libcudart.* not found' "$work/ldd.txt" || fail "the module's CUDA runtime resolved: the root filesystem is not bare"

# 2. info, the quickstart on 1 process and through the kit's mpirun on 2.
# info runs; without NVIDIA libraries here the module cannot load, and says it is libcudart it
# lacks, at the kit's own module, found beside the binary (SINGULARITY_CUDA_MODULE unset).
in_root "SINGULARITY_CUDA_MODULE= $run singularity info" > "$work/info.txt" 2>&1
grep -q '^singularity [0-9]' "$work/info.txt" || fail "info did not run: $(head -3 "$work/info.txt")"
grep -q 'singularity-gpu-kit/lib/singularity/libsingularity_cuda.so (libcudart' "$work/info.txt" ||
  fail "the binary did not find the kit's CUDA module beside itself: $(tail -2 "$work/info.txt")"
in_root "cd /tmp && $run singularity train --set train.steps=3 --set devices.processes=1 --set log.dir=/tmp/q1" > "$work/q1.txt" 2>&1 ||
  fail "the quickstart on 1 process: $(tail -3 "$work/q1.txt")"
grep -q '^step 3/3' "$work/q1.txt" || fail "the quickstart did not reach step 3: $(tail -3 "$work/q1.txt")"
in_root "cd /tmp && $run singularity train --set train.steps=2 --set devices.processes=2 --set log.dir=/tmp/q2" \
  > "$work/q2.txt" 2>&1 || fail "the quickstart on 2 processes (the kit's mpirun): $(tail -5 "$work/q2.txt")"
grep -q '^step 2/2' "$work/q2.txt" || fail "the 2-process quickstart did not reach step 2: $(tail -3 "$work/q2.txt")"

# 3. gpu-check without a GPU: a clear stop at the devices stage, its files with plain names.
in_root "mkdir -p /tmp/out && OUT=/tmp/out $run check; echo \"exit \$?\"; ls /tmp/out;
         cd /tmp/out && tar -xzf logs.tar.gz ./devices.log && cat devices.log" > "$work/check.txt" 2>&1
grep -q '^exit 1$' "$work/check.txt" || fail "gpu-check without a GPU did not exit 1: $(tail -5 "$work/check.txt")"
grep -q '| stop | no CUDA device' "$work/check.txt" || fail "gpu-check did not say why it stopped: $(tail -5 "$work/check.txt")"
grep -q '^singularity [0-9]' "$work/check.txt" || fail "gpu-check's devices stage did not run info: $(tail -5 "$work/check.txt")"
for f in summary.md logs.tar.gz nvidia-smi.txt; do
  grep -qx "$f" "$work/check.txt" || fail "gpu-check wrote no $f"
done

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
