// Helpers shared by the fuzz targets: a check that stops the run when a
// property fails, and the splitting of one input into several strings.
// Header-only; each target is one thread.
#ifndef DELAYD_TESTS_FUZZ_FUZZ_UTIL_H_
#define DELAYD_TESTS_FUZZ_FUZZ_UTIL_H_

#include <sanitizer/common_interface_defs.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

// A property of the code under test failed: names it and aborts, which
// libFuzzer reports as a crash and saves the input. The message goes
// through the sanitizer's report channel too, so that it survives run.sh's
// -close_fd_mask=2 (the targets' own stderr closed).
#define FUZZ_CHECK(cond)                                               \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, \
                   __LINE__, #cond);                                   \
      __sanitizer_report_error_summary("FUZZ_CHECK failed: " #cond     \
                                       " at " __FILE__                 \
                                       ":" FUZZ_CHECK_STR(__LINE__));  \
      std::abort();                                                    \
    }                                                                  \
  } while (false)
#define FUZZ_CHECK_STR(x) FUZZ_CHECK_STR2(x)
#define FUZZ_CHECK_STR2(x) #x

namespace delayd::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// `text` cut at each `sep` into at most `max_parts` parts (the last one
// keeps any further separators); always at least one part.
inline std::vector<std::string> Split(std::string_view text, char sep,
                                      size_t max_parts) {
  std::vector<std::string> parts;
  while (parts.size() + 1 < max_parts) {
    const size_t at = text.find(sep);
    if (at == std::string_view::npos) break;
    parts.emplace_back(text.substr(0, at));
    text.remove_prefix(at + 1);
  }
  parts.emplace_back(text);
  return parts;
}

}  // namespace delayd::fuzz

#endif  // DELAYD_TESTS_FUZZ_FUZZ_UTIL_H_
