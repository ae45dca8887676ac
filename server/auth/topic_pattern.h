// Topic patterns of grants and quotas: a glob where '*' matches any run of
// characters (also none) and every other character is literal.
#ifndef DELAYD_SERVER_AUTH_TOPIC_PATTERN_H_
#define DELAYD_SERVER_AUTH_TOPIC_PATTERN_H_

#include <string_view>

namespace delayd::server::auth {

// True when `topic` matches `pattern` ('*' any run, all else literal).
// Linear-time, O(|pattern| + |topic|): the pieces between stars are found
// left to right, each with Knuth-Morris-Pratt, and never revisited (no
// exponential backtracking on patterns like "*a*a*a*b").
bool TopicMatches(std::string_view pattern, std::string_view topic);

}  // namespace delayd::server::auth

#endif  // DELAYD_SERVER_AUTH_TOPIC_PATTERN_H_
