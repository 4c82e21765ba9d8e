#pragma once
// A DocumentSink that keeps what it is given, for checking the readers.
#include <string>
#include <vector>

#include "prepare/document_sink.h"

namespace sg::test {

struct CollectingSink : DocumentSink {
  std::vector<std::string> texts, origins;
  void add(std::string text, std::string origin) override {
    texts.push_back(std::move(text));
    origins.push_back(std::move(origin));
  }
};

}  // namespace sg::test
