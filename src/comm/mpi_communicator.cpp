#include "comm/mpi_communicator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <source_location>
#include <string>
#include <vector>

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

// --- Reduction operators of our own: for the 16-bit floats (MPI has no type for them: they
// travel as uint16 words and are added in float, rounded back to nearest even), and for every
// type when a chunk of a per-rank block is described by a derived datatype (Open MPI refuses
// its predefined operators on derived datatypes). An element of such a type holds `size` bytes
// of data at its start and spans `extent` bytes. -------------------------------------------

template <class T, class Word, T (*load)(Word), Word (*store)(T), bool kMax>
void reduce_words(void* in, void* inout, int* count, MPI_Datatype* type) {
  MPI_Count size = 0;
  MPI_Aint lower = 0, extent = 0;
  MPI_Type_size_x(*type, &size);
  MPI_Type_get_extent(*type, &lower, &extent);
  const size_t words = static_cast<size_t>(size) / sizeof(Word);
  for (int j = 0; j < *count; ++j) {
    const auto* a = reinterpret_cast<const Word*>(static_cast<const char*>(in) + j * extent);
    auto* b = reinterpret_cast<Word*>(static_cast<char*>(inout) + j * extent);
    for (size_t i = 0; i < words; ++i) {
      const T x = load(a[i]), y = load(b[i]);
      b[i] = store(kMax ? (x > y ? x : y) : x + y);
    }
  }
}

template <class T>
T same(T x) {
  return x;
}

template <class T>
MPI_User_function* plain_reduction(ReduceOp op) {
  return op == ReduceOp::Sum ? reduce_words<T, T, same<T>, same<T>, false>
                             : reduce_words<T, T, same<T>, same<T>, true>;
}

MPI_User_function* user_reduction(DType dtype, ReduceOp op) {
  const bool sum = op == ReduceOp::Sum;
  switch (dtype) {
    case DType::BF16:
      return sum ? reduce_words<float, uint16_t, bf16_to_float, float_to_bf16, false>
                 : reduce_words<float, uint16_t, bf16_to_float, float_to_bf16, true>;
    case DType::F16:
      return sum ? reduce_words<float, uint16_t, half_to_float, float_to_half, false>
                 : reduce_words<float, uint16_t, half_to_float, float_to_half, true>;
    case DType::F32: return plain_reduction<float>(op);
    case DType::F64: return plain_reduction<double>(op);
    case DType::I32: return plain_reduction<int32_t>(op);
    case DType::I64: return plain_reduction<int64_t>(op);
    case DType::U64: return plain_reduction<uint64_t>(op);
    case DType::U16: return plain_reduction<uint16_t>(op);
    default:
      throw RunError(std::string("reductions over ") + dtype_name(dtype) + " are not supported");
  }
}

// One operator per (dtype, op), created on first use and kept for the process.
MPI_Op user_op(DType dtype, ReduceOp op) {
  static std::map<std::pair<DType, ReduceOp>, MPI_Op> ops;
  auto [it, fresh] = ops.try_emplace({dtype, op}, MPI_OP_NULL);
  if (fresh) check_mpi(MPI_Op_create(user_reduction(dtype, op), /*commute=*/1, &it->second), "MPI_Op_create");
  return it->second;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::F64: return MPI_DOUBLE;
    case DType::F32: return MPI_FLOAT;
    case DType::BF16:
    case DType::F16:
    case DType::U16: return MPI_UINT16_T;
    case DType::I64: return MPI_INT64_T;
    case DType::I32: return MPI_INT32_T;
    case DType::I16: return MPI_INT16_T;
    case DType::I8: return MPI_INT8_T;
    case DType::U64: return MPI_UINT64_T;
    case DType::U32: return MPI_UINT32_T;
    case DType::U8:
    case DType::BOOL: return MPI_UINT8_T;
  }
  throw RunError("no MPI type for this dtype");
}

// derived: the operator must accept a derived datatype (a chunk of per-rank blocks).
MPI_Op mpi_op(DType dtype, ReduceOp op, bool derived = false) {
  if (derived || dtype == DType::BF16 || dtype == DType::F16) return user_op(dtype, op);
  if (dtype == DType::BOOL) throw RunError("reductions over BOOL are not supported");
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

// Element k's chunk of a per-rank block: `count` elements of `base`, with an extent of one whole
// per-rank block, so element r of this type is rank r's piece (reduce-scatter, all-gather).
class BlockChunkType {
 public:
  BlockChunkType(MPI_Datatype base, size_t count, size_t block_elements, size_t element_bytes) {
    MPI_Datatype run = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_contiguous(static_cast<int>(count), base, &run), "MPI_Type_contiguous");
    check_mpi(MPI_Type_create_resized(run, 0,
                                      static_cast<MPI_Aint>(block_elements * element_bytes),
                                      &type_),
              "MPI_Type_create_resized");
    MPI_Type_free(&run);
    check_mpi(MPI_Type_commit(&type_), "MPI_Type_commit");
  }
  ~BlockChunkType() { MPI_Type_free(&type_); }
  BlockChunkType(const BlockChunkType&) = delete;
  BlockChunkType& operator=(const BlockChunkType&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

class MpiRequest final : public CommRequest {
 public:
  std::vector<MPI_Request> requests;
  bool test() override {
    if (requests.empty()) return true;
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                          MPI_STATUSES_IGNORE),
              "MPI_Testall");
    if (done) requests.clear();
    return done != 0;
  }
  void wait() override {
    if (requests.empty()) return;
    check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    requests.clear();
  }
  ~MpiRequest() override {
    // A handle dropped while an error unwinds the stack is left to MPI_Abort; otherwise the
    // operation is completed so its buffers can be reused safely.
    if (!requests.empty() && std::uncaught_exceptions() == 0) {
      MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    }
  }
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, size_t max_chunk)
    : comm_(comm), max_chunk_(std::max<size_t>(1, std::min(max_chunk, kDefaultMaxChunk))) {
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::all_reduce(void* data, size_t n, DType dtype, ReduceOp op) {
  auto* p = static_cast<char*>(data);
  const size_t bytes = dtype_size(dtype);
  for (size_t done = 0; done < n; done += max_chunk_) {
    const int count = static_cast<int>(std::min(max_chunk_, n - done));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, p + done * bytes, count, mpi_type(dtype),
                            mpi_op(dtype, op), comm_),
              "MPI_Allreduce");
  }
}

CommHandle MpiCommunicator::start_all_reduce(void* data, size_t n, DType dtype, ReduceOp op) {
  auto handle = std::make_unique<MpiRequest>();
  auto* p = static_cast<char*>(data);
  const size_t bytes = dtype_size(dtype);
  for (size_t done = 0; done < n; done += max_chunk_) {
    const int count = static_cast<int>(std::min(max_chunk_, n - done));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, p + done * bytes, count, mpi_type(dtype),
                             mpi_op(dtype, op), comm_, &request),
              "MPI_Iallreduce");
    handle->requests.push_back(request);
  }
  return handle;
}

void MpiCommunicator::reduce_scatter(void* out, const void* in, size_t n_per_rank, DType dtype,
                                     ReduceOp op) {
  const size_t bytes = dtype_size(dtype);
  if (n_per_rank <= max_chunk_) {
    check_mpi(MPI_Reduce_scatter_block(in, out, static_cast<int>(n_per_rank), mpi_type(dtype),
                                       mpi_op(dtype, op), comm_),
              "MPI_Reduce_scatter_block");
    return;
  }
  for (size_t done = 0; done < n_per_rank; done += max_chunk_) {
    const size_t count = std::min(max_chunk_, n_per_rank - done);
    const BlockChunkType chunk(mpi_type(dtype), count, n_per_rank, bytes);
    check_mpi(MPI_Reduce_scatter_block(static_cast<const char*>(in) + done * bytes,
                                       static_cast<char*>(out) + done * bytes, 1, chunk.get(),
                                       mpi_op(dtype, op, /*derived=*/true), comm_),
              "MPI_Reduce_scatter_block");
  }
}

void MpiCommunicator::all_gather_into(void* out, const void* in, size_t n_per_rank, DType dtype) {
  const size_t bytes = dtype_size(dtype);
  const MPI_Datatype base = mpi_type(dtype);
  if (n_per_rank <= max_chunk_) {
    const int count = static_cast<int>(n_per_rank);
    check_mpi(MPI_Allgather(in, count, base, out, count, base, comm_), "MPI_Allgather");
    return;
  }
  for (size_t done = 0; done < n_per_rank; done += max_chunk_) {
    const size_t count = std::min(max_chunk_, n_per_rank - done);
    const BlockChunkType chunk(base, count, n_per_rank, bytes);
    check_mpi(MPI_Allgather(static_cast<const char*>(in) + done * bytes, static_cast<int>(count),
                            base, static_cast<char*>(out) + done * bytes, 1, chunk.get(), comm_),
              "MPI_Allgather");
  }
}

void MpiCommunicator::all_gather_inplace(void* buf, size_t n_per_rank, DType dtype) {
  const size_t bytes = dtype_size(dtype);
  const MPI_Datatype base = mpi_type(dtype);
  if (n_per_rank <= max_chunk_) {
    check_mpi(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf,
                            static_cast<int>(n_per_rank), base, comm_),
              "MPI_Allgather");
    return;
  }
  for (size_t done = 0; done < n_per_rank; done += max_chunk_) {
    const size_t count = std::min(max_chunk_, n_per_rank - done);
    const BlockChunkType chunk(base, count, n_per_rank, bytes);
    check_mpi(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                            static_cast<char*>(buf) + done * bytes, 1, chunk.get(), comm_),
              "MPI_Allgather");
  }
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += max_chunk_) {
    const int count = static_cast<int>(std::min(max_chunk_, bytes - done));
    check_mpi(MPI_Bcast(p + done, count, MPI_BYTE, root, comm_), "MPI_Bcast");
  }
}

void MpiCommunicator::send(const void* data, size_t bytes, int dest, int tag) {
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  do {  // at least one message, so a zero-byte send still pairs with its recv
    const int count = static_cast<int>(std::min(max_chunk_, bytes - done));
    check_mpi(MPI_Send(p + done, count, MPI_BYTE, dest, tag, comm_), "MPI_Send");
    done += static_cast<size_t>(count);
  } while (done < bytes);
}

void MpiCommunicator::recv(void* data, size_t bytes, int source, int tag) {
  auto* p = static_cast<char*>(data);
  size_t done = 0;
  do {
    const int count = static_cast<int>(std::min(max_chunk_, bytes - done));
    check_mpi(MPI_Recv(p + done, count, MPI_BYTE, source, tag, comm_, MPI_STATUS_IGNORE),
              "MPI_Recv");
    done += static_cast<size_t>(count);
  } while (done < bytes);
}

CommHandle MpiCommunicator::start_send(const void* data, size_t bytes, int dest, int tag) {
  auto handle = std::make_unique<MpiRequest>();
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  do {
    const int count = static_cast<int>(std::min(max_chunk_, bytes - done));
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(p + done, count, MPI_BYTE, dest, tag, comm_, &request), "MPI_Isend");
    handle->requests.push_back(request);
    done += static_cast<size_t>(count);
  } while (done < bytes);
  return handle;
}

void MpiCommunicator::barrier() { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
  return std::make_unique<MpiCommunicator>(sub, max_chunk_);
}

// ---------------------------------------------------------------------------------------------

namespace {

class DoneRequest final : public CommRequest {
 public:
  bool test() override { return true; }
  void wait() override {}
};

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce(void*, size_t, DType, ReduceOp) override {}
  CommHandle start_all_reduce(void*, size_t, DType, ReduceOp) override {
    return std::make_unique<DoneRequest>();
  }
  void reduce_scatter(void* out, const void* in, size_t n, DType dtype, ReduceOp) override {
    if (out != in) std::memmove(out, in, n * dtype_size(dtype));
  }
  void all_gather_into(void* out, const void* in, size_t n, DType dtype) override {
    if (out != in) std::memmove(out, in, n * dtype_size(dtype));
  }
  void all_gather_inplace(void*, size_t, DType) override {}
  void broadcast(void*, size_t, int) override {}
  void send(const void*, size_t, int, int) override {
    throw RunError("send on a single-process communicator: there is no peer");
  }
  void recv(void*, size_t, int, int) override {
    throw RunError("recv on a single-process communicator: there is no peer");
  }
  CommHandle start_send(const void*, size_t, int, int) override {
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
