#include "prepare/text_source.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "data/file_io.h"
#include "prepare/dataset_writer.h"  // kDocumentSeparator
#include "util/error.h"

namespace sg {

namespace fs = std::filesystem;

namespace {

struct Folder {
  std::string path;
  dev_t device;
  ino_t inode;
};

std::string loop_error(const std::string& path, const std::string& detail) {
  return path + ": a symbolic link loop (" + detail + "); remove or fix the link, or point " +
         "prepare at a folder without it";
}

// Appends the kept regular files under chain.back(); chain holds the folders from the source
// down, to catch a link back to one of them.
void walk(std::vector<Folder>& chain, const std::function<bool(const std::string&)>& keep,
          std::vector<std::string>& files) {
  const std::string dir = chain.back().path;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string path = it->path().string();
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) continue;  // a dangling link: nothing to read
      if (err == ELOOP) throw RunError(loop_error(path, std::strerror(err)));
      throw RunError(path + ": cannot read (" + std::strerror(err) +
                     "); check its permissions or move it out of the source");
    }
    if (S_ISDIR(st.st_mode)) {
      for (const Folder& f : chain)
        if (f.device == st.st_dev && f.inode == st.st_ino)
          throw RunError(loop_error(path, "it leads back to " + f.path + ", a folder above it"));
      chain.push_back(Folder{path, st.st_dev, st.st_ino});
      walk(chain, keep, files);
      chain.pop_back();
    } else if (S_ISREG(st.st_mode) && keep(path)) {
      files.push_back(path);
    }
  }
  if (ec) throw RunError(dir + ": cannot list (" + ec.message() + "); check its permissions");
}

}  // namespace

std::vector<std::string> list_source_files(const std::string& path,
                                           const std::function<bool(const std::string&)>& keep,
                                           const std::string& expected) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ELOOP) throw RunError(loop_error(path, std::strerror(err)));
    throw RunError(path + ": " +
                   (err == ENOENT ? std::string("no such file or directory")
                                  : "cannot read (" + std::string(std::strerror(err)) + ")") +
                   "; give " + expected);
  }
  if (S_ISREG(st.st_mode)) return {path};
  if (!S_ISDIR(st.st_mode))
    throw RunError(path + ": is " + special_file_kind(path, true) + "; give " + expected);
  std::vector<Folder> chain{Folder{path, st.st_dev, st.st_ino}};
  std::vector<std::string> files;
  walk(chain, keep, files);
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> list_text_files(const std::string& path) {
  const auto files = list_source_files(
      path, [](const std::string& f) { return fs::path(f).extension() == ".txt"; },
      "a .txt file or a directory of them");
  if (files.empty()) throw RunError(path + ": no .txt files in this directory");
  return files;
}

int64_t total_file_size(const std::vector<std::string>& files) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& f : files) {
    const auto size = fs::file_size(f, ec);
    if (!ec) total += static_cast<int64_t>(size);
  }
  return total;
}

void read_text_file(const std::string& path, DocumentSink& sink) {
  const MappedFile file(path);
  const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  if (text.find(kDocumentSeparator) == std::string_view::npos) {
    sink.add(std::string(text), path);
    return;
  }
  size_t begin = 0;
  for (int k = 1;; ++k) {
    const size_t end = text.find(kDocumentSeparator, begin);
    const std::string_view doc = text.substr(begin, end == std::string_view::npos ? end : end - begin);
    sink.add(std::string(doc), path + "#" + std::to_string(k));
    if (end == std::string_view::npos) break;
    begin = end + kDocumentSeparator.size();
  }
}

void read_text_documents(const std::string& src, DocumentSink& sink, ProgressMeter* progress) {
  const auto files = list_text_files(src);
  int64_t done = 0;
  std::error_code ec;
  for (const auto& f : files) {
    read_text_file(f, sink);
    done += static_cast<int64_t>(fs::file_size(f, ec));
    if (progress != nullptr) progress->set_input_done(done);
  }
}

}  // namespace sg
