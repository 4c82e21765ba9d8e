#include "prepare/text_source.h"

#include <algorithm>
#include <filesystem>

#include "data/file_io.h"
#include "prepare/dataset_writer.h"  // kDocumentSeparator
#include "util/error.h"

namespace sg {

namespace fs = std::filesystem;

std::vector<std::string> list_text_files(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {path};
  if (!fs::is_directory(path, ec))
    throw RunError(path + ": no such file or directory; give a .txt file or a directory of them");
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".txt") files.push_back(it->path().string());
  }
  if (ec) throw RunError(path + ": cannot list: " + ec.message());
  if (files.empty()) throw RunError(path + ": no .txt files in this directory");
  std::sort(files.begin(), files.end());
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
