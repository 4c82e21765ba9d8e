#pragma once
// The hand-written CPU kernels as a table of function pointers, one table per instruction-set
// variant the build compiled (kernels/cpu/isa.h), and the choice among them, made once per
// process: the widest variant this CPU runs, or the one SINGULARITY_CPU_KERNELS names.
// The CPU backend calls the dispatched kernels through the chosen table; oneDNN's (convolution,
// sgemm) and OpenBLAS's pick their own instructions and are called directly.
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/batchnorm.h"
#include "kernels/classifier_loss.h"
#include "kernels/conv2d.h"
#include "kernels/crossentropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/grad_norm.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/pool.h"
#include "kernels/relu.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/sgd.h"

// Every kernel compiled per variant that the backend calls. A kernel missing here still works
// (the backend would call the baseline copy) but runs without the wider instructions.
#define SG_CPU_DISPATCHED_KERNELS(X)                                                         \
  X(adamw_update) X(attention_forward) X(attention_backward) X(batchnorm_sums)               \
  X(batchnorm_stats) X(batchnorm_normalize) X(batchnorm_backward_sums)                       \
  X(batchnorm_backward_input) X(batchnorm_update_running) X(batchnorm_forward_train) X(batchnorm_backward) X(batchnorm_add_relu_backward)            \
  X(classifier_loss_forward_backward) \
  X(classifier_correct) X(crossentropy_forward) X(crossentropy_backward)                     \
  X(crossentropy_forward_backward) X(crossentropy_vp_max) X(crossentropy_vp_sums)            \
  X(crossentropy_vp_losses) X(crossentropy_vp_backward) X(encoder_forward)                   \
  X(encoder_backward) X(embedding_forward_vocab_range) X(position_add)                       \
  X(encoder_backward_vocab_range) X(gelu_forward) X(gelu_backward) X(sum_of_squares)          \
  X(gelu_forward_bf16) X(gelu_backward_bf16) X(layernorm_forward_bf16)                       \
  X(residual_layernorm_forward_bf16) X(attention_forward_bf16) X(attention_backward_bf16)    \
  X(crossentropy_forward_bf16) X(crossentropy_backward_bf16)                                 \
  X(crossentropy_forward_backward_bf16)                                                      \
  X(layernorm_forward) X(residual_layernorm_forward) X(layernorm_backward) X(matmul_forward) \
  X(matmul_backward) X(matmul_bias_backward) X(relu_forward) X(relu_backward) X(add_relu_inplace) X(add_relu_backward) X(residual_forward) \
  X(residual_backward) X(add_inplace) X(scale_inplace) X(add_bias) X(sgd_update) X(sgd_update_ranges) X(adamw_update_ranges) \
  X(maxpool_forward) X(maxpool_backward) X(global_avgpool_forward) X(global_avgpool_backward)   \
  X(nchw_to_nhwc)                                                                            \
  X(batchnorm_forward_train_bf16) X(batchnorm_backward_bf16) X(batchnorm_add_relu_backward_bf16) \
  X(batchnorm_sums_bf16) X(batchnorm_normalize_bf16) X(batchnorm_backward_sums_bf16)         \
  X(batchnorm_backward_input_bf16) X(relu_forward_bf16) X(relu_backward_bf16)                \
  X(add_relu_inplace_bf16) X(add_relu_backward_bf16) X(maxpool_forward_bf16)                 \
  X(global_avgpool_forward_bf16) X(nchw_to_nhwc_bf16)                                        \
  X(conv2d_winograd_forward) X(conv2d_winograd_backward_data)                                \
  X(conv2d_winograd_backward_weights)                                                         \
  X(rmsnorm_forward) X(rmsnorm_backward) X(swiglu_forward) X(swiglu_backward)                \
  X(rope_qkv_forward) X(rope_qkv_backward)

namespace sg::cpu {

struct KernelTable {
  const char* isa;  // "x86-64-v3", ...: the -march the copy was compiled with
#define SG_KERNEL_FIELD(name) decltype(&::sg::cpu::name) name;
  SG_CPU_DISPATCHED_KERNELS(SG_KERNEL_FIELD)
#undef SG_KERNEL_FIELD
};

// The table of this process, chosen on first call: SINGULARITY_CPU_KERNELS=<isa> when set (a
// variant this CPU cannot run, or one not built, is a RunError saying which exist), otherwise
// the widest built variant the CPU supports.
const KernelTable& kernels();

struct KernelVariant {
  std::string isa;
  bool cpu_supports = false;
};
// The variants this build holds, baseline first, and whether this CPU runs each.
std::vector<KernelVariant> kernel_variants();
// The same as text: "x86-64-v2, x86-64-v3, x86-64-v4 (not on this CPU)".
std::string kernel_variants_text();
// The table of one variant ("baseline" names the first), or nullptr where this build lacks it
// or this CPU cannot run it. For tests that hold the variants against each other.
const KernelTable* kernel_table_for(const std::string& isa);

}  // namespace sg::cpu
