#include "client/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace delayd::client {
namespace {

// The server's limit on extend_by.
constexpr absl::Duration kMaxExtension = absl::Hours(12);

bool Transient(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

LeaseKeeper::LeaseKeeper(ExtendFn extend, ErrorFn on_error)
    : extend_(std::move(extend)),
      on_error_(std::move(on_error)),
      thread_([this] { Run(); }) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

void LeaseKeeper::Track(const std::string& token, absl::Time received,
                        absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  const Lease& added = leases_[token] = Lease{received + lease, lease};
  if (RenewAt(added) < next_wake_) ++changes_;
}

void LeaseKeeper::Untrack(const std::string& token) {
  absl::MutexLock lock(&mu_);
  leases_.erase(token);
}

void LeaseKeeper::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    ++changes_;
  }
  thread_.join();
}

LeaseKeeper::Stats LeaseKeeper::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Time LeaseKeeper::RenewAt(const Lease& lease) {
  return std::max(lease.ends - lease.length / 3, lease.retry_at);
}

void LeaseKeeper::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // The lease to renew first.
    std::string token;
    absl::Time when = absl::InfiniteFuture();
    for (const auto& [t, lease] : leases_) {
      if (!lease.busy && RenewAt(lease) < when) {
        when = RenewAt(lease);
        token = t;
      }
    }
    next_wake_ = when;
    if (absl::Now() < when) {
      const uint64_t seen = changes_;
      const auto moved_on = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return changes_ != seen;
      };
      const absl::Condition changed(&moved_on);
      if (when == absl::InfiniteFuture()) {
        mu_.Await(changed);
      } else {
        mu_.AwaitWithDeadline(changed, when);
      }
      continue;
    }
    Lease& lease = leases_[token];
    lease.busy = true;
    const absl::Duration extend_by = std::min(lease.length, kMaxExtension);
    const absl::Time asked = absl::Now();
    const absl::Duration timeout =
        std::max(lease.ends - asked, absl::Milliseconds(100));
    mu_.Unlock();
    absl::StatusOr<absl::Time> result = extend_(token, extend_by, timeout);
    mu_.Lock();
    auto it = leases_.find(token);
    if (result.ok()) {
      ++stats_.extensions;
      if (it != leases_.end()) {
        it->second.ends = asked + extend_by;
        it->second.busy = false;
      }
      continue;
    }
    ++stats_.failures;
    if (it != leases_.end()) {
      const absl::Time retry_at =
          absl::Now() + std::max(it->second.length / 10, absl::Milliseconds(1));
      if (Transient(result.status()) && retry_at < it->second.ends) {
        it->second.retry_at = retry_at;  // the lease may still be alive
        it->second.busy = false;
      } else {
        leases_.erase(it);  // stale, gone or refused: nothing to keep alive
      }
    }
    if (on_error_) {
      const absl::Status error(
          result.status().code(),
          absl::StrCat("ExtendLease failed: ", result.status().message()));
      mu_.Unlock();
      on_error_(error);
      mu_.Lock();
    }
  }
}

}  // namespace delayd::client
