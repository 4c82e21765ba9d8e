#include "dnnl_context.h"

#include "util/error.h"

namespace sg::cpu::dnnl_detail {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

void throw_dnnl_error(const char* what, const dnnl::error& e) {
  throw RunError(std::string("oneDNN ") + what + " failed: " + e.what() + " (status " +
                 std::to_string(static_cast<int>(e.status)) +
                 "); check the shapes in the job spec, or report this with the job");
}

void reorder_add(dnnl::memory& src, dnnl::memory dst) {
  dnnl::post_ops ops;
  ops.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  checked("reorder", [&] {
    dnnl::reorder(dnnl::reorder::primitive_desc(src, dst, attr)).execute(stream(), src, dst);
    stream().wait();
  });
}

}  // namespace sg::cpu::dnnl_detail
