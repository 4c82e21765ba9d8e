#pragma once
// Small archives and compressed files for the prepare tests, written with libarchive so no
// external tar/xz is needed: tars (optionally xz/gzip/zstd compressed) and single compressed
// streams (.gz / .zst / .xz of one file).
#include "tests/test_files.h"
#include <archive.h>
#include <archive_entry.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace sg::test {

enum class Filter { kNone, kXz, kGzip, kZstd };

using Members = std::vector<std::pair<std::string, std::string>>;  // (name, contents)

// A tar of members, or (raw = true) just the one member's bytes, through the filter.
inline std::string make_archive(const Members& members, Filter filter, bool raw = false) {
  archive* a = archive_write_new();
  if (filter == Filter::kXz) archive_write_add_filter_xz(a);
  if (filter == Filter::kGzip) archive_write_add_filter_gzip(a);
  if (filter == Filter::kZstd) archive_write_add_filter_zstd(a);
  if (raw) {
    archive_write_set_format_raw(a);
  } else {
    archive_write_set_format_pax_restricted(a);
  }
  archive_write_set_bytes_in_last_block(a, 1);
  std::vector<char> buffer(1 << 22);
  size_t used = 0;
  if (archive_write_open_memory(a, buffer.data(), buffer.size(), &used) != ARCHIVE_OK)
    throw std::runtime_error(archive_error_string(a));
  for (const auto& [name, data] : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    if (archive_write_header(a, e) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buffer.data(), used);
}

}  // namespace sg::test
