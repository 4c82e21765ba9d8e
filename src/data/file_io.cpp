#include "data/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

// Header-only use of libxxhash-dev: nothing to link. AVX2 rather than the AVX-512 path, whose
// intrinsics trip GCC 12 -Wmaybe-uninitialized false positives; the hash value is the same.
#define XXH_INLINE_ALL
#if defined(__AVX2__)
#define XXH_VECTOR 2  // XXH_AVX2
#endif
#include <xxhash.h>

#include "util/error.h"

namespace sg {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw RunError(path + ": cannot open: " + errno_text());
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    throw RunError(path + ": cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw RunError(path + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {  // mmap of length 0 is an error; an empty file maps to nullptr
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      throw RunError(path + ": cannot memory-map: " + why);
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { unmap(); }

void MappedFile::unmap() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), temp_path_(path + ".tmp-" + std::to_string(::getpid())) {
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (file_ == nullptr) throw RunError(temp_path_ + ": cannot create: " + errno_text());
  auto* state = XXH3_createState();
  XXH3_64bits_reset(state);
  hash_state_ = state;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) {  // not committed: leave nothing behind
    std::fclose(file_);
    std::remove(temp_path_.c_str());
  }
  XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_));
}

void AtomicFileWriter::write(const void* bytes, size_t n) {
  if (file_ == nullptr) throw RunError(path_ + ": write after commit");
  if (n == 0) return;
  if (std::fwrite(bytes, 1, n, file_) != n)
    throw RunError(temp_path_ + ": write failed: " + errno_text());
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_state_), bytes, n);
  written_ += n;
}

void AtomicFileWriter::commit() {
  if (file_ == nullptr) throw RunError(path_ + ": committed twice");
  const bool flushed = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  const std::string why = flushed ? "" : errno_text();
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    std::remove(temp_path_.c_str());
    throw RunError(temp_path_ + ": write failed: " + (flushed ? errno_text() : why));
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const std::string err = errno_text();
    std::remove(temp_path_.c_str());
    throw RunError(path_ + ": cannot rename the finished temp file into place: " + err);
  }
  fsync_directory(std::filesystem::path(path_).parent_path().string());
}

std::string AtomicFileWriter::checksum_hex() const {
  return xxh3_hex(XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_state_)));
}

void fsync_directory(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw RunError(d + ": cannot open directory to sync it: " + errno_text());
  const int rc = ::fsync(fd);
  const std::string why = rc == 0 ? "" : errno_text();
  ::close(fd);
  if (rc != 0) throw RunError(d + ": cannot sync directory: " + why);
}

std::string xxh3_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::string xxh3_hex(const void* bytes, size_t n) { return xxh3_hex(XXH3_64bits(bytes, n)); }

std::string file_xxh3_hex(const std::string& path) {
  const MappedFile file(path);
  return xxh3_hex(file.data(), file.size());
}

}  // namespace sg
