#pragma once
// The instruction-set variant of the hand-written CPU kernels (docs/portable-builds.md).
//
// The binary is built for a baseline every x86-64 machine of the last decade runs (Meson option
// cpu_target, default x86-64-v2). The kernels whose loops GCC vectorises are compiled once more
// for each wider level (x86-64-v3: AVX2 + FMA, x86-64-v4: AVX-512), each copy in its own inline
// namespace named by SG_CPU_ISA, and kernel_table.h picks one copy at run time from what the CPU
// has. Code outside kernels/cpu/ is compiled once, for the baseline: it sees `sg::cpu::f`, which
// is the baseline copy; the CPU backend reaches the chosen copy through cpu::kernels().
//
// Everything a kernel TU defines must live in this namespace (or have internal linkage): an
// inline function shared across variants would be merged by the linker into one copy, possibly
// the AVX-512 one, and crash an older CPU. tests/kernels/isa_symbols_test.sh checks the objects.
#ifndef SG_CPU_ISA
#define SG_CPU_ISA baseline
#endif
