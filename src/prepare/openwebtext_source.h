#pragma once
// `prepare openwebtext`'s reader. SRC may be
//   - the official openwebtext.tar.xz: a tar of urlsf_subset*.xz members, each itself an
//     xz-compressed tar of .txt documents (the inner archives are read from memory);
//   - a directory holding those subset files (or any .tar / .tar.xz / .xz tars of .txt files);
//   - a directory of .txt files (one document each);
//   - a .jsonl file, optionally .jsonl.gz or .jsonl.zst, one {"text": ...} object per line;
// a directory may mix these; it is searched recursively and read in sorted path order.
//
// A .txt document is cleaned as the Hugging Face "openwebtext" loader does (runs of three or
// more newlines become two, surrounding whitespace is stripped), so the documents equal those of
// the JSONL/Parquet copies people use. JSONL "text" is taken as it is.
//
// Bad input is reported to `problems` (file, member or line, and what is wrong) and skipped: a
// corrupt or truncated member, a line that is not JSON, a line without a "text" string. A
// corrupt outer archive stops that archive after the members read so far.
#include <cstdint>
#include <string>
#include <vector>

#include "prepare/document_sink.h"
#include "prepare/problem_log.h"
#include "prepare/progress_meter.h"

namespace sg {

// The input files SRC stands for, sorted (SRC itself when it is a file). Throws RunError when
// SRC does not exist or a directory holds nothing readable.
std::vector<std::string> list_openwebtext_inputs(const std::string& src);

void read_openwebtext(const std::string& src, DocumentSink& sink, ProblemLog& problems,
                      ProgressMeter* progress);

// The Hugging Face loader's cleaning of one .txt document.
std::string clean_openwebtext_document(std::string_view text);

}  // namespace sg
