// TopicMatches: a table of globs, agreement with a dynamic-programming
// matcher on random cases, and a pattern that would backtrack
// exponentially.
#include "server/auth/topic_pattern.h"

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

namespace delayd::server::auth {
namespace {

TEST(TopicMatchesTest, Table) {
  struct Case {
    std::string_view pattern;
    std::string_view topic;
    bool matches;
  };
  const Case cases[] = {
      // Exact.
      {"orders", "orders", true},
      {"orders", "orders.eu", false},
      {"orders", "order", false},
      {"orders", "", false},
      {"", "", true},
      {"", "x", false},
      // Prefix.
      {"orders.*", "orders.eu", true},
      {"orders.*", "orders.", true},
      {"orders.*", "orders", false},
      {"orders.*", "billing.x", false},
      {"orders.*", "xorders.eu", false},
      // Everything.
      {"*", "", true},
      {"*", "anything.at:all", true},
      {"**", "x", true},
      // Suffix and middle.
      {"*.dlq", "orders.dlq", true},
      {"*.dlq", "orders.dlq.x", false},
      {"a*b", "ab", true},
      {"a*b", "axxb", true},
      {"a*b", "axxbx", false},
      {"a*b", "b", false},
      {"a*a", "a", false},
      {"a*a", "aa", true},
      // Several stars.
      {"*a*b*", "xxaxxbxx", true},
      {"*a*b*", "xxbxxaxx", false},
      {"a*b*c", "abc", true},
      {"a*b*c", "aXbYbZc", true},
      {"a*b*c", "acb", false},
      {"*ab*ab*", "abab", true},
      {"*ab*ab*", "aba", false},
      {"*aab*", "aaab", true},  // KMP's fallback inside a piece
      {"*abcabd*", "abcabcabd", true},
      {"o*.*.q", "orders.eu.q", true},
      {"o*.*.q", "orders.q", false},
      // Empty topic.
      {"a*", "", false},
      {"*a*", "", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TopicMatches(c.pattern, c.topic), c.matches)
        << "pattern " << c.pattern << ", topic " << c.topic;
  }
}

// The glob by dynamic programming: whether pattern[i:] matches topic[j:].
bool ReferenceMatches(std::string_view pattern, std::string_view topic) {
  std::vector<std::vector<bool>> m(pattern.size() + 1,
                                   std::vector<bool>(topic.size() + 1));
  m[pattern.size()][topic.size()] = true;
  for (size_t i = pattern.size(); i-- > 0;) {
    for (size_t j = topic.size() + 1; j-- > 0;) {
      m[i][j] =
          pattern[i] == '*'
              ? m[i + 1][j] || (j < topic.size() && m[i][j + 1])
              : j < topic.size() && pattern[i] == topic[j] && m[i + 1][j + 1];
    }
  }
  return m[0][0];
}

TEST(TopicMatchesTest, AgreesWithDynamicProgramming) {
  std::mt19937 random(14);
  const auto draw = [&random](std::string_view alphabet, size_t max_size) {
    std::string s(random() % (max_size + 1), ' ');
    for (char& c : s) c = alphabet[random() % alphabet.size()];
    return s;
  };
  for (int i = 0; i < 20000; ++i) {
    const std::string pattern = draw("ab*", 8);
    const std::string topic = draw("ab", 10);
    ASSERT_EQ(TopicMatches(pattern, topic), ReferenceMatches(pattern, topic))
        << "pattern " << pattern << ", topic " << topic;
  }
}

TEST(TopicMatchesTest, PathologicalPatternCompletes) {
  std::string pattern;
  for (int i = 0; i < 30; ++i) pattern += "*a";
  pattern += "b";
  const std::string topic(1000, 'a');
  // Exponential backtracking would not return within the test's lifetime.
  EXPECT_FALSE(TopicMatches(pattern, topic));
  EXPECT_TRUE(TopicMatches(pattern, topic + "b"));
  EXPECT_FALSE(TopicMatches(pattern, std::string(29, 'a') + "b"));
  EXPECT_TRUE(TopicMatches(pattern, std::string(30, 'a') + "b"));
}

}  // namespace
}  // namespace delayd::server::auth
