// Chunked reading of a dump file, decompressing bzip2 stream after stream.
#include "prepare/wikipedia_dump_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace sg {
namespace {

constexpr size_t kInputBufferBytes = 1 << 20;

const char* bzip2_error_name(int code) {
  switch (code) {
    case BZ_DATA_ERROR:
      return "corrupt data (CRC or block error)";
    case BZ_DATA_ERROR_MAGIC:
      return "no bzip2 header";
    case BZ_MEM_ERROR:
      return "out of memory";
    case BZ_PARAM_ERROR:
      return "bad parameters";
    default:
      return "unexpected libbz2 error";
  }
}

}  // namespace

WikipediaDumpStream::WikipediaDumpStream(std::string path)
    : path_(std::move(path)),
      file_(std::fopen(path_.c_str(), "rb"), &std::fclose),
      input_(kInputBufferBytes) {
  if (!file_) {
    throw RunError(
        fmt::format("{}: cannot open the Wikipedia dump: {}", path_, std::strerror(errno)));
  }
  refill();
  const auto* head = reinterpret_cast<const unsigned char*>(stream_.next_in);
  const size_t n = stream_.avail_in;
  if (n >= 3 && head[0] == 'B' && head[1] == 'Z' && head[2] == 'h') {
    compressed_ = true;
    start_bzip2_stream();
    return;
  }
  size_t k = (n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF) ? 3 : 0;  // BOM
  while (k < n && (head[k] == ' ' || head[k] == '\t' || head[k] == '\r' || head[k] == '\n')) ++k;
  if (k < n && head[k] == '<') return;
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(n, 4); ++i) first += fmt::format(" {:02x}", head[i]);
  throw RunError(
      fmt::format("{}: neither a bzip2-compressed nor a plain XML dump (first bytes:{}); pass a "
                  "pages-articles .xml.bz2 or .xml file from dumps.wikimedia.org",
                  path_, n == 0 ? " none, the file is empty" : first));
}

WikipediaDumpStream::~WikipediaDumpStream() {
  if (decoder_open_) BZ2_bzDecompressEnd(&stream_);
}

bool WikipediaDumpStream::refill() {
  const size_t n = std::fread(input_.data(), 1, input_.size(), file_.get());
  if (n < input_.size()) {
    if (std::ferror(file_.get()))
      throw RunError(fmt::format("{}: read error at byte {}: {}", path_, file_offset_ + n,
                                 std::strerror(errno)));
    at_eof_ = true;
  }
  file_offset_ += static_cast<int64_t>(n);
  stream_.next_in = input_.data();
  stream_.avail_in = static_cast<unsigned>(n);
  return n > 0;
}

void WikipediaDumpStream::start_bzip2_stream() {
  // Init clears the counters but not the input window: keep what the last stream left unread.
  char* next_in = stream_.next_in;
  const unsigned avail_in = stream_.avail_in;
  const int rc = BZ2_bzDecompressInit(&stream_, 0, 0);
  if (rc != BZ_OK)
    throw RunError(
        fmt::format("{}: cannot start bzip2 decompression: {}", path_, bzip2_error_name(rc)));
  stream_.next_in = next_in;
  stream_.avail_in = avail_in;
  decoder_open_ = true;
  ++streams_;
}

size_t WikipediaDumpStream::read(char* out, size_t capacity) {
  const size_t n = compressed_ ? read_bzip2(out, capacity) : read_plain(out, capacity);
  bytes_out_ += static_cast<int64_t>(n);
  return n;
}

size_t WikipediaDumpStream::read_plain(char* out, size_t capacity) {
  if (stream_.avail_in == 0 && (at_eof_ || !refill())) return 0;
  const size_t n = std::min<size_t>(capacity, stream_.avail_in);
  std::memcpy(out, stream_.next_in, n);
  stream_.next_in += n;
  stream_.avail_in -= static_cast<unsigned>(n);
  return n;
}

size_t WikipediaDumpStream::read_bzip2(char* out, size_t capacity) {
  while (decoder_open_) {
    if (stream_.avail_in == 0 && !at_eof_) refill();
    stream_.next_out = out;
    const unsigned window = static_cast<unsigned>(std::min<size_t>(capacity, 1u << 30));
    stream_.avail_out = window;
    const int rc = BZ2_bzDecompress(&stream_);
    const size_t produced = window - stream_.avail_out;
    if (rc == BZ_STREAM_END) {
      BZ2_bzDecompressEnd(&stream_);
      decoder_open_ = false;
      // A multistream dump concatenates streams of 100 pages each: go on while input remains.
      if (stream_.avail_in == 0 && !at_eof_) refill();
      if (stream_.avail_in > 0) start_bzip2_stream();
    } else if (rc != BZ_OK) {
      throw RunError(fmt::format(
          "{}: bzip2 stream {} is corrupt near compressed byte {}: {}; the dump is damaged, "
          "download it again",
          path_, streams_, bytes_in(),
          rc == BZ_DATA_ERROR_MAGIC && streams_ > 1
              ? "data after the end of the previous stream is not bzip2"
              : bzip2_error_name(rc)));
    } else if (produced == 0 && stream_.avail_in == 0 && at_eof_) {
      throw RunError(fmt::format(
          "{}: the file ends at byte {} inside bzip2 stream {}: it is truncated (an interrupted "
          "download?); download it again",
          path_, file_offset_, streams_));
    }
    if (produced > 0) return produced;
  }
  return 0;
}

}  // namespace sg
