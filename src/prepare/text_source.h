#pragma once
// `prepare text`'s reader. SRC is a file or a directory searched recursively for *.txt files
// (sorted by path, so the order is fixed). A file is one document, unless it contains the
// separator "\n\n\f\n" (a blank line, a form feed, a newline: what --emit-text writes), where it
// is cut into several. A lone form feed is ordinary text: old source files and RFCs use it as
// a page break. Text is passed on as it is; the writer repairs invalid UTF-8.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prepare/document_sink.h"
#include "prepare/progress_meter.h"

namespace sg {

// The input files of a prepare source: {path} when it is a regular file, else the regular files
// under the directory `path` whose path keep() accepts, sorted. Symbolic links are followed (a
// tree of links to the data is common); one that loops, to itself or back to a folder above it,
// throws RunError naming it, as does a source that is missing or a device or FIFO (`expected`
// says what it should be, e.g. "a .txt file or a directory of them").
std::vector<std::string> list_source_files(const std::string& path,
                                           const std::function<bool(const std::string&)>& keep,
                                           const std::string& expected);

// The *.txt files under path (path itself when it is a file), sorted. Throws RunError when
// path does not exist or holds no .txt file.
std::vector<std::string> list_text_files(const std::string& path);

// Sends every document of the file to sink: origin "FILE" or "FILE#k" (k from 1) when split.
void read_text_file(const std::string& path, DocumentSink& sink);

void read_text_documents(const std::string& src, DocumentSink& sink, ProgressMeter* progress);

// Total size in bytes of the files (for progress).
int64_t total_file_size(const std::vector<std::string>& files);

}  // namespace sg
