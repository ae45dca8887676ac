#include "storage/store_meta.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "rocksdb/iterator.h"
#include "storage/job_record.h"
#include "storage/key_codec.h"
#include "storage/rocksdb_status.h"

namespace delayd::storage {
namespace {

absl::StatusOr<bool> ColumnFamilyEmpty(rocksdb::DB* db,
                                       rocksdb::ColumnFamilyHandle* cf) {
  std::unique_ptr<rocksdb::Iterator> it(
      db->NewIterator(rocksdb::ReadOptions(), cf));
  it->SeekToFirst();
  if (it->Valid()) return false;
  if (!it->status().ok()) {
    return FromRocksDb(it->status(), "storage: cannot read the store");
  }
  return true;
}

}  // namespace

absl::Status WriteMeta(rocksdb::DB* db, uint32_t layout_version,
                       const std::string& path) {
  StoreMeta meta;
  meta.set_layout_version(layout_version);
  rocksdb::WriteOptions sync;
  sync.sync = true;
  rocksdb::Status s = db->Put(sync, db->DefaultColumnFamily(), kMetaKey,
                              meta.SerializeAsString());
  // Flush it at once: an unflushed column family pins every WAL file
  // written since, and the default one is otherwise never written again.
  if (s.ok()) s = db->Flush(rocksdb::FlushOptions(), db->DefaultColumnFamily());
  return FromRocksDb(
      s, absl::StrCat("storage: cannot write the meta record at ", path));
}

absl::StatusOr<uint32_t> CheckOrCreateMeta(rocksdb::DB* db,
                                           rocksdb::ColumnFamilyHandle* jobs,
                                           rocksdb::ColumnFamilyHandle* due,
                                           const std::string& path) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), db->DefaultColumnFamily(),
                              kMetaKey, &value);
  if (s.IsNotFound()) {
    for (rocksdb::ColumnFamilyHandle* cf : {jobs, due}) {
      absl::StatusOr<bool> empty = ColumnFamilyEmpty(db, cf);
      if (!empty.ok()) return empty.status();
      if (!*empty) {
        return absl::DataLossError(absl::StrCat(
            "storage: RocksDB at ", path, " holds data in column family ",
            cf->GetName(), " but no meta record (key ", kMetaKey,
            "): not a delayd store, or a damaged one"));
      }
    }
    if (absl::Status w = WriteMeta(db, kStoreLayoutVersion, path); !w.ok()) {
      return w;
    }
    return kStoreLayoutVersion;
  }
  if (!s.ok()) {
    return FromRocksDb(
        s, absl::StrCat("storage: cannot read the meta record at ", path));
  }
  StoreMeta meta;
  if (!meta.ParseFromString(value) || meta.layout_version() == 0) {
    return absl::DataLossError(absl::StrCat(
        "storage: RocksDB at ", path, ": corrupt meta record (key ", kMetaKey,
        ", ", value.size(), " bytes)"));
  }
  if (meta.layout_version() > kStoreLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "storage: RocksDB at ", path, " has layout version ",
        meta.layout_version(), ", newer than this binary opens (",
        kStoreLayoutVersion, "); it was written by a newer delayd"));
  }
  return meta.layout_version();
}

}  // namespace delayd::storage
