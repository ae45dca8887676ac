// JobWriter: the rpcs that schedule many jobs in one call — ScheduleBatch,
// and ScheduleStream's batches (Stream) — each run of Schedules decided
// together and written in one synced batch.
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/core/job_writer.h"
#include "server/core/stream_answer.h"
#include "server/jobs/job_key.h"
#include "storage/mutation.h"

namespace delayd::server {

using storage::Mutation;

absl::StatusOr<v1::ScheduleBatchResponse> JobWriter::ScheduleBatch(
    const v1::ScheduleBatchRequest& req) {
  const size_t n = req.requests_size();
  if (n == 0 || n > d_.limits->max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "requests: must hold 1-", d_.limits->max_batch, " requests, got ", n));
  }
  std::vector<const v1::ScheduleRequest*> requests;
  requests.reserve(n);
  for (const v1::ScheduleRequest& r : req.requests()) requests.push_back(&r);
  absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>> results =
      ScheduleMany(
          requests, [](size_t i) { return absl::StrCat("requests[", i, "]."); },
          /*limit_reply=*/true);
  if (!results.ok()) return results.status();
  v1::ScheduleBatchResponse response;
  for (absl::StatusOr<v1::ScheduleResponse>& r : *results) {
    v1::ScheduleResult* result = response.add_results();
    if (!r.ok()) {
      result->set_code(static_cast<int>(r.status().code()));
      result->set_message(std::string(r.status().message()));
      continue;
    }
    result->mutable_job()->Swap(r->mutable_job());
    result->set_created(r->created());
  }
  return response;
}

absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>>
JobWriter::ScheduleMany(std::span<const v1::ScheduleRequest* const> requests,
                        absl::FunctionRef<std::string(size_t)> field_of,
                        bool limit_reply) {
  const size_t n = requests.size();
  const int64_t now_ms = d_.clock->NowMs();
  std::vector<absl::StatusOr<v1::ScheduleResponse>> results(
      n, v1::ScheduleResponse());
  std::vector<std::optional<Planned>> plans(n);
  absl::flat_hash_map<JobKey, size_t> first_of;
  std::vector<uint64_t> hashes;
  std::vector<storage::JobKeyView> keys;
  for (size_t i = 0; i < n; ++i) {
    const std::string field = field_of(i);
    absl::StatusOr<Planned> plan = Plan(field, *requests[i], now_ms);
    if (!plan.ok()) {
      results[i] = plan.status();
      continue;
    }
    const v1::JobSpec& spec = plan->request.job();
    auto [it, inserted] =
        first_of.try_emplace(JobKey{spec.topic(), spec.id()}, i);
    if (!inserted) {
      std::string first = field_of(it->second);
      if (!first.empty() && first.back() == '.') first.pop_back();
      results[i] = absl::InvalidArgumentError(
          absl::StrCat(field, "job.id: names the same job as ", first));
      continue;
    }
    plans[i] = *std::move(plan);
    hashes.push_back(KeyHash(spec.topic(), spec.id()));
  }
  for (const auto& plan : plans) {
    if (plan)
      keys.push_back({plan->request.job().topic(), plan->request.job().id()});
  }

  absl::StatusOr<Locked> locked = LockAndRead(keys, std::move(hashes));
  if (!locked.ok()) return locked.status();
  std::vector<Decision> decisions(n);
  std::vector<Mutation> mutations;
  for (size_t i = 0, k = 0; i < n; ++i) {
    if (!plans[i]) continue;
    decisions[i] =
        Decide(*plans[i], locked->stored[k], locked->ahead[k], now_ms);
    ++k;
    if (decisions[i].mutation) mutations.push_back(*decisions[i].mutation);
    std::optional<Mutation>& withdraw = decisions[i].withdraw;
    if (withdraw.has_value() &&
        first_of.contains(JobKey{std::string(withdraw->topic()),
                                 std::string(withdraw->id())})) {
      // The batch schedules that occurrence's id itself: the request
      // decides it, not the withdrawal.
      withdraw.reset();
    }
    if (withdraw.has_value()) mutations.push_back(*withdraw);
  }
  if (limit_reply) {
    // Refuse, before writing, a batch whose reply the client could not
    // receive (16 bytes a result over-estimate its framing, code and flag).
    size_t reply_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      reply_bytes += 16;
      if (!plans[i]) {
        reply_bytes += results[i].status().message().size();
        continue;
      }
      reply_bytes += decisions[i].status.ok()
                         ? decisions[i].job.ByteSizeLong()
                         : decisions[i].status.message().size();
    }
    if (reply_bytes > d_.limits->max_reply_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "requests: the reply would hold ", reply_bytes,
          " bytes, over the limit of ", d_.limits->max_reply_bytes,
          " (what a gRPC client receives by default); send fewer or smaller "
          "jobs per batch"));
    }
  }
  if (absl::Status s = d_.store->Apply(mutations, storage::Durability::kSync);
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!plans[i]) continue;
    Decision& d = decisions[i];
    if (!d.status.ok()) {
      results[i] = d.status;
      continue;
    }
    Commit(d);
    *results[i]->mutable_job() = std::move(d.job);
    results[i]->set_created(d.created);
  }
  return results;
}

std::vector<v1::StreamAnswer> JobWriter::Stream(
    std::span<const v1::StreamRequest* const> requests) {
  std::vector<v1::StreamAnswer> out(requests.size());
  size_t i = 0;
  while (i < requests.size()) {
    const v1::StreamRequest& request = *requests[i];
    if (!request.has_schedule()) {
      if (request.has_reschedule()) {
        SetStreamAnswer(out[i], Reschedule(request.reschedule()),
                        &v1::StreamAnswer::mutable_reschedule);
      } else if (request.has_cancel()) {
        SetStreamAnswer(out[i], Cancel(request.cancel()),
                        &v1::StreamAnswer::mutable_cancel);
      } else {
        out[i].set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
        out[i].set_message("request: must hold schedule, reschedule or cancel");
      }
      ++i;
      continue;
    }
    // The run: consecutive Schedules of distinct jobs (an empty id is made
    // by the server, distinct), an occurrence's id alone.
    std::vector<const v1::ScheduleRequest*> run;
    absl::flat_hash_set<JobKey> named;
    size_t end = i;
    for (; end < requests.size() && requests[end]->has_schedule(); ++end) {
      const v1::JobSpec& spec = requests[end]->schedule().job();
      const bool alone = absl::StrContains(spec.id(), '@');
      if (!run.empty() &&
          (alone || (!spec.id().empty() &&
                     named.contains(JobKey{spec.topic(), spec.id()})))) {
        break;
      }
      if (!spec.id().empty()) named.insert(JobKey{spec.topic(), spec.id()});
      run.push_back(&requests[end]->schedule());
      if (alone) {
        ++end;
        break;
      }
    }
    absl::StatusOr<std::vector<absl::StatusOr<v1::ScheduleResponse>>> results =
        ScheduleMany(
            run, [](size_t) { return std::string(); }, /*limit_reply=*/false);
    for (size_t k = 0; k < run.size(); ++k) {
      SetStreamAnswer(
          out[i + k],
          results.ok() ? std::move((*results)[k])
                       : absl::StatusOr<v1::ScheduleResponse>(results.status()),
          &v1::StreamAnswer::mutable_schedule);
    }
    i = end;
  }
  return out;
}

}  // namespace delayd::server
