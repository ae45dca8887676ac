// TopicTable's ready queue: due order, each id once, removal, and an id
// removed and queued again going where it was queued last.
#include "server/jobs/topic_table.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace delayd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(TopicTableTest, ReadyJobsPopInTheOrderQueuedAndEachOnce) {
  TopicTable table;
  EXPECT_TRUE(table.PushReady("t", "a"));
  EXPECT_TRUE(table.PushReady("t", "b"));
  EXPECT_FALSE(table.PushReady("t", "a"));  // queued already
  EXPECT_TRUE(table.PushReady("u", "a"));   // another topic's
  EXPECT_EQ(table.CountsOf("t").ready, 2);
  EXPECT_THAT(table.PopReady("t", 10), ElementsAre("a", "b"));
  EXPECT_EQ(table.CountsOf("t").ready, 0);
  EXPECT_THAT(table.PopReady("t", 10), IsEmpty());
  EXPECT_THAT(table.PopReady("u", 10), ElementsAre("a"));
  EXPECT_THAT(table.PopReady("none", 10), IsEmpty());
}

TEST(TopicTableTest, PopTakesAtMostMaxAndLeavesTheRest) {
  TopicTable table;
  for (int i = 0; i < 5; ++i) table.PushReady("t", absl::StrCat("j", i));
  EXPECT_THAT(table.PopReady("t", 2), ElementsAre("j0", "j1"));
  EXPECT_EQ(table.CountsOf("t").ready, 3);
  EXPECT_THAT(table.PopReady("t", 10), ElementsAre("j2", "j3", "j4"));
}

TEST(TopicTableTest, ARemovedJobIsSkipped) {
  TopicTable table;
  table.PushReady("t", "a");
  table.PushReady("t", "b");
  table.PushReady("t", "c");
  EXPECT_TRUE(table.RemoveReady("t", "b"));
  EXPECT_FALSE(table.RemoveReady("t", "b"));
  EXPECT_FALSE(table.RemoveReady("t", "zz"));
  EXPECT_FALSE(table.RemoveReady("none", "a"));
  EXPECT_EQ(table.CountsOf("t").ready, 2);
  EXPECT_THAT(table.PopReady("t", 10), ElementsAre("a", "c"));
  // Removing the front trims it.
  table.PushReady("t", "d");
  table.PushReady("t", "e");
  EXPECT_TRUE(table.RemoveReady("t", "d"));
  EXPECT_THAT(table.PopReady("t", 1), ElementsAre("e"));
}

// A job moved (removed) and due again (queued) goes where it was queued
// last, not where its first entry was: it was ready last.
TEST(TopicTableTest, AJobRemovedAndQueuedAgainGoesToTheBack) {
  TopicTable table;
  table.PushReady("t", "a");
  table.PushReady("t", "b");
  EXPECT_TRUE(table.RemoveReady("t", "b"));
  table.PushReady("t", "c");
  EXPECT_TRUE(table.RemoveReady("t", "a"));
  EXPECT_TRUE(table.PushReady("t", "a"));
  EXPECT_TRUE(table.PushReady("t", "b"));
  EXPECT_EQ(table.CountsOf("t").ready, 3);
  EXPECT_THAT(table.PopReady("t", 10), ElementsAre("c", "a", "b"));
  EXPECT_EQ(table.CountsOf("t").ready, 0);
  EXPECT_THAT(table.PopReady("t", 10), IsEmpty());
  // Its old entry, behind a live one, is not taken for it.
  table.PushReady("t", "x");
  table.PushReady("t", "a");
  table.PushReady("t", "y");
  EXPECT_TRUE(table.RemoveReady("t", "a"));
  EXPECT_TRUE(table.PushReady("t", "a"));
  EXPECT_THAT(table.PopReady("t", 10), ElementsAre("x", "y", "a"));
}

// Ids too long for a string's inline buffer, and enough of them that the
// set grows many times: the views into the queue stay valid.
TEST(TopicTableTest, ManyLongIdsKeepTheirOrder) {
  TopicTable table;
  const std::string prefix(40, 'x');
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(table.PushReady("t", absl::StrCat(prefix, i)));
  }
  for (int i = 0; i < 10000; i += 2) {
    ASSERT_TRUE(table.RemoveReady("t", absl::StrCat(prefix, i)));
  }
  const std::vector<std::string> popped = table.PopReady("t", 20000);
  ASSERT_EQ(popped.size(), 5000u);
  for (int k = 0; k < 5000; ++k) {
    ASSERT_EQ(popped[k], absl::StrCat(prefix, 2 * k + 1));
  }
}

// The table of topics grows (and moves each topic's queue) while a topic
// holds ready jobs: its views still find them.
TEST(TopicTableTest, ReadyJobsSurviveTheTableOfTopicsGrowing) {
  TopicTable table;
  const std::string prefix(40, 'y');
  for (int i = 0; i < 100; ++i) table.PushReady("t", absl::StrCat(prefix, i));
  table.PushReady("t", "short");
  for (int k = 0; k < 2000; ++k) table.AddLive(absl::StrCat("topic", k), 1, 0);
  EXPECT_FALSE(table.PushReady("t", "short"));
  EXPECT_TRUE(table.RemoveReady("t", absl::StrCat(prefix, 0)));
  const std::vector<std::string> popped = table.PopReady("t", 1000);
  ASSERT_EQ(popped.size(), 100u);
  for (int i = 1; i < 100; ++i)
    EXPECT_EQ(popped[i - 1], absl::StrCat(prefix, i));
  EXPECT_EQ(popped.back(), "short");
}

}  // namespace
}  // namespace delayd::server
