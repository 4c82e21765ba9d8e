// One variant's table of the dispatched kernels (kernel_table.h). Compiled once with the
// baseline flags and once more per wider variant, with SG_CPU_ISA naming the namespace and
// SG_CPU_ISA_NAME the -march level (kernels/meson.build).
#include "kernels/cpu/kernel_table.h"
#include "kernels/kernel_variants.h"

#ifndef SG_CPU_ISA_NAME
#define SG_CPU_ISA_NAME SG_CPU_BASELINE
#endif

namespace sg::cpu::inline SG_CPU_ISA {

extern const KernelTable kernel_table;
#define SG_KERNEL_ADDRESS(name) &name,
const KernelTable kernel_table = {SG_CPU_ISA_NAME, SG_CPU_DISPATCHED_KERNELS(SG_KERNEL_ADDRESS)};
#undef SG_KERNEL_ADDRESS

}  // namespace sg::cpu::SG_CPU_ISA
