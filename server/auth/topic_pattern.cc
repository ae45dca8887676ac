#include "server/auth/topic_pattern.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace delayd::server::auth {
namespace {

// The end of the first occurrence of `needle` (not empty) in `haystack`, or
// npos: Knuth-Morris-Pratt, O(|needle| + |haystack|). `failure` is scratch.
size_t FindEnd(absl::string_view haystack, absl::string_view needle,
               std::vector<size_t>& failure) {
  failure.assign(needle.size(), 0);
  for (size_t i = 1, k = 0; i < needle.size(); ++i) {
    while (k > 0 && needle[i] != needle[k]) k = failure[k - 1];
    if (needle[i] == needle[k]) ++k;
    failure[i] = k;
  }
  for (size_t i = 0, k = 0; i < haystack.size(); ++i) {
    while (k > 0 && haystack[i] != needle[k]) k = failure[k - 1];
    if (haystack[i] == needle[k]) ++k;
    if (k == needle.size()) return i + 1;
  }
  return absl::string_view::npos;
}

}  // namespace

bool TopicMatches(std::string_view std_pattern, std::string_view std_topic) {
  // Debian 12's Abseil has its own string_view type.
  const absl::string_view pattern(std_pattern.data(), std_pattern.size());
  const absl::string_view topic(std_topic.data(), std_topic.size());
  const size_t first_star = pattern.find('*');
  if (first_star == absl::string_view::npos) return pattern == topic;
  const size_t last_star = pattern.rfind('*');
  const absl::string_view head = pattern.substr(0, first_star);
  const absl::string_view tail = pattern.substr(last_star + 1);
  if (head.size() + tail.size() > topic.size() ||
      !absl::StartsWith(topic, head) || !absl::EndsWith(topic, tail)) {
    return false;
  }
  // The pieces between the first and last star, in order, in what lies
  // between head and tail. Taking each piece's first occurrence leaves the
  // most room for the rest, so no choice is ever revisited.
  absl::string_view rest =
      topic.substr(head.size(), topic.size() - head.size() - tail.size());
  std::vector<size_t> failure;
  for (const absl::string_view piece :
       absl::StrSplit(pattern.substr(first_star + 1, last_star - first_star),
                      '*', absl::SkipEmpty())) {
    const size_t end = FindEnd(rest, piece, failure);
    if (end == absl::string_view::npos) return false;
    rest.remove_prefix(end);
  }
  return true;
}

}  // namespace delayd::server::auth
