// The behavioural contract of JobStore (job_store.h), run against every
// implementation: InMemoryJobStore and RocksDbJobStore (in a temp dir, with
// verify_previous_due on, reopened from its files where the test says so).
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/storage/job_store_test_fixture.h"
#include "tests/storage/store_test_util.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage {
namespace {

using ::delayd::storage::testing::Canonical;
using ::delayd::storage::testing::Dump;
using ::delayd::storage::testing::ExpectDueIndexConsistent;
using ::delayd::storage::testing::Harnesses;
using ::delayd::storage::testing::JobStoreTest;
using ::delayd::storage::testing::kAll;
using ::delayd::storage::testing::MakeRecord;
using ::delayd::v1::JOB_STATE_CANCELED;
using ::delayd::v1::JOB_STATE_DEAD;
using ::delayd::v1::JOB_STATE_DONE;
using ::delayd::v1::JOB_STATE_IN_FLIGHT;
using ::delayd::v1::JOB_STATE_READY;
using ::delayd::v1::JOB_STATE_SCHEDULED;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TYPED_TEST_SUITE(JobStoreTest, Harnesses);

TYPED_TEST(JobStoreTest, RoundTripsEveryField) {
  JobRecord record =
      MakeRecord("orders.close", "order-8812", 1'780'000'000'123,
                 JOB_STATE_IN_FLIGHT, std::string("\0bin\xff payload", 13));
  delayd::v1::Job* job = record.mutable_job();
  job->set_attempts(3);
  job->mutable_retry()->set_max_attempts(7);
  job->mutable_retry()->mutable_lease()->set_seconds(30);
  job->mutable_retry()->mutable_initial_backoff()->set_nanos(500'000'000);
  job->mutable_retry()->mutable_max_backoff()->set_seconds(600);
  job->mutable_retry()->set_backoff_multiplier(1.5);
  (*job->mutable_labels())["tenant"] = "acme";
  (*job->mutable_labels())["kind"] = "close";
  *job->mutable_created_at() = UnixMsToTimestamp(1'700'000'000'000);
  *job->mutable_updated_at() = UnixMsToTimestamp(1'700'000'000'001);
  job->set_last_error("lease expired");
  record.set_delivery_nonce(0xfeedfacecafebeef);
  record.set_lease_expires_at_ms(1'780'000'030'123);
  record.set_spec_digest(42);
  this->Put(record, std::nullopt);
  record.set_format_version(kJobRecordFormatVersion);

  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> got,
                         this->store().Get("orders.close", "order-8812"));
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(Canonical(*got), Canonical(record)) << got->DebugString();
    this->harness_.Reopen();
  }
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> missing,
                       this->store().Get("orders.close", "nope"));
  EXPECT_FALSE(missing.has_value());
}

TYPED_TEST(JobStoreTest, DueIndexOrdersAcrossYearsAndWithinAMillisecond) {
  const int64_t k2026 = 1'780'000'000'000;  // 2026-05-28
  const int64_t k2126 = 4'935'000'000'000;  // 2126-05-20
  this->Put(MakeRecord("t", "y2126", k2126), std::nullopt);
  this->Put(MakeRecord("t", "y2026", k2026), std::nullopt);
  this->Put(MakeRecord("t", "before1970", -86'400'000), std::nullopt);
  this->Put(MakeRecord("t", "epoch+1", 1), std::nullopt);
  this->Put(MakeRecord("t", "epoch", 0), std::nullopt);
  // Ties within one millisecond: ordered by topic, then id, bytewise.
  this->Put(MakeRecord("b", "1", k2026 + 1), std::nullopt);
  this->Put(MakeRecord("a", "2", k2026 + 1), std::nullopt);
  this->Put(MakeRecord("a", "10", k2026 + 1), std::nullopt);
  this->Put(MakeRecord("a.b", "0", k2026 + 1), std::nullopt);

  EXPECT_THAT(this->DueEntries(0, kAll),
              ElementsAre(Pair(0, "t/before1970"), Pair(0, "t/epoch"),
                          Pair(1, "t/epoch+1"), Pair(k2026, "t/y2026"),
                          Pair(k2026 + 1, "a/10"), Pair(k2026 + 1, "a/2"),
                          Pair(k2026 + 1, "a.b/0"), Pair(k2026 + 1, "b/1"),
                          Pair(k2126, "t/y2126")));
  // [from, to): the jobs of one millisecond.
  EXPECT_EQ(this->DueEntries(k2026 + 1, k2026 + 2).size(), 4u);
  EXPECT_THAT(this->DueEntries(k2026, k2026 + 1),
              ElementsAre(Pair(k2026, "t/y2026")));
  EXPECT_TRUE(this->DueEntries(k2026 + 2, k2126).empty());
  EXPECT_TRUE(this->DueEntries(5, 5).empty());
  // Negative bounds clamp to 0.
  EXPECT_EQ(this->DueEntries(-100, 1).size(), 2u);

  int visited = 0;
  EXPECT_OK(this->store().ScanDue(
      0, kAll, [&](int64_t, auto, auto) { return ++visited < 3; }));
  EXPECT_EQ(visited, 3);

  // ScanDueFrom: from a key on, itself included when present.
  auto from = [&](int64_t ms, std::string_view topic, std::string_view id,
                  int64_t to) {
    std::vector<std::pair<int64_t, std::string>> out;
    EXPECT_OK(this->store().ScanDueFrom(
        ms, topic, id, to,
        [&](int64_t due, std::string_view t, std::string_view i,
            const DueValue&) {
          out.emplace_back(due, std::string(t) + "/" + std::string(i));
          return true;
        }));
    return out;
  };
  EXPECT_THAT(from(k2026 + 1, "a", "2", k2026 + 2),
              ElementsAre(Pair(k2026 + 1, "a/2"), Pair(k2026 + 1, "a.b/0"),
                          Pair(k2026 + 1, "b/1")));
  EXPECT_THAT(from(k2026 + 1, "a", "3", k2026 + 2),  // not present
              ElementsAre(Pair(k2026 + 1, "a.b/0"), Pair(k2026 + 1, "b/1")));
  EXPECT_THAT(from(k2026 + 1, "b", "1", kAll),
              ElementsAre(Pair(k2026 + 1, "b/1"), Pair(k2126, "t/y2126")));
  EXPECT_THAT(from(k2026 + 1, "", "", k2026 + 2).size(), 4u);
  EXPECT_TRUE(from(k2026 + 1, "c", "", k2026 + 2).empty());

  // ScanFireMillisecond: the entries of one millisecond, as ScanDue.
  auto fire = [&](int64_t ms) {
    std::vector<std::pair<int64_t, std::string>> out;
    EXPECT_OK(this->store().ScanFireMillisecond(
        ms, [&](int64_t due, std::string_view t, std::string_view i) {
          out.emplace_back(due, std::string(t) + "/" + std::string(i));
          return true;
        }));
    return out;
  };
  EXPECT_EQ(fire(k2026 + 1), this->DueEntries(k2026 + 1, k2026 + 2));
  EXPECT_THAT(fire(k2026), ElementsAre(Pair(k2026, "t/y2026")));
  EXPECT_THAT(fire(0),
              ElementsAre(Pair(0, "t/before1970"), Pair(0, "t/epoch")));
  EXPECT_TRUE(fire(k2026 + 2).empty());
  EXPECT_TRUE(fire(std::numeric_limits<int64_t>::max()).empty());
}

TYPED_TEST(JobStoreTest, ReplaceMovesTheDueEntryAndFinalStatesLeaveIt) {
  JobRecord record = MakeRecord("t", "job", 1000);
  this->Put(record, std::nullopt);
  *record.mutable_job()->mutable_fire_at() = UnixMsToTimestamp(5000);
  this->Put(record, 1000);
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(5000, "t/job")));

  record.mutable_job()->set_state(JOB_STATE_READY);  // Same due, new state.
  this->Put(record, 5000);
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(5000, "t/job")));
  this->harness_.Reopen();  // The entry the put left in place is durable.
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(5000, "t/job")));

  record.mutable_job()->set_state(JOB_STATE_DEAD);
  this->Put(record, 5000);
  EXPECT_TRUE(this->DueEntries(0, kAll).empty());
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> got,
                       this->store().Get("t", "job"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->job().state(), JOB_STATE_DEAD);

  record.mutable_job()->set_state(delayd::v1::JOB_STATE_SCHEDULED);  // Redrive.
  this->Put(record, std::nullopt);
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(5000, "t/job")));
  ExpectDueIndexConsistent(Dump(this->store()));
}

// A DONE or CANCELED record with expires_at_ms (kept by --retention) has an
// expiry entry and no due entry; the expiry index orders by expiry time.
JobRecord Retained(std::string_view topic, std::string_view id,
                   delayd::v1::JobState state, int64_t expires_at_ms) {
  JobRecord record = MakeRecord(topic, id, 1000, state);
  record.set_expires_at_ms(expires_at_ms);
  return record;
}

TYPED_TEST(JobStoreTest, RetainedRecordsLiveInTheExpiryIndexOnly) {
  JobRecord live = MakeRecord("t", "a", 1000, JOB_STATE_IN_FLIGHT);
  this->Put(live, std::nullopt);
  // Acked: IN_FLIGHT -> DONE, kept until 9000.
  const Mutation done =
      Mutation::Put(Retained("t", "a", JOB_STATE_DONE, 9000), 1000);
  EXPECT_EQ(done.new_due_ms(), std::nullopt);
  EXPECT_EQ(done.new_expiry_ms(), 9000);
  ASSERT_OK(this->store().Apply({&done, 1}, Durability::kNoSync));
  this->Put(Retained("u", "b", JOB_STATE_CANCELED, 5000), std::nullopt);
  this->Put(Retained("t", "c", JOB_STATE_CANCELED, 9000), std::nullopt);
  // CANCELED without an expiry (canceled in flight): no entry at all.
  this->Put(MakeRecord("t", "d", 1000, JOB_STATE_CANCELED), std::nullopt);

  EXPECT_TRUE(this->DueEntries(0, kAll).empty());
  EXPECT_THAT(
      this->ExpiryEntries(0, kAll),
      ElementsAre(Pair(5000, "u/b"), Pair(9000, "t/a"), Pair(9000, "t/c")));
  EXPECT_THAT(this->ExpiryEntries(0, 9000), ElementsAre(Pair(5000, "u/b")));
  this->harness_.Reopen();
  EXPECT_EQ(this->ExpiryEntries(0, kAll).size(), 3u);
  ExpectDueIndexConsistent(Dump(this->store()));

  // A wrong (or missing) previous expiry is refused, nothing written.
  const testing::StoreDump before = Dump(this->store());
  const Mutation wrong = Mutation::Delete("t", "a", std::nullopt, 8999);
  EXPECT_EQ(this->store().Apply({&wrong, 1}, Durability::kSync).code(),
            absl::StatusCode::kFailedPrecondition);
  const Mutation missing =
      Mutation::Put(MakeRecord("t", "a", 20'000), std::nullopt);
  absl::Status s = this->store().Apply({&missing, 1}, Durability::kSync);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("previous_expiry_ms"));
  EXPECT_EQ(Dump(this->store()), before);

  // Replaced by a live job (Schedule REPLACE): the expiry entry goes, a due
  // entry comes. Swept: record and entry go.
  const Mutation replace =
      Mutation::Put(MakeRecord("t", "a", 20'000), std::nullopt, 9000);
  const Mutation sweep = Mutation::Delete("u", "b", std::nullopt, 5000);
  ASSERT_OK(this->store().Apply(std::vector<Mutation>{replace, sweep},
                                Durability::kNoSync));
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(20'000, "t/a")));
  EXPECT_THAT(this->ExpiryEntries(0, kAll), ElementsAre(Pair(9000, "t/c")));
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> gone,
                       this->store().Get("u", "b"));
  EXPECT_FALSE(gone.has_value());
  this->harness_.Reopen();
  ExpectDueIndexConsistent(Dump(this->store()));
}

TYPED_TEST(JobStoreTest, DeleteRemovesRecordAndDueEntry) {
  this->Put(MakeRecord("t", "a", 10), std::nullopt);
  this->Put(MakeRecord("t", "b", 20), std::nullopt);
  const Mutation del = Mutation::Delete("t", "a", 10);
  ASSERT_OK(this->store().Apply({&del, 1}, Durability::kSync));
  ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> got,
                       this->store().Get("t", "a"));
  EXPECT_FALSE(got.has_value());
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(20, "t/b")));
  this->harness_.Reopen();
  EXPECT_THAT(this->DueEntries(0, kAll), ElementsAre(Pair(20, "t/b")));
  const Mutation absent = Mutation::Delete("t", "never", std::nullopt);
  EXPECT_OK(this->store().Apply({&absent, 1}, Durability::kNoSync));
}

TYPED_TEST(JobStoreTest, BatchIsAllOrNothingOnAViolatedPrecondition) {
  this->Put(MakeRecord("t", "old", 10), std::nullopt);
  std::vector<Mutation> batch;
  for (int i = 0; i < 1000; ++i) {
    batch.push_back(
        Mutation::Put(MakeRecord("t", absl::StrCat("n", i), i), std::nullopt));
  }
  const testing::StoreDump before = Dump(this->store());
  // Wrong previous due for an existing job: refused, nothing written.
  batch.push_back(Mutation::Put(MakeRecord("t", "old", 99), 11));
  absl::Status s = this->store().Apply(batch, Durability::kSync);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("t\\000old"));
  EXPECT_EQ(Dump(this->store()), before);
  // The same job twice: refused, nothing written.
  batch.back() = Mutation::Put(MakeRecord("t", "n5", 99), std::nullopt);
  s = this->store().Apply(batch, Durability::kSync);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(Dump(this->store()), before);
  // An empty topic or id: refused.
  batch.back() = Mutation::Delete("", "x", std::nullopt);
  EXPECT_EQ(this->store().Apply(batch, Durability::kSync).code(),
            absl::StatusCode::kInvalidArgument);
  batch.back() = Mutation::Put(MakeRecord("t", "", 1), std::nullopt);
  EXPECT_EQ(this->store().Apply(batch, Durability::kSync).code(),
            absl::StatusCode::kInvalidArgument);

  batch.back() = Mutation::Put(MakeRecord("t", "old", 99), 10);
  const StoreStats stats_before = this->store().stats();
  ASSERT_OK(this->store().Apply(batch, Durability::kSync));
  const StoreStats stats = this->store().stats();
  EXPECT_EQ(stats.writes, stats_before.writes + 1);
  EXPECT_EQ(stats.mutations_written, stats_before.mutations_written + 1001);
  EXPECT_EQ(this->DueEntries(0, kAll).size(), 1001u);
  ExpectDueIndexConsistent(Dump(this->store()));
}

TYPED_TEST(JobStoreTest, ScanJobsByTopicPrefixAndCursor) {
  for (const char* topic : {"a", "a.b", "ab"}) {
    for (const char* id : {"x1", "x10", "x2", "y"}) {
      this->Put(MakeRecord(topic, id, 5), std::nullopt);
    }
  }
  EXPECT_THAT(this->Ids("a", "", ""), ElementsAre("x1", "x10", "x2", "y"));
  EXPECT_THAT(this->Ids("a", "x1", ""), ElementsAre("x1", "x10"));
  EXPECT_THAT(this->Ids("a", "x", "x1"), ElementsAre("x10", "x2"));
  EXPECT_THAT(this->Ids("a", "", "x2"), ElementsAre("y"));
  EXPECT_THAT(this->Ids("a", "x", "y"), ElementsAre());
  EXPECT_THAT(this->Ids("a", "z", ""), ElementsAre());
  EXPECT_THAT(this->Ids("nope", "", ""), ElementsAre());

  // Paging with an early stop, as ListJobs does.
  std::vector<std::string> pages;
  std::string cursor;
  for (;;) {
    std::vector<std::string> page;
    ASSERT_OK(
        this->store().ScanJobs("a.b", "", cursor, [&](const JobRecord& r) {
          page.push_back(r.job().id());
          return page.size() < 2;
        }));
    if (page.empty()) break;
    cursor = page.back();
    pages.insert(pages.end(), page.begin(), page.end());
  }
  EXPECT_THAT(pages, ElementsAre("x1", "x10", "x2", "y"));

  std::vector<std::string> topics;
  ASSERT_OK(this->store().ScanTopics([&](std::string_view t) {
    topics.emplace_back(t);
    return true;
  }));
  EXPECT_THAT(topics, ElementsAre("a", "a.b", "ab"));
}

TYPED_TEST(JobStoreTest, MultiGetAnswersInKeyOrder) {
  this->Put(MakeRecord("t", "1", 1), std::nullopt);
  this->Put(MakeRecord("u", "2", 2), std::nullopt);
  const std::vector<JobKeyView> keys = {{"u", "2"}, {"t", "0"}, {"t", "1"}};
  ASSERT_OK_AND_ASSIGN(auto got, this->store().MultiGet(keys));
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(got[0].has_value());
  EXPECT_EQ(got[0]->job().id(), "2");
  EXPECT_FALSE(got[1].has_value());
  ASSERT_TRUE(got[2].has_value());
  EXPECT_EQ(got[2]->job().id(), "1");
}

// Large batches, which RocksDbJobStore reads by walking one iterator from
// key to key (seeking over gaps, and handing scattered keys to RocksDB's
// MultiGet), in every shape: neighbours, gaps, deleted records, duplicates,
// keys before the first and after the last record, other topics, records in
// files and in the memtable. Each answer is Get's.
TYPED_TEST(JobStoreTest, MultiGetOfLargeBatchesAgreesWithGet) {
  auto id = [](int i) { return absl::StrFormat("k%04d", i); };
  auto put_range = [&](int from, int to) {
    std::vector<Mutation> batch;
    for (int i = from; i < to; ++i) {
      batch.push_back(
          Mutation::Put(MakeRecord("t", id(i), 1000 + i), std::nullopt));
    }
    ASSERT_OK(this->store().Apply(batch, Durability::kSync));
  };
  put_range(0, 1000);
  this->Put(MakeRecord("s", id(1), 1), std::nullopt);
  this->harness_.Reopen();  // RocksDB: these are in a table file now
  put_range(1000, 2000);
  this->Put(MakeRecord("u", id(1), 1), std::nullopt);
  std::vector<Mutation> deletes;  // every third record, in both halves
  for (int i = 0; i < 2000; i += 3) {
    deletes.push_back(Mutation::Delete("t", id(i), 1000 + i));
  }
  ASSERT_OK(this->store().Apply(deletes, Durability::kSync));

  std::vector<std::pair<std::string, std::string>> dense;  // reversed
  for (int i = 1400; i >= 600; --i) dense.emplace_back("t", id(i));
  std::vector<std::pair<std::string, std::string>> edges = {
      {"t", ""},    {"t", "a"},   {"s", id(1)}, {"u", id(1)},   {"x", id(1)},
      {"t", id(5)}, {"t", id(5)}, {"t", "zzz"}, {"t", id(1999)}};
  for (int i = 0; i < 100; ++i) edges.emplace_back("t", id(i));
  std::vector<std::pair<std::string, std::string>> scattered;
  for (int i = 1; i < 2000; i += 23) scattered.emplace_back("t", id(i));
  for (int i = 0; i < 20; ++i) scattered.emplace_back("t", id(i));
  std::vector<std::pair<std::string, std::string>> gone;
  for (int i = 0; i < 2000; i += 3) gone.emplace_back("t", id(i));

  for (const auto& batch : {dense, edges, scattered, gone}) {
    std::vector<JobKeyView> keys;
    for (const auto& [topic, job_id] : batch) keys.push_back({topic, job_id});
    ASSERT_OK_AND_ASSIGN(auto got, this->store().MultiGet(keys));
    ASSERT_EQ(got.size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_OK_AND_ASSIGN(std::optional<JobRecord> one,
                           this->store().Get(keys[i].topic, keys[i].id));
      ASSERT_EQ(got[i].has_value(), one.has_value())
          << keys[i].topic << "/" << keys[i].id;
      if (one.has_value()) {
        EXPECT_EQ(Canonical(*got[i]), Canonical(*one))
            << keys[i].topic << "/" << keys[i].id;
      }
    }
  }
  // What the batches hold, spelled out: of the dense one, the records not
  // deleted (i % 3 != 0); none of `gone`.
  std::vector<JobKeyView> keys;
  for (const auto& [topic, job_id] : dense) keys.push_back({topic, job_id});
  ASSERT_OK_AND_ASSIGN(auto got, this->store().MultiGet(keys));
  for (size_t k = 0; k < keys.size(); ++k) {
    const int i = 1400 - static_cast<int>(k);
    ASSERT_EQ(got[k].has_value(), i % 3 != 0) << i;
    if (got[k].has_value()) {
      EXPECT_EQ(got[k]->job().id(), id(i));
    }
  }
  keys.clear();
  for (const auto& [topic, job_id] : gone) keys.push_back({topic, job_id});
  ASSERT_OK_AND_ASSIGN(got, this->store().MultiGet(keys));
  for (const auto& record : got) EXPECT_FALSE(record.has_value());
}

TYPED_TEST(JobStoreTest, CorruptRecordInALargeBatchIsRefusedNamingItsKey) {
  std::vector<Mutation> batch;
  for (int i = 0; i < 100; ++i) {
    batch.push_back(Mutation::Put(
        MakeRecord("t", absl::StrFormat("k%04d", i), 1), std::nullopt));
  }
  ASSERT_OK(this->store().Apply(batch, Durability::kSync));
  this->harness_.PutRawRecord("t", "k0050x", "\xff\xfe garbage");
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(absl::StrFormat("k%04d", i));
  ids.push_back("k0050x");
  std::vector<JobKeyView> keys;
  for (const std::string& i : ids) keys.push_back({"t", i});
  const absl::Status status = this->store().MultiGet(keys).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("t\\000k0050x"));
}

TYPED_TEST(JobStoreTest, CorruptRecordIsRefusedNamingItsKey) {
  this->Put(MakeRecord("t", "good", 1), std::nullopt);
  this->harness_.PutRawRecord("t", "bad", "\xff\xfe garbage");
  absl::StatusOr<std::optional<JobRecord>> got = this->store().Get("t", "bad");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  EXPECT_THAT(got.status().message(), HasSubstr("t\\000bad"));
  const std::vector<JobKeyView> keys = {{"t", "good"}, {"t", "bad"}};
  EXPECT_EQ(this->store().MultiGet(keys).status().code(),
            absl::StatusCode::kDataLoss);
  const absl::Status scan = this->store().ScanJobs(
      "t", "", "", [](const JobRecord&) { return true; });
  EXPECT_EQ(scan.code(), absl::StatusCode::kDataLoss) << scan;
  EXPECT_THAT(scan.message(), HasSubstr("t\\000bad"));
  // The good record still reads.
  EXPECT_OK(this->store().Get("t", "good"));
}

TYPED_TEST(JobStoreTest, RecordOfANewerFormatIsRefused) {
  JobRecord future = MakeRecord("t", "future", 1);
  future.set_format_version(kJobRecordFormatVersion + 1);
  this->harness_.PutRawRecord("t", "future", future.SerializeAsString());
  absl::StatusOr<std::optional<JobRecord>> got =
      this->store().Get("t", "future");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr("t\\000future"));
  EXPECT_THAT(got.status().message(), HasSubstr("format_version 2"));
}

TYPED_TEST(JobStoreTest, ReopenKeepsEverything) {
  for (int i = 0; i < 200; ++i) {
    this->Put(MakeRecord(absl::StrCat("t", i % 3), absl::StrCat("id", i), i * 7,
                         i % 5 == 0 ? JOB_STATE_DEAD : JOB_STATE_READY),
              std::nullopt);
  }
  const testing::StoreDump before = Dump(this->store());
  EXPECT_EQ(before.records.size(), 200u);
  EXPECT_EQ(before.due_keys.size(), 160u);
  this->harness_.Reopen();
  EXPECT_EQ(Dump(this->store()), before);
  ExpectDueIndexConsistent(before);
}

TYPED_TEST(JobStoreTest, ConcurrentWritersAllLand) {
  constexpr int kThreads = 8;
  constexpr int kBatches = 25;
  constexpr int kPerBatch = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<Mutation> batch;
        for (int i = 0; i < kPerBatch; ++i) {
          batch.push_back(
              Mutation::Put(MakeRecord("t", absl::StrCat(t, "-", b, "-", i), b),
                            std::nullopt));
        }
        EXPECT_OK(this->store().Apply(
            batch, b % 2 ? Durability::kSync : Durability::kNoSync));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const testing::StoreDump dump = Dump(this->store());
  EXPECT_EQ(dump.records.size(), size_t{kThreads * kBatches * kPerBatch});
  ExpectDueIndexConsistent(dump);
  EXPECT_GE(this->store().stats().writes, uint64_t{kThreads * kBatches});
}

}  // namespace
}  // namespace delayd::storage
