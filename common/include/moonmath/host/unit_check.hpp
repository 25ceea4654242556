// Host-only helpers for the packages' C++ unit tests of their planners (not device code).
//   MM_CHECK(cond)     records a failure with file:line and the condition, and goes on;
//   mm_host::throws<E>(f)  true when f() throws E (the planners reject bad input with std::invalid_argument);
//   mm_host::exit_code()   prints the failure count and returns the process exit code (0: all passed).
// Built and run by moonmath_common.testing.run_host_cpp_test.
#pragma once
#include <cstdio>
#include <stdexcept>

namespace mm_host {
inline int failures = 0;

template <typename E = std::invalid_argument, typename F>
bool throws(F f) {
  try {
    f();
  } catch (const E&) {
    return true;
  }
  return false;
}

inline int exit_code() {
  if (failures) std::fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
}  // namespace mm_host

#define MM_CHECK(cond)                                                               \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++mm_host::failures;                                                           \
    }                                                                                \
  } while (0)
