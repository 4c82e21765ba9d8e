#include "data/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

std::string kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

template <typename Bytes>
bool read_regular(const std::string& path, Bytes& out, std::string& why, size_t limit,
                  bool* complete) {
  const int fd = open_regular_file(path, why);
  if (fd < 0) return false;
  struct stat st{};
  ::fstat(fd, &st);  // cannot fail on an open descriptor; a size of 0 (procfs) still reads on
  const size_t expected = static_cast<size_t>(st.st_size);
  out.resize(std::min(expected, limit));
  size_t got = 0;
  bool failed = false;
  for (;;) {
    if (got == out.size()) {
      if (got >= limit) break;
      out.resize(std::min(limit, std::max<size_t>(2 * got, 65536)));  // the file grew
    }
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = "cannot read (" + errno_text() + ")";
      failed = true;
      break;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (complete != nullptr) {
    char extra = 0;
    *complete = got < limit || ::read(fd, &extra, 1) == 0;
  }
  ::close(fd);
  out.resize(got);
  return !failed;
}

}  // namespace

std::string special_file_kind(const std::string& path, bool follow_links) {
  struct stat st{};
  if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return "";
  return kind_of_mode(st.st_mode);
}

int open_regular_file(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = "cannot open (" + errno_text() + ")";
    return -1;
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    why = "cannot stat (" + errno_text() + ")";
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    why = "is " + kind_of_mode(st.st_mode) + ", not a regular file";
    ::close(fd);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

bool read_regular_file(const std::string& path, std::vector<uint8_t>& out, std::string& why,
                       size_t limit, bool* complete) {
  return read_regular(path, out, why, limit, complete);
}

bool read_regular_file(const std::string& path, std::string& out, std::string& why) {
  return read_regular(path, out, why, SIZE_MAX, nullptr);
}

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

void write_text_file(const std::string& path, const std::string& text) {
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace sg
