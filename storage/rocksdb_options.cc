#include "storage/rocksdb_options.h"

#include <cstring>
#include <memory>

#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/table_properties_collectors.h"
#include "storage/key_codec.h"

namespace delayd::storage {
namespace {

// The topic of a `jobs` key (`topic \0 id`), with its '\0': the prefix by
// which RocksDB keeps one memtable insert hint per topic.
class TopicPrefix final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "delayd.TopicPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    // RocksDB asks only for keys InDomain; any other key is its own prefix.
    const auto* nul =
        static_cast<const char*>(std::memchr(key.data(), '\0', key.size()));
    return nul == nullptr
               ? key
               : rocksdb::Slice(key.data(),
                                static_cast<size_t>(nul - key.data()) + 1);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return std::memchr(key.data(), '\0', key.size()) != nullptr;
  }
};

// The due index's insert hint: one for the whole family (an empty prefix),
// for the due keys only. A crowd's range deletion (its start key is a bare
// due time, shorter than any due key) must not use it: RocksDB 7.8 keeps
// one hint per prefix for both of a memtable's skip lists, the point
// entries' and the range deletions', and a hint taken from one and used in
// the other breaks the skip list (an assertion in debug builds, a corrupt
// memtable in others). Later releases hint point entries only.
class DueHintPrefix final : public rocksdb::SliceTransform {
 public:
  const char* Name() const override { return "delayd.DueHintPrefix"; }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), 0);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return key.size() > kDueTimeBytes;
  }
};

}  // namespace

rocksdb::DBOptions MakeDbOptions(const RocksDbJobStore::Options& options) {
  rocksdb::DBOptions db;
  if (options.env != nullptr) db.env = options.env;
  // A failed WAL write or flush puts the DB in read-only mode (background
  // error): the sticky write error RocksDbJobStore documents. Default, but
  // load-bearing, so spelled out.
  db.paranoid_checks = true;
  // Replay the WAL up to its first damaged record and stop there: a torn
  // tail (crash mid-append) is expected and must not block a restart, and
  // stopping (rather than skipping) keeps the recovered state a prefix of
  // the acknowledged writes. Default, spelled out.
  db.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // Pipelined writes let the WAL write of the next write group overlap the
  // memtable insert of the previous one. store_bench on the 2-core target
  // (batch 100, sync=always, 8 writers): +6% with free cores (233k vs 220k
  // jobs/s), a wash when other processes compete for the CPU. Not
  // compatible with unordered_write, which we do not use.
  db.enable_pipelined_write = options.pipelined_write;
  // A writer that queues behind RocksDB's write leader blocks at once
  // instead of spinning and yielding for up to 100 us first (the default,
  // tuned for many cores). On two cores shared with gRPC, the delivery
  // threads and the load generator, that spinning takes CPU the leader and
  // the rest need. Unary Schedule under --sync=always, 8 connections, four
  // alternated rounds of 8 s: 5.2 -> 5.9k, 5.8 -> 6.7k, 4.4 -> 5.4k and
  // 6.9 -> 6.4k calls/s; server CPU a call 220 -> 197, 205 -> 175,
  // 212 -> 202 and 171 -> 181 us (BENCHMARKS.md, "Issue 19: a lighter load
  // generator, two lease threads, writers that block").
  db.enable_write_thread_adaptive_yield = false;
  // two_write_queues only pays off for WritePrepared transactions (commit
  // markers that skip the memtable); we have none.
  db.two_write_queues = false;
  // Both column families share the WAL; `due` fills its memtable much
  // slower than `jobs`, and an unflushed column family pins every WAL file
  // since its oldest write. This cap forces that flush, bounding disk use
  // and the WAL replay at restart. At the default 32 MiB (was 256 MiB, under
  // which the 64 MiB `jobs` memtable was the real bound), a restart after
  // 1M jobs loaded and kill -9 takes 0.53-0.85 s instead of 0.80-1.05 s,
  // for about 6% of the batched load (bench/restart/measure.sh;
  // BENCHMARKS.md, "Restart after a burst").
  db.max_total_wal_size = options.max_total_wal_bytes;
  // After a crash, Open replays the WAL into memtables and flushes them to
  // new L0 files before returning, so the replayed (possibly torn) WAL files
  // become obsolete at once. avoid_flush_during_recovery=true opened 2-5x
  // faster after kill -9 in store_bench, but keeps those WAL files alive,
  // and its combination with point-in-time recovery and several column
  // families has a history of bugs (rocksdb PRs #7859, #9634, #9905): we
  // keep the well-trodden default. Default, spelled out.
  db.avoid_flush_during_recovery = false;
  db.max_background_jobs = options.background_jobs;
  // Smooth SST writeback instead of one large fsync per file.
  db.bytes_per_sync = 1 << 20;
  // Keep RocksDB's own info log bounded.
  db.max_log_file_size = 16 << 20;
  db.keep_log_file_num = 5;
  return db;
}

std::vector<rocksdb::ColumnFamilyDescriptor> MakeColumnFamilies(
    const RocksDbJobStore::Options& options) {
  // One bounded LRU cache for all families; index and filter blocks are
  // charged to it too, so block_cache_bytes bounds read-side memory.
  std::shared_ptr<rocksdb::Cache> cache =
      rocksdb::NewLRUCache(options.block_cache_bytes);

  // jobs: point lookups by key dominate (every Schedule, Cancel, Ack reads
  // the record first, and a new id is a miss). A whole-key Bloom filter of
  // 10 bits/key (~1% false positives) lets most misses skip the data
  // blocks; a hash index inside data blocks speeds the hits; a memtable
  // Bloom filter speeds misses on recent writes. LZ4: cheap on 2 cores and
  // payloads are often compressible.
  rocksdb::BlockBasedTableOptions jobs_table;
  jobs_table.block_cache = cache;
  jobs_table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  jobs_table.whole_key_filtering = true;
  jobs_table.cache_index_and_filter_blocks = true;
  jobs_table.pin_l0_filter_and_index_blocks_in_cache = true;
  jobs_table.data_block_index_type =
      rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  rocksdb::ColumnFamilyOptions jobs;
  jobs.table_factory.reset(rocksdb::NewBlockBasedTableFactory(jobs_table));
  jobs.write_buffer_size = options.jobs_write_buffer_bytes;
  jobs.memtable_prefix_bloom_size_ratio = 0.02;
  jobs.memtable_whole_key_filtering = true;
  jobs.compression = rocksdb::kLZ4Compression;
  jobs.level_compaction_dynamic_level_bytes = true;
  jobs.disable_auto_compactions = options.defer_auto_compactions;
  // Where the last insert of a topic went, kept as a hint for the next:
  // inserts near it (a herd's acks delete records in key order) search the
  // memtable's skip list from there instead of from its top. RocksDB keeps
  // one hint per topic and memtable; a concurrent memtable write ignores
  // it. With the hints on both families, a herd of 300k drained at 103,
  // 111 and 120k/s against 97, 79 and 118k/s without (alternated); 8
  // writers of batches of 100 random jobs (store_bench, sync=none) showed
  // no difference (241, 236, 245k/s against 224, 249, 241k/s). BENCHMARKS.md,
  // "Issue 19: memtable insert hints, ...".
  jobs.memtable_insert_with_hint_prefix_extractor =
      std::make_shared<TopicPrefix>();

  // due: only range scans in key order, so no filter; 16 KiB blocks make
  // sequential scans cheaper (keys share their time and topic prefix,
  // which delta encoding removes). Every fire, ack and reschedule deletes an
  // entry near the front of the index, so tombstones pile up where scans
  // start: compact files dense with deletions early.
  rocksdb::BlockBasedTableOptions due_table;
  due_table.block_cache = cache;
  due_table.whole_key_filtering = false;
  due_table.block_size = 16 << 10;
  due_table.cache_index_and_filter_blocks = true;
  rocksdb::ColumnFamilyOptions due;
  due.table_factory.reset(rocksdb::NewBlockBasedTableFactory(due_table));
  due.write_buffer_size = options.due_write_buffer_bytes;
  due.compression = rocksdb::kLZ4Compression;
  due.level_compaction_dynamic_level_bytes = true;
  due.disable_auto_compactions = options.defer_auto_compactions;
  // One insert hint for the whole family (an empty prefix): a due key
  // starts with its time, so a herd's attempt marks and acks land near each
  // other whatever their topic. A hint per due time would keep one per
  // millisecond written (hundreds of bytes each). Not for range deletions
  // (DueHintPrefix).
  due.memtable_insert_with_hint_prefix_extractor =
      std::make_shared<DueHintPrefix>();
  due.table_properties_collector_factories.push_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(
          /*sliding_window_size=*/64 << 10, /*deletion_trigger=*/16 << 10));

  // expiry: the same kind of index as due (keys only, range scans from the
  // front, every sweep deletes at the front), written only under
  // --retention: the same options.
  rocksdb::ColumnFamilyOptions expiry = due;
  expiry.table_factory.reset(rocksdb::NewBlockBasedTableFactory(due_table));

  // default: only the meta record.
  rocksdb::ColumnFamilyOptions meta;
  meta.write_buffer_size = 1 << 20;

  return {
      rocksdb::ColumnFamilyDescriptor(rocksdb::kDefaultColumnFamilyName, meta),
      rocksdb::ColumnFamilyDescriptor(kJobsColumnFamily, jobs),
      rocksdb::ColumnFamilyDescriptor(kDueColumnFamily, due),
      rocksdb::ColumnFamilyDescriptor(kExpiryColumnFamily, expiry),
  };
}

rocksdb::ReadOptions DueScanReadOptions() {
  rocksdb::ReadOptions read;
  read.fill_cache = false;
  read.readahead_size = 2 << 20;
  return read;
}

rocksdb::ReadOptions FireScanReadOptions() { return rocksdb::ReadOptions(); }

}  // namespace delayd::storage
