#include "server/core/quota_keeper.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace delayd::server {

QuotaKeeper::Ticket& QuotaKeeper::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    keeper_ = std::exchange(other.keeper_, nullptr);
    principal_ = std::move(other.principal_);
    pending_ = std::move(other.pending_);
    pending_bytes_ = std::move(other.pending_bytes_);
    subscription_ = std::exchange(other.subscription_, false);
  }
  return *this;
}

void QuotaKeeper::Ticket::Release() {
  if (keeper_ == nullptr) return;
  QuotaKeeper* const keeper = std::exchange(keeper_, nullptr);
  int64_t open = -1;
  {
    absl::MutexLock lock(&keeper->mu_);
    State& state = keeper->states_[principal_];
    const auto release = [](const auto& held, auto& reserved) {
      for (const auto& [pattern, n] : held) {
        auto it = reserved.find(pattern);
        if (it != reserved.end() && (it->second -= n) <= 0) reserved.erase(it);
      }
    };
    release(pending_, state.reserved);
    release(pending_bytes_, state.reserved_bytes);
    if (subscription_) open = --state.subscriptions;
  }
  if (open >= 0 && keeper->metrics_ != nullptr) {
    keeper->metrics_->Subscriptions(principal_, open);
  }
  pending_.clear();
  pending_bytes_.clear();
  subscription_ = false;
}

absl::Status QuotaKeeper::Refuse(const Caller& caller, absl::string_view quota,
                                 std::string message) {
  if (metrics_ != nullptr) metrics_->Refused(caller.name(), quota);
  return absl::ResourceExhaustedError(std::move(message));
}

absl::Status QuotaKeeper::CheckPending(
    const Caller& caller, absl::string_view kind,
    const std::vector<auth::Quotas::Pending>& quotas,
    const std::vector<int64_t>& adding,
    const absl::flat_hash_map<std::string, int64_t>& reserved) {
  const bool bytes = kind == "pending_bytes";
  for (size_t q = 0; q < quotas.size(); ++q) {
    if (adding[q] == 0) continue;
    const auth::Quotas::Pending& quota = quotas[q];
    const std::string_view pattern = quota.pattern;
    const TopicTable::Live live =
        topics_->LiveWhere([pattern](absl::string_view t) {
          return auth::TopicMatches(pattern, {t.data(), t.size()});
        });
    const auto held = reserved.find(quota.pattern);
    const int64_t in_use = (bytes ? live.payload_bytes : live.jobs) +
                           (held == reserved.end() ? 0 : held->second);
    if (in_use + adding[q] > quota.limit) {
      return Refuse(
          caller, kind,
          absl::StrCat("quota ", kind, " ", quota.pattern, " of principal '",
                       caller.principal()->name, "': ", in_use,
                       bytes ? " bytes of payload" : " jobs",
                       " pending there, and this call adds ", adding[q],
                       "; the limit is ", quota.limit));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<QuotaKeeper::Ticket> QuotaKeeper::AdmitJobs(
    const Caller& caller, const std::vector<NewJob>& jobs) {
  Ticket ticket;
  const auth::Principal* principal = caller.principal();
  if (principal == nullptr || jobs.empty()) return ticket;
  const auth::Quotas& quotas = principal->quotas;
  const int64_t n = static_cast<int64_t>(jobs.size());
  int64_t payload_bytes = 0;
  for (const NewJob& job : jobs) payload_bytes += job.payload_bytes;
  if (quotas.schedules_per_second == 0 && quotas.pending.empty() &&
      quotas.pending_bytes.empty()) {
    // Nothing to count or hold: no lock, no ticket.
    if (metrics_ != nullptr)
      metrics_->Admitted(principal->name, n, payload_bytes);
    return ticket;
  }
  if (quotas.schedules_per_second > 0 && n > quotas.burst) {
    return Refuse(caller, "schedules_per_second",
                  absl::StrCat("quota schedules_per_second of principal '",
                               principal->name, "': a call of ", n,
                               " jobs is more than its burst of ", quotas.burst,
                               " can ever admit"));
  }
  // What the call adds to each pending quota (jobs, or payload bytes),
  // counted outside the lock.
  const auto adding_to = [&jobs](const std::vector<auth::Quotas::Pending>& qs,
                                 bool bytes) {
    std::vector<int64_t> adding(qs.size(), 0);
    for (size_t q = 0; q < qs.size(); ++q) {
      const std::string_view pattern = qs[q].pattern;
      for (const NewJob& job : jobs) {
        if (auth::TopicMatches(pattern, {job.topic.data(), job.topic.size()})) {
          adding[q] += bytes ? job.payload_bytes : 1;
        }
      }
    }
    return adding;
  };
  const std::vector<int64_t> adding = adding_to(quotas.pending, false);
  const std::vector<int64_t> adding_bytes =
      adding_to(quotas.pending_bytes, true);
  absl::MutexLock lock(&mu_);
  State& state = states_[principal->name];
  if (absl::Status s = CheckPending(caller, "pending", quotas.pending, adding,
                                    state.reserved);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckPending(caller, "pending_bytes", quotas.pending_bytes,
                       adding_bytes, state.reserved_bytes);
      !s.ok()) {
    return s;
  }
  if (quotas.schedules_per_second > 0) {
    const int64_t now = clock_->NowMs();
    if (!state.started) {
      state.started = true;
      state.tokens = static_cast<double>(quotas.burst);
    } else if (now > state.refilled_ms) {
      state.tokens = std::min(
          static_cast<double>(quotas.burst),
          state.tokens + static_cast<double>(now - state.refilled_ms) *
                             static_cast<double>(quotas.schedules_per_second) /
                             1000.0);
    }
    state.refilled_ms = std::max(state.refilled_ms, now);
    if (state.tokens < static_cast<double>(n)) {
      return Refuse(
          caller, "schedules_per_second",
          absl::StrCat("quota schedules_per_second of principal '",
                       principal->name, "': ", quotas.schedules_per_second,
                       " jobs per second (burst ", quotas.burst, ") used up; ",
                       n, " asked, ", static_cast<int64_t>(state.tokens),
                       " left now"));
    }
    state.tokens -= static_cast<double>(n);
  }
  ticket.keeper_ = this;
  ticket.principal_ = principal->name;
  const auto reserve = [](const std::vector<auth::Quotas::Pending>& qs,
                          const std::vector<int64_t>& add,
                          absl::flat_hash_map<std::string, int64_t>& reserved,
                          std::vector<std::pair<std::string, int64_t>>& held) {
    for (size_t q = 0; q < qs.size(); ++q) {
      if (add[q] == 0) continue;
      reserved[qs[q].pattern] += add[q];
      held.emplace_back(qs[q].pattern, add[q]);
    }
  };
  reserve(quotas.pending, adding, state.reserved, ticket.pending_);
  reserve(quotas.pending_bytes, adding_bytes, state.reserved_bytes,
          ticket.pending_bytes_);
  if (metrics_ != nullptr) {
    metrics_->Admitted(principal->name, n, payload_bytes);
  }
  return ticket;
}

absl::StatusOr<QuotaKeeper::Ticket> QuotaKeeper::AdmitSubscription(
    const Caller& caller) {
  Ticket ticket;
  const auth::Principal* principal = caller.principal();
  if (principal == nullptr) return ticket;
  int64_t open = 0;
  {
    absl::MutexLock lock(&mu_);
    State& state = states_[principal->name];
    const int64_t limit = principal->quotas.subscriptions;
    if (limit >= 0 && state.subscriptions >= limit) {
      return Refuse(
          caller, "subscriptions",
          absl::StrCat("quota subscriptions of principal '", principal->name,
                       "': ", state.subscriptions,
                       " Subscribe streams open; the limit is ", limit));
    }
    open = ++state.subscriptions;
  }
  if (metrics_ != nullptr) metrics_->Subscriptions(principal->name, open);
  ticket.keeper_ = this;
  ticket.principal_ = principal->name;
  ticket.subscription_ = true;
  return ticket;
}

absl::StatusOr<QuotaKeeper::Ticket> Admit(QuotaKeeper* keeper,
                                          const Caller& caller,
                                          const v1::ScheduleRequest& request) {
  if (keeper == nullptr) return QuotaKeeper::Ticket();
  return keeper->AdmitJobs(
      caller, {{request.job().topic(),
                static_cast<int64_t>(request.job().payload().size())}});
}

absl::StatusOr<QuotaKeeper::Ticket> Admit(
    QuotaKeeper* keeper, const Caller& caller,
    const v1::ScheduleBatchRequest& request) {
  if (keeper == nullptr) return QuotaKeeper::Ticket();
  std::vector<QuotaKeeper::NewJob> jobs;
  jobs.reserve(request.requests_size());
  for (const v1::ScheduleRequest& r : request.requests()) {
    jobs.push_back(
        {r.job().topic(), static_cast<int64_t>(r.job().payload().size())});
  }
  return keeper->AdmitJobs(caller, jobs);
}

absl::StatusOr<QuotaKeeper::Ticket> Admit(
    QuotaKeeper* keeper, const Caller& caller,
    const v1::SubscribeRequest& /*request*/) {
  if (keeper == nullptr) return QuotaKeeper::Ticket();
  return keeper->AdmitSubscription(caller);
}

}  // namespace delayd::server
