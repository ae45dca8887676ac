#include "tests/storage/store_test_util.h"

#include <stdlib.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <set>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "storage/key_codec.h"
#include "tests/support/status_matchers.h"

namespace delayd::storage::testing {
namespace {

absl::Status RawWrite(const std::string& path, const std::string& cf,
                      std::string_view key, const std::string_view* value) {
  // Whatever column families the store has (layout 1 lacks `expiry`).
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  if (!s.ok()) return absl::InternalError(s.ToString());
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const std::string& name : names) cfs.push_back({name, {}});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(rocksdb::DBOptions(), path, cfs, &handles, &raw);
  if (!s.ok()) return absl::InternalError(s.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyHandle* target = nullptr;
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    if (h->GetName() == cf) target = h;
  }
  if (target == nullptr) {
    s = rocksdb::Status::InvalidArgument("no column family ", cf);
  } else if (value != nullptr) {
    s = db->Put(rocksdb::WriteOptions(), target,
                rocksdb::Slice(key.data(), key.size()),
                rocksdb::Slice(value->data(), value->size()));
  } else {
    s = db->Delete(rocksdb::WriteOptions(), target,
                   rocksdb::Slice(key.data(), key.size()));
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  rocksdb::Status closed = db->Close();
  if (s.ok()) s = closed;
  return s.ok() ? absl::OkStatus() : absl::InternalError(s.ToString());
}

}  // namespace

std::unique_ptr<RocksDbJobStore> MustOpenRocksDb(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RocksDbJobStore>> store =
      RocksDbJobStore::Open(path, RocksDbJobStore::Options());
  EXPECT_OK(store.status());
  return store.ok() ? *std::move(store) : nullptr;
}

TempDir::TempDir() {
  std::string pattern = ::testing::TempDir() + "delayd_storage_XXXXXX";
  char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::Status RawPut(const std::string& path, const std::string& cf,
                    std::string_view key, std::string_view value) {
  return RawWrite(path, cf, key, &value);
}

absl::Status RawDelete(const std::string& path, const std::string& cf,
                       std::string_view key) {
  return RawWrite(path, cf, key, nullptr);
}

JobRecord MakeRecord(std::string_view topic, std::string_view id,
                     int64_t fire_at_ms, delayd::v1::JobState state,
                     std::string_view payload) {
  JobRecord record;
  delayd::v1::Job* job = record.mutable_job();
  job->set_topic(std::string(topic));
  job->set_id(std::string(id));
  job->set_payload(std::string(payload));
  job->set_state(state);
  *job->mutable_fire_at() = UnixMsToTimestamp(fire_at_ms);
  return record;
}

std::string Canonical(const JobRecord& record) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    record.SerializeToCodedStream(&coded);
  }  // The streams trim `out` to the written size when they go.
  return out;
}

StoreDump Dump(const JobStore& store) {
  StoreDump dump;
  std::vector<std::string> topics;
  EXPECT_OK(store.ScanTopics([&](std::string_view topic) {
    topics.emplace_back(topic);
    return true;
  }));
  for (const std::string& topic : topics) {
    EXPECT_OK(store.ScanJobs(topic, "", "", [&](const JobRecord& r) {
      dump.records[EncodeJobKey(r.job().topic(), r.job().id())] = Canonical(r);
      return true;
    }));
  }
  EXPECT_OK(store.ScanDue(
      0, std::numeric_limits<int64_t>::max(),
      [&](int64_t due, std::string_view topic, std::string_view id) {
        dump.due_keys.push_back(EncodeDueKey(due, topic, id));
        return true;
      }));
  EXPECT_OK(store.ScanExpiry(
      0, std::numeric_limits<int64_t>::max(),
      [&](int64_t expires, std::string_view topic, std::string_view id) {
        dump.expiry_keys.push_back(EncodeDueKey(expires, topic, id));
        return true;
      }));
  return dump;
}

void ExpectDueIndexConsistent(const StoreDump& dump) {
  std::set<std::string> expected;
  std::set<std::string> expected_expiry;
  for (const auto& [key, bytes] : dump.records) {
    JobRecord record;
    ASSERT_TRUE(record.ParseFromString(bytes));
    if (std::optional<int64_t> due = DueIndexEntryOf(record)) {
      expected.insert(
          EncodeDueKey(*due, record.job().topic(), record.job().id()));
    }
    if (std::optional<int64_t> expires = ExpiryIndexEntryOf(record)) {
      expected_expiry.insert(
          EncodeDueKey(*expires, record.job().topic(), record.job().id()));
    }
  }
  const std::set<std::string> actual(dump.due_keys.begin(),
                                     dump.due_keys.end());
  EXPECT_EQ(actual.size(), dump.due_keys.size()) << "duplicate due entries";
  EXPECT_TRUE(actual == expected)
      << "due index has " << actual.size() << " entries, records want "
      << expected.size();
  const std::set<std::string> actual_expiry(dump.expiry_keys.begin(),
                                            dump.expiry_keys.end());
  EXPECT_TRUE(actual_expiry == expected_expiry)
      << "expiry index has " << dump.expiry_keys.size()
      << " entries, records want " << expected_expiry.size();
}

}  // namespace delayd::storage::testing
