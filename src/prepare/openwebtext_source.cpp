#include "prepare/openwebtext_source.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "prepare/text_source.h"
#include "util/error.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_jsonl(std::string_view name) {
  return ends_with(name, ".jsonl") || ends_with(name, ".jsonl.gz") || ends_with(name, ".jsonl.zst");
}

bool is_archive(std::string_view name) {
  return ends_with(name, ".xz") || ends_with(name, ".tar") || ends_with(name, ".tgz") ||
         ends_with(name, ".tar.gz") || ends_with(name, ".tar.zst");
}

using ArchivePtr = std::unique_ptr<archive, int (*)(archive*)>;

ArchivePtr new_reader() {
  ArchivePtr a(archive_read_new(), archive_read_free);
  if (!a) throw std::bad_alloc();
  archive_read_support_filter_all(a.get());
  return a;
}

std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m != nullptr ? m : "unknown libarchive error";
}

class OpenWebTextReader {
 public:
  OpenWebTextReader(DocumentSink& sink, ProblemLog& problems, ProgressMeter* progress)
      : sink_(sink), problems_(problems), progress_(progress) {}

  void read_file(const std::string& path, int64_t offset_before) {
    offset_before_ = offset_before;
    if (ends_with(path, ".txt")) {
      sink_.add(clean_openwebtext_document(read_plain(path)), path);
    } else if (is_jsonl(path)) {
      read_jsonl(path);
    } else {
      ArchivePtr a = new_reader();
      archive_read_support_format_tar(a.get());
      archive_read_support_format_gnutar(a.get());
      if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
        problems_.report(path + ": cannot open as an archive (" + archive_message(a.get()) +
                         "); skipped");
        return;
      }
      read_archive(a.get(), path, a.get(), 0);
    }
  }

 private:
  static std::string read_plain(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) throw RunError(path + ": cannot open");
    std::string out;
    char buffer[1 << 16];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) out.append(buffer, n);
    std::fclose(f);
    return out;
  }

  void report_progress(archive* outer) {
    if (progress_ != nullptr) progress_->set_input_done(offset_before_ + archive_filter_bytes(outer, -1));
  }

  // Members of `a`: .txt documents, nested tar archives (one level: the subsets of the
  // official file), anything else ignored. `outer` is the file-level archive, for progress.
  void read_archive(archive* a, const std::string& name, archive* outer, int depth) {
    archive_entry* entry = nullptr;
    std::string member, data;
    bool member_failed = false;  // already reported: do not report the same damage twice
    for (;;) {
      const int r = archive_read_next_header(a, &entry);
      if (r == ARCHIVE_EOF) return;
      if (r < ARCHIVE_WARN) {
        if (!member_failed)
          problems_.report(name + ": corrupt or truncated after " +
                         (member.empty() ? std::string("its start") : "member " + member) + " (" +
                         archive_message(a) + "); the rest of it is skipped");
        return;
      }
      if (archive_entry_filetype(entry) != AE_IFREG) continue;
      member = archive_entry_pathname(entry) != nullptr ? archive_entry_pathname(entry) : "?";
      const bool txt = ends_with(member, ".txt");
      const bool nested = depth == 0 && is_archive(member);
      if (!txt && !nested) continue;
      member_failed = !read_member(a, name + ":" + member, data);
      if (member_failed) continue;  // the next header tells whether the archive can go on
      if (txt) {
        sink_.add(clean_openwebtext_document(data), name + ":" + member);
      } else {
        ArchivePtr inner = new_reader();
        archive_read_support_format_tar(inner.get());
        archive_read_support_format_gnutar(inner.get());
        if (archive_read_open_memory(inner.get(), data.data(), data.size()) != ARCHIVE_OK) {
          problems_.report(name + ":" + member + ": not a readable archive (" +
                           archive_message(inner.get()) + "); skipped");
        } else {
          read_archive(inner.get(), name + ":" + member, outer, depth + 1);
        }
      }
      report_progress(outer);
    }
  }

  // Reads the current member's data; reports and returns false on a corrupt member.
  bool read_member(archive* a, const std::string& where, std::string& data) {
    data.clear();
    char buffer[1 << 16];
    for (;;) {
      const la_ssize_t n = archive_read_data(a, buffer, sizeof buffer);
      if (n == 0) return true;
      if (n < 0) {
        problems_.report(where + ": corrupt at byte " + std::to_string(data.size()) + " of the member (" +
                         archive_message(a) + "); skipped");
        return false;
      }
      data.append(buffer, static_cast<size_t>(n));
    }
  }

  void read_jsonl(const std::string& path) {
    ArchivePtr a = new_reader();
    archive_read_support_format_raw(a.get());
    archive_entry* entry = nullptr;
    if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK ||
        archive_read_next_header(a.get(), &entry) != ARCHIVE_OK) {
      problems_.report(path + ": cannot read (" + archive_message(a.get()) + "); skipped");
      return;
    }
    std::string pending;
    int64_t line_number = 0;
    char buffer[1 << 16];
    auto take_line = [&](std::string_view line) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
      const auto where = path + ":" + std::to_string(line_number);
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) {
        problems_.report(where + ": not valid JSON (or not UTF-8); line skipped");
        return;
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
        problems_.report(where + ": no \"text\" string field; line skipped");
        return;
      }
      sink_.add(j["text"].get<std::string>(), where);
    };
    for (;;) {
      const la_ssize_t n = archive_read_data(a.get(), buffer, sizeof buffer);
      if (n < 0) {
        problems_.report(path + ": corrupt or truncated after line " + std::to_string(line_number) +
                         " (" + archive_message(a.get()) + "); the rest is skipped");
        return;
      }
      if (n == 0) break;
      pending.append(buffer, static_cast<size_t>(n));
      size_t begin = 0;
      for (size_t end; (end = pending.find('\n', begin)) != std::string::npos; begin = end + 1)
        take_line(std::string_view(pending).substr(begin, end - begin));
      pending.erase(0, begin);
      report_progress(a.get());
    }
    if (!pending.empty()) take_line(pending);
  }

  DocumentSink& sink_;
  ProblemLog& problems_;
  ProgressMeter* progress_;
  int64_t offset_before_ = 0;
};

}  // namespace

std::string clean_openwebtext_document(std::string_view text) {
  // re.sub("\n\n\n+", "\n\n", text).strip()
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\n') {
      size_t j = i;
      while (j < text.size() && text[j] == '\n') ++j;
      out.append(std::min<size_t>(j - i, 2), '\n');
      i = j;
    } else {
      out.push_back(text[i++]);
    }
  }
  const char* space = " \t\n\r\v\f";
  const size_t first = out.find_first_not_of(space);
  if (first == std::string::npos) return "";
  const size_t last = out.find_last_not_of(space);
  return out.substr(first, last - first + 1);
}

std::vector<std::string> list_openwebtext_inputs(const std::string& src) {
  const auto files = list_source_files(
      src,
      [](const std::string& name) {
        return ends_with(name, ".txt") || is_jsonl(name) || is_archive(name);
      },
      "openwebtext.tar.xz, a directory of its urlsf_subset*.xz files or of .txt files, or a .jsonl "
      "file");
  if (files.empty())
    throw RunError(src + ": no .txt, .jsonl(.gz|.zst) or .xz/.tar files in this directory");
  return files;
}

void read_openwebtext(const std::string& src, DocumentSink& sink, ProblemLog& problems,
                      ProgressMeter* progress) {
  const auto files = list_openwebtext_inputs(src);
  OpenWebTextReader reader(sink, problems, progress);
  int64_t done = 0;
  std::error_code ec;
  for (const auto& f : files) {
    reader.read_file(f, done);
    done += static_cast<int64_t>(fs::file_size(f, ec));
    if (progress != nullptr) progress->set_input_done(done);
  }
}

}  // namespace sg
