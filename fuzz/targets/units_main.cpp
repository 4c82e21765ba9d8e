// The main of the sanitized unit tests (fuzz/meson.build, scripts/fuzz --units): doctest's own,
// without the BLAS re-execution of tests/doctest_main.cpp (no BLAS is linked here).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
