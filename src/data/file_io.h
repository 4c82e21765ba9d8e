#pragma once
// File primitives shared by token shards and checkpoints: a read-only memory map, and a writer
// that makes a file appear complete or not at all (temp file, fsync, rename, fsync directory).
// Both throw sg::RunError naming the file. (Used by src/checkpoint/ too; a candidate for
// src/util/ once that area exists.)
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace sg {

// What `path` is when it exists and is not a regular file, as a phrase for an error line: "a
// directory", "a FIFO (named pipe)", "a character device", "a block device", "a socket", and
// with follow_links = false also "a symbolic link". "" for a regular file or a missing path.
std::string special_file_kind(const std::string& path, bool follow_links);

// Opens path read-only if it is a regular file, and never blocks doing so: a FIFO with no
// writer would block open(2) forever, so it is opened with O_NONBLOCK and refused after fstat.
// Returns the descriptor (blocking mode restored, close-on-exec), or -1 with `why` set to a
// phrase naming the problem: "cannot open (No such file or directory)", "is a directory, not a
// regular file", "is a FIFO (named pipe), not a regular file", ...
int open_regular_file(const std::string& path, std::string& why);

// Reads a regular file (opened as above): all of it, or its first `limit` bytes; *complete
// (when not null) says whether that was the whole file. false with `why` set as above.
bool read_regular_file(const std::string& path, std::vector<uint8_t>& out, std::string& why,
                       size_t limit = SIZE_MAX, bool* complete = nullptr);
bool read_regular_file(const std::string& path, std::string& out, std::string& why);

// Read-only, private mapping of a whole file. Movable; the mapped address never changes, so
// pointers into data() stay valid when the object is moved.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }  // nullptr for an empty file
  size_t size() const { return size_; }

 private:
  void unmap() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Writes `path` through `path.tmp-<pid>`; commit() flushes, fsyncs, renames over `path` and
// fsyncs the directory. Destroyed without commit() (an exception midway), it removes the temp
// file, so a reader never sees a half-written file under the final name.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  void write(const void* bytes, size_t n);
  void commit();
  size_t bytes_written() const { return written_; }
  // XXH3-64 (16 hex digits) of everything written, computed as it streams by, so checkpoints
  // get their checksums without reading the files back.
  std::string checksum_hex() const;

 private:
  std::string path_, temp_path_;
  std::FILE* file_ = nullptr;
  size_t written_ = 0;
  void* hash_state_ = nullptr;  // XXH3_state_t, kept opaque so xxhash.h stays out of headers
};

// A whole text file written through AtomicFileWriter.
void write_text_file(const std::string& path, const std::string& text);

// fsync a directory so that a rename or unlink inside it survives a crash.
void fsync_directory(const std::string& dir);

// XXH3-64 of a whole file (or of a buffer) as 16 lower-case hex digits.
std::string xxh3_hex(const void* bytes, size_t n);
std::string xxh3_hex(uint64_t hash);
std::string file_xxh3_hex(const std::string& path);

}  // namespace sg
