// The MPI communicator under mpirun (any process count, e.g. 3): every dtype the interface
// takes (F32, F64, BF16, F16, I32), sums and maxima, one handle per asynchronous operation, and
// counts above one MPI call's limit chunked. The limit is lowered to 7 elements so ragged
// chunks happen on small buffers; the same calls run with the default limit too. Values are
// small integers, exact in every dtype, so results are compared exactly.
//   mpirun -np P test_communicator
// Prints one line per failure and a summary; exits 1 on any failure.
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/device.h"
#include "comm/mpi_communicator.h"
#include "comm/staged_communicator.h"
#include "launch/process_world.h"
#include "tests/guarded_backend.h"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::printf("rank %d: FAIL: %s\n", rank, what.c_str());
    ++failures;
  }
}

// Element i of rank r's contribution, as a small integer.
int value(int r, size_t i) { return static_cast<int>((i * 7 + static_cast<size_t>(r) * 3) % 23) - 11; }

template <class T>
T encode(int x, sg::DType dtype) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return dtype == sg::DType::BF16 ? sg::float_to_bf16(static_cast<float>(x))
                                    : sg::float_to_half(static_cast<float>(x));
  } else {
    return static_cast<T>(x);
  }
}

template <class T>
int decode(T x, sg::DType dtype) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return static_cast<int>(dtype == sg::DType::BF16 ? sg::bf16_to_float(x) : sg::half_to_float(x));
  } else {
    return static_cast<int>(x);
  }
}

template <class T>
void check_dtype(sg::Communicator& c, sg::DType dtype, size_t n) {
  const int P = c.size(), me = c.rank();
  const std::string name = std::string(sg::dtype_name(dtype)) + " n=" + std::to_string(n);
  auto mine = [&](size_t count) {
    std::vector<T> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = encode<T>(value(me, i), dtype);
    return v;
  };
  auto sum_of = [&](size_t i) {
    int s = 0;
    for (int r = 0; r < P; ++r) s += value(r, i);
    return s;
  };
  auto max_of = [&](size_t i) {
    int m = value(0, i);
    for (int r = 1; r < P; ++r) m = std::max(m, value(r, i));
    return m;
  };
  // all_reduce sum and max
  auto a = mine(n), b = mine(n);
  c.all_reduce(a.data(), n, dtype, sg::ReduceOp::Sum);
  c.all_reduce(b.data(), n, dtype, sg::ReduceOp::Max);
  bool sum_ok = true, max_ok = true;
  for (size_t i = 0; i < n; ++i) {
    sum_ok &= decode(a[i], dtype) == sum_of(i);
    max_ok &= decode(b[i], dtype) == max_of(i);
  }
  expect(sum_ok, name + ": all_reduce sum", me);
  expect(max_ok, name + ": all_reduce max", me);
  // two asynchronous all-reduces in flight at once, completed in reverse order
  auto x = mine(n), y = mine(n);
  sg::CommHandle hx = c.start_all_reduce(x.data(), n, dtype, sg::ReduceOp::Sum);
  sg::CommHandle hy = c.start_all_reduce(y.data(), n, dtype, sg::ReduceOp::Max);
  hy->wait();
  while (!hx->test()) {
  }
  bool async_ok = true;
  for (size_t i = 0; i < n; ++i) async_ok &= decode(x[i], dtype) == sum_of(i) && decode(y[i], dtype) == max_of(i);
  expect(async_ok, name + ": two handles", me);
  // reduce_scatter: every rank contributes P*n, receives its n-element slice of the sum
  auto full = mine(n * static_cast<size_t>(P));
  std::vector<T> slice(n);
  c.reduce_scatter(slice.data(), full.data(), n, dtype, sg::ReduceOp::Sum);
  bool rs_ok = true;
  for (size_t i = 0; i < n; ++i) rs_ok &= decode(slice[i], dtype) == sum_of(static_cast<size_t>(me) * n + i);
  expect(rs_ok, name + ": reduce_scatter", me);
  // all_gather, out of place and in place
  std::vector<T> gathered(n * static_cast<size_t>(P)), in_place(n * static_cast<size_t>(P));
  const auto part = mine(n);
  c.all_gather_into(gathered.data(), part.data(), n, dtype);
  std::copy(part.begin(), part.end(), in_place.begin() + static_cast<long>(static_cast<size_t>(me) * n));
  c.all_gather_inplace(in_place.data(), n, dtype);
  bool ag_ok = true;
  for (int r = 0; r < P; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const size_t at = static_cast<size_t>(r) * n + i;
      ag_ok &= decode(gathered[at], dtype) == value(r, i) && decode(in_place[at], dtype) == value(r, i);
    }
  }
  expect(ag_ok, name + ": all_gather", me);
}

void check_all(sg::Communicator& c, const char* what) {
  for (size_t n : {1u, 7u, 23u, 100u}) {
    check_dtype<float>(c, sg::DType::F32, n);
    check_dtype<double>(c, sg::DType::F64, n);
    check_dtype<int32_t>(c, sg::DType::I32, n);
    check_dtype<uint16_t>(c, sg::DType::BF16, n);
    check_dtype<uint16_t>(c, sg::DType::F16, n);
  }
  // Non-blocking sends around a ring, several chunks each.
  const int P = c.size(), me = c.rank();
  if (P > 1) {
    std::vector<char> out(50, static_cast<char>('a' + me)), in(50);
    sg::CommHandle h = c.start_send(out.data(), out.size(), (me + 1) % P, 9);
    c.recv(in.data(), in.size(), (me + P - 1) % P, 9);
    h->wait();
    expect(in == std::vector<char>(50, static_cast<char>('a' + (me + P - 1) % P)),
           std::string(what) + ": ring of sends", me);
  }
  std::printf("rank %d: %s done\n", me, what);
}

}  // namespace

// A staged (device) communicator over a group of one, as a one-GPU job's data and tensor groups
// are: the right results, and not one copy between the device and the host (no staging, no
// NCCL; docs/gpu.md).
void check_staged_alone(int rank) {
  sg::test::GuardedBackend device(sg::cpu_backend());
  auto alone = sg::make_single_process_communicator();
  sg::StagedCommunicator c(*alone, device);
  const size_t n = 1000;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(value(rank, i));
  auto* a = static_cast<float*>(device.allocate(n * sizeof(float)));
  auto* b = static_cast<float*>(device.allocate(n * sizeof(float)));
  device.copy_from_host(a, host.data(), n * sizeof(float));
  const long before = device.host_copies();
  c.all_reduce_sum(a, n);
  c.start_all_reduce_sum(a, n)->wait();
  c.reduce_scatter_sum(b, a, n);
  c.all_gather(b, a, n);
  c.all_gather_in_place(b, n);
  c.broadcast(b, n * sizeof(float), 0);
  c.barrier();
  expect(device.host_copies() == before, "a staged group of one copied through the host", rank);
  std::vector<float> got(n);
  device.copy_to_host(got.data(), b, n * sizeof(float));
  expect(got == host, "a staged group of one changed the data", rank);
  device.deallocate(a);
  device.deallocate(b);
}

int main() {
  auto world = sg::open_world(sg::detect_launcher());
  if (world->size() < 2) {
    std::fprintf(stderr, "run under mpirun -np 2 or more\n");
    return 2;
  }
  sg::MpiCommunicator chunked(MPI_COMM_WORLD, 7);
  check_all(chunked, "7-element chunks");
  check_all(*world, "default chunks");
  auto sub = chunked.split(world->rank() % 2, world->rank());  // chunking survives a split
  if (sub->size() > 1) check_all(*sub, "split group");
  check_staged_alone(world->rank());
  int total = failures;
  MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world->rank() == 0) std::printf("%s: %d failure(s)\n", total ? "FAILED" : "passed", total);
  return total == 0 ? 0 : 1;
}
