// Definitions the sanitized unit tests (fuzz/meson.build) need from files the fuzz build does
// not compile (docs/faults.md "Sanitizers").
// make_model_family: src/model/model_registry.cpp registers every model family and would pull
// the whole trainer in. The checkpoint tests that call it only save and load a trainer's state
// for some family, so here every job gets the one-tensor stand-in family.
#include "stand_in_family.h"

namespace sg {

std::unique_ptr<ModelFamily> make_model_family(const JobSpec&) {
  return std::make_unique<fuzz::StandInFamily>();
}

}  // namespace sg
