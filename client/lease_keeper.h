// LeaseKeeper: renews the leases of deliveries whose handlers still run.
// Each tracked delivery is extended by its lease duration whenever a third
// of its lease is left, on the keeper's own thread, until it is untracked.
//
// Lease ends are kept on the local clock, counted conservatively from when
// the delivery was received (or the extension asked), so a skew between the
// client's and the server's clocks does not make it late.
//
// Thread-safe. Owns its thread; Stop (or the destructor) joins it.
#ifndef DELAYD_CLIENT_LEASE_KEEPER_H_
#define DELAYD_CLIENT_LEASE_KEEPER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace delayd::client {

class LeaseKeeper {
 public:
  // One ExtendLease rpc that gives up after `timeout`; the server's new
  // lease end.
  using ExtendFn = std::function<absl::StatusOr<absl::Time>(
      const std::string& token, absl::Duration extend_by,
      absl::Duration timeout)>;
  using ErrorFn = std::function<void(const absl::Status&)>;

  struct Stats {
    uint64_t extensions = 0;
    uint64_t failures = 0;
  };

  LeaseKeeper(ExtendFn extend, ErrorFn on_error);
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;
  ~LeaseKeeper();

  // Starts renewing `token`, whose lease of length `lease` started no
  // earlier than `received`. REQUIRES: lease > 0; token not tracked.
  void Track(const std::string& token, absl::Time received,
             absl::Duration lease);
  void Untrack(const std::string& token);
  void Stop();
  Stats stats() const;

 private:
  struct Lease {
    absl::Time ends;  // local clock, conservative
    absl::Duration length;
    absl::Time retry_at = absl::InfinitePast();  // after a transient failure
    bool busy = false;                           // an extension is in progress
  };

  void Run();
  // When to extend `lease`.
  static absl::Time RenewAt(const Lease& lease);

  const ExtendFn extend_;
  const ErrorFn on_error_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
  // Bumped by Stop and by a Track that must be renewed before next_wake_.
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_wake_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace delayd::client

#endif  // DELAYD_CLIENT_LEASE_KEEPER_H_
