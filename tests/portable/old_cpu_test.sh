#!/usr/bin/env bash
# A portable build runs on an older CPU: under QEMU's user-mode emulation of a Nehalem
# (x86-64-v2: SSE4.2, no AVX; QEMU raises an illegal instruction on any AVX instruction, the
# crash a -march=native binary gives on an older node) `info` names the baseline kernels and a
# tiny job trains; under an emulated Haswell the x86-64-v3 kernels are chosen; asking for
# kernels the CPU lacks is one clear error line, not a crash. Skips where qemu-x86_64 is absent
# (scripts/setup installs Debian's qemu-user) or the build has no wider variants.
#   old_cpu_test.sh SINGULARITY_BINARY
bin="$1"
source "$(dirname "$0")/../e2e/run_lib.sh"
qemu=$(command -v qemu-x86_64 || true)
if [[ -z $qemu ]]; then
  echo "SKIP: qemu-x86_64 not found (scripts/setup installs Debian's qemu-user)"
  exit 77
fi
if [[ $(uname -m) != x86_64 ]]; then
  echo "SKIP: not an x86-64 machine"
  exit 77
fi
if ! "$bin" info | grep -q '^cpu kernels: .*x86-64-v3'; then
  echo "SKIP: this build has no x86-64-v3 kernel variant (cpu_target native or above v3)"
  exit 77
fi
# QEMU warns about CPUID bits TCG cannot emulate; those lines are noise here. An exec from the
# emulated process runs natively (no binfmt handler), so the binary must not re-execute itself
# (src/backend/blas_core.cpp): OMP_WAIT_POLICY and OPENBLAS_THREAD_TIMEOUT are set here, and the
# stop signals arrive blocked (env --block-signal; QEMU hands the mask to the guest), the two
# reasons it would (docs/faults.md, "Stop signals").
export OMP_WAIT_POLICY=passive OPENBLAS_THREAD_TIMEOUT=16
blocked=(env --block-signal=TERM,INT,USR1)
emulate() {
  local cpu=$1; shift
  "${blocked[@]}" "$qemu" -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support" >&2)
}

expect 0 '^cpu kernels: x86-64-v2 \(built: x86-64-v2, x86-64-v3 \(not on this CPU\)' -- \
  emulate Nehalem "$bin" info
expect 0 '^cpu kernels: x86-64-v3 ' -- emulate Haswell "$bin" info
expect 1 'SINGULARITY_CPU_KERNELS=x86-64-v3: this CPU lacks those instructions' -- \
  "${blocked[@]}" SINGULARITY_CPU_KERNELS=x86-64-v3 "$qemu" -cpu Nehalem "$bin" info

# A tiny GPT job on the emulated Nehalem: attention, layernorm, GELU, cross-entropy and AdamW
# all run on the baseline kernels, OpenBLAS picks its SSE kernels.
cat > tiny.yaml <<'YAML'
name: tiny
model: {arch: gpt2, n_layer: 1, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 8192, synthetic_val_tokens: 1024}
train: {steps: 3, global_batch: 2, micro_batch: 2}
devices: {backend: cpu, processes: 1, threads: 1}
log: {dir: runs/tiny, every: 1}
YAML
check
out=$(emulate Nehalem "$bin" train tiny.yaml 2>&1)
rc=$?
if [[ $rc -ne 0 ]] || [[ $(grep -c '"grad_norm"' runs/tiny/metrics.jsonl 2>/dev/null) -ne 3 ]]; then
  fail "training under an emulated Nehalem: exit $rc (132 is an illegal instruction)"
  echo "$out" | tail -n 8
fi
finish
