// The choice of the kernel variant (kernel_table.h): compiled once, for the baseline.
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/kernel_table.h"
#include "kernels/kernel_variants.h"
#include "util/error.h"

namespace sg::cpu {

namespace baseline {
extern const KernelTable kernel_table;
}
#define SG_DECLARE_VARIANT(ns, level) \
  namespace ns {                      \
  extern const KernelTable kernel_table; \
  }
SG_CPU_VARIANTS(SG_DECLARE_VARIANT)
#undef SG_DECLARE_VARIANT

namespace {

struct Candidate {
  const KernelTable* table;
  bool cpu_supports;
};

// Baseline first, then each wider variant the build holds. __builtin_cpu_supports also checks
// that the operating system saves the wider registers (XSAVE), not only the CPUID bits.
std::vector<Candidate> candidates() {
  __builtin_cpu_init();
  std::vector<Candidate> all{{&baseline::kernel_table, true}};
#define SG_ADD_VARIANT(ns, level) \
  all.push_back({&ns::kernel_table, __builtin_cpu_supports(level) != 0});
  SG_CPU_VARIANTS(SG_ADD_VARIANT)
#undef SG_ADD_VARIANT
  return all;
}

// The candidate `isa` names ("baseline" names the first), or nullptr.
const Candidate* find(const std::vector<Candidate>& all, const std::string& isa) {
  for (const Candidate& c : all) {
    if (isa == c.table->isa || (isa == "baseline" && &c == &all.front())) return &c;
  }
  return nullptr;
}

const KernelTable& choose() {
  const std::vector<Candidate> all = candidates();
  const char* env = std::getenv("SINGULARITY_CPU_KERNELS");
  const std::string wanted = env == nullptr ? "" : env;
  if (wanted.empty() || wanted == "auto") {
    const KernelTable* best = all.front().table;
    for (const Candidate& c : all) {
      if (c.cpu_supports) best = c.table;
    }
    return *best;
  }
  const Candidate* c = find(all, wanted);
  if (c == nullptr) {
    throw RunError("SINGULARITY_CPU_KERNELS=" + wanted +
                   " is not a kernel variant of this build; unset it, or choose auto, baseline "
                   "or one of: " + kernel_variants_text());
  }
  if (!c->cpu_supports) {
    throw RunError("SINGULARITY_CPU_KERNELS=" + wanted +
                   ": this CPU lacks those instructions; unset it or choose one of: " +
                   kernel_variants_text());
  }
  return *c->table;
}

}  // namespace

const KernelTable& kernels() {
  static const KernelTable& chosen = choose();
  return chosen;
}

const KernelTable* kernel_table_for(const std::string& isa) {
  const std::vector<Candidate> all = candidates();
  const Candidate* c = find(all, isa);
  return c != nullptr && c->cpu_supports ? c->table : nullptr;
}

std::vector<KernelVariant> kernel_variants() {
  std::vector<KernelVariant> out;
  for (const Candidate& c : candidates()) out.push_back({c.table->isa, c.cpu_supports});
  return out;
}

std::string kernel_variants_text() {
  std::string text;
  for (const KernelVariant& v : kernel_variants()) {
    text += (text.empty() ? "" : ", ") + v.isa + (v.cpu_supports ? "" : " (not on this CPU)");
  }
  return text;
}

}  // namespace sg::cpu
