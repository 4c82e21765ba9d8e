// DataParallelOptimizer's buffer sizes for a group of several processes, with a stand-in group
// (no MPI): zero 0 keeps the plain buffer, ZeRO pads it only to equal aligned shards.
#include <doctest/doctest.h>

#include <stdexcept>

#include "comm/communicator.h"
#include "model/gpt2_family.h"
#include "parallel/data_parallel_optimizer.h"

namespace {

// Reports rank 1 of 4; any communication would be a test error.
class FourRanks final : public sg::Communicator {
 public:
  int rank() const override { return 1; }
  int size() const override { return 4; }
  void all_reduce(void*, size_t, sg::DType, sg::ReduceOp) override { fail(); }
  sg::CommHandle start_all_reduce(void*, size_t, sg::DType, sg::ReduceOp) override { fail(); }
  void reduce_scatter(void*, const void*, size_t, sg::DType, sg::ReduceOp) override { fail(); }
  void all_gather_into(void*, const void*, size_t, sg::DType) override { fail(); }
  void all_gather_inplace(void*, size_t, sg::DType) override { fail(); }
  void broadcast(void*, size_t, int) override { fail(); }
  void send(const void*, size_t, int, int) override { fail(); }
  void recv(void*, size_t, int, int) override { fail(); }
  sg::CommHandle start_send(const void*, size_t, int, int) override { fail(); }
  void barrier() override { fail(); }
  std::unique_ptr<sg::Communicator> split(int, int) override { fail(); }

 private:
  [[noreturn]] static void fail() { throw std::logic_error("unexpected communication"); }
};

}  // namespace

TEST_CASE("data-parallel buffers: zero 0 unpadded, ZeRO shards equal, aligned and small") {
  const sg::ParameterLayout layout(sg::gpt2_description({2, 2, 32, 16, 64, 128}));
  FourRanks group;
  sg::OptimSpec optim;
  const sg::DataParallelOptimizer plain(layout, optim, 0, group);
  CHECK(plain.padded_size() == layout.total());
  CHECK(plain.optimizer_state_bytes() == 2 * sizeof(float) * layout.total());
  for (int zero : {1, 2}) {
    const sg::DataParallelOptimizer sharded(layout, optim, zero, group);
    CHECK(sharded.shard_size() % 16 == 0);
    CHECK(sharded.padded_size() == 4 * sharded.shard_size());
    CHECK(sharded.padded_size() >= layout.total());
    CHECK(sharded.padded_size() < layout.total() + 4 * 16);
    // Rank 1 holds moments for its shard only.
    CHECK(sharded.optimizer_state_bytes() == 2 * sizeof(float) * sharded.shard_size());
  }
}
