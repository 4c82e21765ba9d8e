#pragma once
// Tolerances, written down once (llm.c validate_result style): an element passes when
//   |got - ref| <= atol + rtol * |ref|
// per dtype. Tests that need a looser bound say why at the call site.
// check_close compares whole arrays and reports the worst element (index, got, ref, error/bound),
// so one failing test says where and by how much.
#include <cmath>
#include <cstddef>
#include <sstream>
#include <string>

namespace sg::test {

struct Tolerance {
  double atol;
  double rtol;
};

// fp32 kernels against a float64 reference: a few ulps of rounding per accumulated term.
inline constexpr Tolerance kFp32{1e-5, 1e-4};
// Central finite differences (h = 1e-6) of a float64 function against its analytic gradient:
// truncation O(h^2) plus rounding O(1e-16 / h) relative to the loss.
inline constexpr Tolerance kFiniteDiff64{1e-7, 1e-6};
// Central finite differences of a float32 forward: float32 rounding divided by h dominates.
inline constexpr Tolerance kFiniteDiff32{2e-3, 2e-2};
// bf16 compute (GPU backends): 8 mantissa bits.
inline constexpr Tolerance kBf16{1e-2, 2e-2};
// fp16 compute: 11 mantissa bits.
inline constexpr Tolerance kFp16{1e-3, 5e-3};

struct CloseReport {
  bool ok = true;
  std::string message;  // names the worst element; empty when n == 0
};

// Compares got[0:n] (any arithmetic type) with ref[0:n]; NaN or Inf in got always fails.
template <typename Got, typename Ref>
CloseReport check_close(const Got* got, const Ref* ref, std::size_t n, Tolerance tol,
                        const char* what = "array") {
  CloseReport report;
  double worst_ratio = -1.0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double r = static_cast<double>(ref[i]);
    const double bound = tol.atol + tol.rtol * std::fabs(r);
    const double ratio = std::isfinite(g) ? std::fabs(g - r) / bound : INFINITY;
    if (!(ratio <= 1.0)) report.ok = false;
    if (!(ratio <= worst_ratio)) {  // also catches NaN ratios
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (n > 0) {
    std::ostringstream os;
    os.precision(9);
    os << what << ": worst element [" << worst << "] got " << static_cast<double>(got[worst])
       << " ref " << static_cast<double>(ref[worst]) << " error/bound " << worst_ratio
       << " (atol " << tol.atol << ", rtol " << tol.rtol << ", n " << n << ")";
    report.message = os.str();
  }
  return report;
}

// A whole tensor's error relative to its largest reference element: max|got - ref| / max|ref|
// (an element-wise ratio would blow up on gradients that are nearly zero). The whole-model
// golden tests use it with 1e-5 (GPT-2) and 1e-4 (ResNet).
template <typename Got, typename Ref>
double relative_to_largest(const Got* got, const Ref* ref, std::size_t n) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    max_diff = std::fmax(max_diff, std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i])));
    max_ref = std::fmax(max_ref, std::fabs(static_cast<double>(ref[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

}  // namespace sg::test

// In a doctest test: CHECK_CLOSE(got.data(), ref.data(), n, sg::test::kFp32, "dinp");
#define CHECK_CLOSE(got, ref, n, tol, what)                                   \
  do {                                                                        \
    const auto sg_close_report_ = ::sg::test::check_close(got, ref, n, tol, what); \
    INFO(sg_close_report_.message);                                           \
    CHECK(sg_close_report_.ok);                                               \
  } while (0)
