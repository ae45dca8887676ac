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
    for (const auto& [pattern, jobs] : pending_) {
      auto it = state.reserved.find(pattern);
      if (it != state.reserved.end() && (it->second -= jobs) <= 0) {
        state.reserved.erase(it);
      }
    }
    if (subscription_) open = --state.subscriptions;
  }
  if (open >= 0 && keeper->metrics_ != nullptr) {
    keeper->metrics_->Subscriptions(principal_, open);
  }
  pending_.clear();
  subscription_ = false;
}

absl::Status QuotaKeeper::Refuse(const Caller& caller, absl::string_view quota,
                                 std::string message) {
  if (metrics_ != nullptr) metrics_->Refused(caller.name(), quota);
  return absl::ResourceExhaustedError(std::move(message));
}

absl::StatusOr<QuotaKeeper::Ticket> QuotaKeeper::AdmitJobs(
    const Caller& caller, const std::vector<absl::string_view>& topics) {
  Ticket ticket;
  const auth::Principal* principal = caller.principal();
  if (principal == nullptr || topics.empty()) return ticket;
  const auth::Quotas& quotas = principal->quotas;
  const int64_t jobs = static_cast<int64_t>(topics.size());
  if (quotas.schedules_per_second == 0 && quotas.pending.empty()) {
    // Nothing to count or hold: no lock, no ticket.
    if (metrics_ != nullptr) metrics_->Admitted(principal->name, jobs);
    return ticket;
  }
  if (quotas.schedules_per_second > 0 && jobs > quotas.burst) {
    return Refuse(caller, "schedules_per_second",
                  absl::StrCat("quota schedules_per_second of principal '",
                               principal->name, "': a call of ", jobs,
                               " jobs is more than its burst of ", quotas.burst,
                               " can ever admit"));
  }
  // New jobs per pending quota, counted outside the lock.
  std::vector<int64_t> adding(quotas.pending.size(), 0);
  for (size_t q = 0; q < quotas.pending.size(); ++q) {
    const std::string_view pattern = quotas.pending[q].pattern;
    for (absl::string_view topic : topics) {
      if (auth::TopicMatches(pattern, {topic.data(), topic.size()})) {
        ++adding[q];
      }
    }
  }
  absl::MutexLock lock(&mu_);
  State& state = states_[principal->name];
  for (size_t q = 0; q < quotas.pending.size(); ++q) {
    if (adding[q] == 0) continue;
    const auth::Quotas::Pending& quota = quotas.pending[q];
    const std::string_view pattern = quota.pattern;
    const int64_t live =
        topics_
            ->LiveWhere([pattern](absl::string_view t) {
              return auth::TopicMatches(pattern, {t.data(), t.size()});
            })
            .jobs;
    const auto reserved = state.reserved.find(quota.pattern);
    const int64_t in_use =
        live + (reserved == state.reserved.end() ? 0 : reserved->second);
    if (in_use + adding[q] > quota.max_jobs) {
      return Refuse(
          caller, "pending",
          absl::StrCat("quota pending ", quota.pattern, " of principal '",
                       principal->name, "': ", in_use,
                       " jobs pending there, and this call adds ", adding[q],
                       "; the limit is ", quota.max_jobs));
    }
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
    if (state.tokens < static_cast<double>(jobs)) {
      return Refuse(
          caller, "schedules_per_second",
          absl::StrCat("quota schedules_per_second of principal '",
                       principal->name, "': ", quotas.schedules_per_second,
                       " jobs per second (burst ", quotas.burst, ") used up; ",
                       jobs, " asked, ", static_cast<int64_t>(state.tokens),
                       " left now"));
    }
    state.tokens -= static_cast<double>(jobs);
  }
  ticket.keeper_ = this;
  ticket.principal_ = principal->name;
  for (size_t q = 0; q < quotas.pending.size(); ++q) {
    if (adding[q] == 0) continue;
    state.reserved[quotas.pending[q].pattern] += adding[q];
    ticket.pending_.emplace_back(quotas.pending[q].pattern, adding[q]);
  }
  if (metrics_ != nullptr) metrics_->Admitted(principal->name, jobs);
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
  return keeper->AdmitJobs(caller, {request.job().topic()});
}

absl::StatusOr<QuotaKeeper::Ticket> Admit(
    QuotaKeeper* keeper, const Caller& caller,
    const v1::ScheduleBatchRequest& request) {
  if (keeper == nullptr) return QuotaKeeper::Ticket();
  std::vector<absl::string_view> topics;
  topics.reserve(request.requests_size());
  for (const v1::ScheduleRequest& r : request.requests()) {
    topics.push_back(r.job().topic());
  }
  return keeper->AdmitJobs(caller, topics);
}

absl::StatusOr<QuotaKeeper::Ticket> Admit(
    QuotaKeeper* keeper, const Caller& caller,
    const v1::SubscribeRequest& /*request*/) {
  if (keeper == nullptr) return QuotaKeeper::Ticket();
  return keeper->AdmitSubscription(caller);
}

}  // namespace delayd::server
