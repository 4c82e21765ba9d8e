#pragma once
// Where the dataset readers (OpenWebText, Wikipedia, text) hand their documents: the tokenizer
// and shard writer implement it, tests implement it to collect what a reader produced.
#include <string>

namespace sg {

class DocumentSink {
 public:
  virtual ~DocumentSink() = default;
  // text: one whole document, cleaned; origin: where it came from (a file, a member, a title),
  // for progress and error messages.
  virtual void add(std::string text, std::string origin) = 0;
};

}  // namespace sg
