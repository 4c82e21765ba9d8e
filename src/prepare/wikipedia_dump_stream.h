#pragma once
// The bytes of a MediaWiki XML dump, read in chunks from a .xml.bz2 (one bzip2 stream, or the
// concatenated streams of a "multistream" dump) or from a plain .xml file. Never holds more
// than one input buffer: dumps are tens of GB uncompressed.
#include <bzlib.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace sg {

class WikipediaDumpStream {
 public:
  // Opens `path` and decides by its first bytes: "BZh" is bzip2, '<' (after an optional BOM or
  // blanks) is XML. Throws RunError when it cannot be opened or is neither.
  explicit WikipediaDumpStream(std::string path);
  ~WikipediaDumpStream();
  WikipediaDumpStream(const WikipediaDumpStream&) = delete;
  WikipediaDumpStream& operator=(const WikipediaDumpStream&) = delete;

  // Fills up to `capacity` bytes of XML; returns 0 only at the end of the dump. Throws RunError
  // naming the file and compressed byte offset when the bzip2 data is corrupt or truncated.
  size_t read(char* out, size_t capacity);

  bool compressed() const { return compressed_; }
  int64_t bytes_in() const {
    return file_offset_ - static_cast<int64_t>(stream_.avail_in);
  }                                                 // consumed from the file
  int64_t bytes_out() const { return bytes_out_; }  // XML produced
  const std::string& path() const { return path_; }

 private:
  bool refill();  // reads the next input buffer; false at end of file
  size_t read_plain(char* out, size_t capacity);
  size_t read_bzip2(char* out, size_t capacity);
  void start_bzip2_stream();

  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::vector<char> input_;
  bz_stream stream_{};
  bool compressed_ = false, decoder_open_ = false, at_eof_ = false;
  int streams_ = 0;  // bzip2 streams begun, for the error messages of multistream dumps
  int64_t file_offset_ = 0, bytes_out_ = 0;
};

}  // namespace sg
