#!/usr/bin/env bash
# The wider kernel variants (libkernels_x86_64_v3.a, ...) must define nothing outside their own
# namespace sg::cpu::<variant>: a weak symbol (an inline function, a template instance) defined
# there as well as in the baseline code is merged by the linker into one copy, perhaps the
# AVX-512 one, which then runs on every CPU (kernels/cpu/isa.h). Also checks that the variant
# objects really hold wider instructions than the baseline (ymm/zmm registers), so that the
# variant flags are not silently lost, and that the exp loops are vectorised.
#   isa_symbols_test.sh LIBKERNELS_X86_64_V3.a [LIBKERNELS_X86_64_V4.a ...]
set -euo pipefail
if (( $# == 0 )); then
  echo "SKIP: this build has no wider kernel variants (cpu_target is native or not x86-64)"
  exit 77
fi
failed=0
for lib in "$@"; do
  name=$(basename "$lib" .a)            # libkernels_x86_64_v3
  ns=${name#libkernels_}                 # x86_64_v3
  # Defined, externally visible symbols: T/W/V/R/D/B/u (lower-case t/r/d/b are local). The
  # exception-handling personality pointer (data, no code) is the same in every object.
  outside=$(nm -C --defined-only "$lib" 2>/dev/null |
            awk 'NF >= 3 && $2 ~ /^[TWVRDBu]$/ { $1 = ""; $2 = ""; sub(/^  /, ""); print }' |
            grep -v "^sg::cpu::$ns::" |
            grep -vx 'DW.ref.__gxx_personality_v0' | sort -u || true)
  if [[ -n "$outside" ]]; then
    echo "FAIL: $lib defines symbols outside sg::cpu::$ns (move them into the variant namespace or give them internal linkage):"
    echo "$outside" | head -n 20 | sed 's/^/  /'
    failed=1
  else
    echo "ok: $lib: every external symbol is in sg::cpu::$ns"
  fi
  register=ymm
  [[ $ns == *v4 ]] && register=zmm
  wide=$(objdump -d --no-show-raw-insn "$lib" 2>/dev/null | grep -c "%$register" || true)
  if (( wide == 0 )); then
    echo "FAIL: $lib has no instruction on %$register: was it compiled for $ns?"
    failed=1
  else
    echo "ok: $lib: $wide instructions use %$register"
  fi
  # The exp loops (cross-entropy, GELU, the attention softmax) must be vectorised: packed FMAs
  # on the variant's registers. Without -fno-trapping-math GCC left them scalar on AVX2
  # (kernels/cpu/fast_exp.h), 4x slower, and no other test notices.
  for kernel in crossentropy gelu attention; do
    fmas=$(objdump -d --no-show-raw-insn "$lib" 2>/dev/null |
           awk -v member="kernels_cpu_$kernel.cpp.o:" '/file format/ { inside = index($1, member) > 0 } inside' |
           grep -cE "vfn?m(add|sub)[0-9]+ps.*%$register" || true)
    if (( fmas == 0 )); then
      echo "FAIL: $lib: $kernel has no packed FMA on %$register: its exp loop is not vectorised (see kernels/README.md)"
      failed=1
    else
      echo "ok: $lib: $kernel has $fmas packed FMAs on %$register"
    fi
  done
done
exit $failed
