#include "comm/mpi_communicator.h"

#include <climits>
#include <cstring>
#include <source_location>
#include <string>

#include "util/error.h"

namespace sg {
namespace {

void check_mpi(int code, const char* call,
               std::source_location where = std::source_location::current()) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw RunError(std::string(call) + " failed: " + std::string(text, length) + " (" +
                 where.file_name() + ":" + std::to_string(where.line()) +
                 "); a peer process may have died, see its message above");
}

// MPI counts are int: large buffers go in chunks.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 8;

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

namespace {

// In-place all-reduce of n elements of `type` (element size `bytes`), in int-sized chunks.
void all_reduce_chunked(void* data, size_t n, size_t bytes, MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm) {
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < n; done += kMaxChunk) {
    const int count = static_cast<int>(std::min(kMaxChunk, n - done));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, p + done * bytes, count, type, op, comm),
              "MPI_Allreduce");
  }
}

}  // namespace

void MpiCommunicator::all_reduce_sum(float* data, size_t n) {
  all_reduce_chunked(data, n, sizeof(float), MPI_FLOAT, MPI_SUM, comm_);
}

void MpiCommunicator::all_reduce_sum(double* data, size_t n) {
  all_reduce_chunked(data, n, sizeof(double), MPI_DOUBLE, MPI_SUM, comm_);
}

void MpiCommunicator::all_reduce_max(float* data, size_t n) {
  all_reduce_chunked(data, n, sizeof(float), MPI_FLOAT, MPI_MAX, comm_);
}

void MpiCommunicator::start_all_reduce_sum(float* data, size_t n) {
  for (size_t done = 0; done < n; done += kMaxChunk) {
    const int count = static_cast<int>(std::min(kMaxChunk, n - done));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data + done, count, MPI_FLOAT, MPI_SUM, comm_,
                             &request),
              "MPI_Iallreduce");
    pending_.push_back(request);
  }
}

void MpiCommunicator::progress() {
  if (pending_.empty()) return;
  int done = 0;
  check_mpi(MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done,
                        MPI_STATUSES_IGNORE),
            "MPI_Testall");
}

void MpiCommunicator::wait_all() {
  if (pending_.empty()) return;
  check_mpi(MPI_Waitall(static_cast<int>(pending_.size()), pending_.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
  pending_.clear();
}

void MpiCommunicator::reduce_scatter_sum(float* out, const float* in, size_t n_per_rank) {
  if (n_per_rank > kMaxChunk) {
    throw RunError("reduce_scatter of more than 268M floats per rank is not supported");
  }
  check_mpi(MPI_Reduce_scatter_block(in, out, static_cast<int>(n_per_rank), MPI_FLOAT, MPI_SUM,
                                     comm_),
            "MPI_Reduce_scatter_block");
}

void MpiCommunicator::all_gather(float* out, const float* in, size_t n_per_rank) {
  if (n_per_rank > kMaxChunk) {
    throw RunError("all_gather of more than 268M floats per rank is not supported");
  }
  const int count = static_cast<int>(n_per_rank);
  check_mpi(MPI_Allgather(in, count, MPI_FLOAT, out, count, MPI_FLOAT, comm_), "MPI_Allgather");
}

void MpiCommunicator::all_gather(double* out, const double* in, size_t n_per_rank) {
  if (n_per_rank > kMaxChunk) {
    throw RunError("all_gather of more than 268M doubles per rank is not supported");
  }
  const int count = static_cast<int>(n_per_rank);
  check_mpi(MPI_Allgather(in, count, MPI_DOUBLE, out, count, MPI_DOUBLE, comm_), "MPI_Allgather");
}

void MpiCommunicator::all_gather_in_place(float* buf, size_t n_per_rank) {
  if (n_per_rank > kMaxChunk) {
    throw RunError("all_gather of more than 268M floats per rank is not supported");
  }
  const int count = static_cast<int>(n_per_rank);
  check_mpi(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, count, MPI_FLOAT, comm_),
            "MPI_Allgather");
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kMaxChunk) {
    const int count = static_cast<int>(std::min(kMaxChunk, bytes - done));
    check_mpi(MPI_Bcast(p + done, count, MPI_BYTE, root, comm_), "MPI_Bcast");
  }
}

void MpiCommunicator::send(const void* data, size_t bytes, int dest, int tag) {
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  do {  // at least one message, so a zero-byte send still pairs with its recv
    const int count = static_cast<int>(std::min(kMaxChunk, bytes - done));
    check_mpi(MPI_Send(p + done, count, MPI_BYTE, dest, tag, comm_), "MPI_Send");
    done += static_cast<size_t>(count);
  } while (done < bytes);
}

void MpiCommunicator::recv(void* data, size_t bytes, int source, int tag) {
  auto* p = static_cast<char*>(data);
  size_t done = 0;
  do {
    const int count = static_cast<int>(std::min(kMaxChunk, bytes - done));
    check_mpi(MPI_Recv(p + done, count, MPI_BYTE, source, tag, comm_, MPI_STATUS_IGNORE),
              "MPI_Recv");
    done += static_cast<size_t>(count);
  } while (done < bytes);
}

void MpiCommunicator::start_send(const void* data, size_t bytes, int dest, int tag) {
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  do {
    const int count = static_cast<int>(std::min(kMaxChunk, bytes - done));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(p + done, count, MPI_BYTE, dest, tag, comm_, &request), "MPI_Isend");
    pending_.push_back(request);
    done += static_cast<size_t>(count);
  } while (done < bytes);
}

void MpiCommunicator::barrier() { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
  return std::make_unique<MpiCommunicator>(sub);
}

// ---------------------------------------------------------------------------------------------

namespace {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void all_reduce_max(float*, size_t) override {}
  void start_all_reduce_sum(float*, size_t) override {}
  void progress() override {}
  void wait_all() override {}
  void reduce_scatter_sum(float* out, const float* in, size_t n) override {
    if (out != in) std::memmove(out, in, n * sizeof(float));
  }
  void all_gather(float* out, const float* in, size_t n) override {
    if (out != in) std::memmove(out, in, n * sizeof(float));
  }
  void all_gather(double* out, const double* in, size_t n) override {
    if (out != in) std::memmove(out, in, n * sizeof(double));
  }
  void all_gather_in_place(float*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  void send(const void*, size_t, int, int) override {
    throw RunError("send on a single-process communicator: there is no peer");
  }
  void recv(void*, size_t, int, int) override {
    throw RunError("recv on a single-process communicator: there is no peer");
  }
  void start_send(const void*, size_t, int, int) override {
    throw RunError("send on a single-process communicator: there is no peer");
  }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SingleProcessCommunicator>();
  }
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace sg
