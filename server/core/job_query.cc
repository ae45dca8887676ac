#include "server/core/job_query.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/core/page_token.h"
#include "server/jobs/job_key.h"
#include "server/jobs/present.h"
#include "server/jobs/validation.h"
#include "server/recurring/recurrence.h"
#include "storage/job_record.h"

namespace delayd::server {

using storage::JobRecord;
using storage::TimestampToUnixMs;

absl::StatusOr<v1::Job> JobQuery::GetJob(const v1::GetJobRequest& req) const {
  if (absl::Status s = ValidateKey("key", req.key(), *limits_); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::optional<JobRecord>> stored =
      store_->Get(req.key().topic(), req.key().id());
  if (!stored.ok()) return stored.status();
  deliverer_->OverlayLeases({&*stored, 1});
  if (!stored->has_value()) {
    return absl::NotFoundError(absl::StrCat("key: no job (", req.key().topic(),
                                            ", \"", req.key().id(), "\")"));
  }
  return PresentJob(**stored, clock_->NowMs());
}

absl::StatusOr<v1::ListJobsResponse> JobQuery::ListJobs(
    const v1::ListJobsRequest& req) const {
  if (absl::Status s = ValidateTopic("topic", req.topic(), *limits_); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateIdPrefix("id_prefix", req.id_prefix(), *limits_);
      !s.ok()) {
    return s;
  }
  std::set<int> states;
  for (int i = 0; i < req.states_size(); ++i) {
    const int state = req.states(i);
    if (!v1::JobState_IsValid(state) || state == v1::JOB_STATE_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat("states[", i, "]: not a job state: ", state));
    }
    states.insert(state);
  }
  if (req.page_size() > limits_->max_page_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size: must be at most ", limits_->max_page_size,
                     ", got ", req.page_size()));
  }
  const size_t page_size =
      req.page_size() == 0 ? limits_->default_page_size : req.page_size();
  int64_t due_after = std::numeric_limits<int64_t>::min();
  int64_t due_before = std::numeric_limits<int64_t>::max();
  if (req.has_due_after()) {
    if (absl::Status s = ValidateTimestamp("due_after", req.due_after());
        !s.ok()) {
      return s;
    }
    due_after = TimestampToUnixMs(req.due_after());
  }
  if (req.has_due_before()) {
    if (absl::Status s = ValidateTimestamp("due_before", req.due_before());
        !s.ok()) {
      return s;
    }
    due_before = TimestampToUnixMs(req.due_before());
  }
  absl::StatusOr<std::string> after = DecodePageToken(req);
  if (!after.ok()) return after.status();

  const int64_t now_ms = clock_->NowMs();
  v1::ListJobsResponse response;
  std::string last_id;
  // A page also ends before the reply passes max_reply_bytes (room kept for
  // the token; 8 bytes a job over-estimate its framing), but never empty.
  constexpr size_t kTokenRoom = 1024;
  size_t reply_bytes = kTokenRoom;
  absl::Status scan = store_->ScanJobs(
      req.topic(), req.id_prefix(), *after, [&](const JobRecord& stored) {
        const int64_t due = TimestampToUnixMs(stored.job().fire_at());
        if (due < due_after || due >= due_before) return true;
        std::optional<JobRecord> record = stored;
        deliverer_->OverlayLeases({&record, 1});
        v1::Job job = PresentJob(*record, now_ms);
        if (!states.empty() && !states.contains(job.state())) return true;
        if (!req.include_payload()) job.clear_payload();
        const size_t job_bytes = job.ByteSizeLong() + 8;
        if (static_cast<size_t>(response.jobs_size()) == page_size ||
            (response.jobs_size() > 0 &&
             reply_bytes + job_bytes > limits_->max_reply_bytes)) {
          // One more match exists: there is a next page.
          *response.mutable_next_page_token() = EncodePageToken(req, last_id);
          return false;
        }
        reply_bytes += job_bytes;
        last_id = job.id();
        *response.add_jobs() = std::move(job);
        return true;
      });
  if (!scan.ok()) return scan;
  return response;
}

absl::StatusOr<v1::GetStatsResponse> JobQuery::GetStats(
    const v1::GetStatsRequest& req) const {
  std::vector<std::string> topics;
  if (!req.topic().empty()) {
    if (absl::Status s = ValidateTopic("topic", req.topic(), *limits_);
        !s.ok()) {
      return s;
    }
    topics.push_back(req.topic());
  } else {
    topics = topics_->Topics();  // sorted
    if (!terminal_->scanned()) {
      // After a restart, until the terminal-state scan has ended, a topic
      // that holds only DEAD, DONE or CANCELED records is known only to the
      // store.
      std::set<std::string> all(topics.begin(), topics.end());
      absl::Status scan = store_->ScanTopics([&](std::string_view topic) {
        all.emplace(topic);
        return true;
      });
      if (!scan.ok()) return scan;
      topics.assign(all.begin(), all.end());
    }
  }

  // Jobs due in (now, now + W] for the three windows W. The whole seconds
  // strictly inside come from the DueBook; the rest of now's second and the
  // start of the window end's second, from the due index (a second each at
  // most). Edge 0 is now, edges 1-3 the windows' ends.
  constexpr std::array<int64_t, 3> kWindowMs = {60'000, 3'600'000, 86'400'000};
  const int64_t now_ms = clock_->NowMs();
  const int64_t now_s = DueBook::SecondOf(now_ms);
  DueBook::Seconds seconds = {now_s + 1};
  for (size_t w = 0; w < kWindowMs.size(); ++w) {
    seconds[w + 1] = DueBook::SecondOf(now_ms + kWindowMs[w]);
  }
  // Per topic: entries in each partial second, [0] the rest of now's.
  absl::flat_hash_map<std::string, DueBook::Counts> partial;
  const auto scan_partial = [&](size_t edge, int64_t from_ms,
                                int64_t to_ms) -> absl::Status {
    return store_->ScanDue(
        from_ms, to_ms,
        [&](int64_t, std::string_view std_topic, std::string_view) {
          const absl::string_view topic = AsAbsl(std_topic);
          if (!req.topic().empty() && topic != req.topic()) return true;
          auto it = partial.find(topic);
          if (it == partial.end()) {
            it = partial.try_emplace(std::string(topic), DueBook::Counts{})
                     .first;
          }
          ++it->second[edge];
          return true;
        });
  };
  if (absl::Status s = scan_partial(0, now_ms + 1, seconds[0] * 1000);
      !s.ok()) {
    return s;
  }
  for (size_t w = 0; w < kWindowMs.size(); ++w) {
    if (absl::Status s = scan_partial(w + 1, seconds[w + 1] * 1000,
                                      now_ms + kWindowMs[w] + 1);
        !s.ok()) {
      return s;
    }
  }

  v1::GetStatsResponse response;
  for (const std::string& topic : topics) {
    const TopicTable::Counts counts = topics_->CountsOf(topic);
    v1::TopicStats* stats = response.add_topics();
    stats->set_topic(topic);
    stats->set_scheduled(std::max<int64_t>(0, counts.scheduled()));
    stats->set_ready(counts.ready);
    stats->set_in_flight(counts.in_flight);
    // Recover rebuilds counts from the due index, which holds no DEAD, DONE
    // or CANCELED jobs: after a restart, until the background scan has
    // counted them, canceling or replacing one must not wrap these.
    stats->set_dead(std::max<int64_t>(0, counts.dead));
    stats->set_done(std::max<int64_t>(0, counts.done));
    stats->set_canceled(std::max<int64_t>(0, counts.canceled));
    stats->set_subscribers(
        static_cast<uint32_t>(std::max<int64_t>(0, counts.subscribers)));
    const DueBook::Counts below = due_->Below(topic, seconds);
    DueBook::Counts edges{};
    if (auto it = partial.find(topic); it != partial.end()) edges = it->second;
    std::array<uint64_t, 3> due{};
    for (size_t w = 0; w < due.size(); ++w) {
      due[w] = static_cast<uint64_t>(std::max<int64_t>(
          0, below[w + 1] - below[0] + edges[0] + edges[w + 1]));
    }
    stats->set_due_next_minute(due[0]);
    stats->set_due_next_hour(due[1]);
    stats->set_due_next_day(due[2]);
    const DeliveryMetrics::Totals totals = metrics_->TotalsOf(topic);
    stats->set_fired(totals.fired);
    stats->set_acked(totals.acked);
  }
  if (req.due_soon()) {
    v1::DueSoon* soon = response.mutable_due_soon();
    *soon->mutable_from() = storage::UnixMsToTimestamp(seconds[0] * 1000);
    for (uint64_t n : due_->Histogram(req.topic(), seconds[0], 60, 60)) {
      soon->add_per_minute(n);
    }
    for (uint64_t n : due_->Histogram(req.topic(), seconds[0], 3600, 24)) {
      soon->add_per_hour(n);
    }
  }
  for (const DeliveryMetrics::Bucket& b : metrics_->Lateness()) {
    v1::LatenessBucket* bucket = response.add_fire_lateness();
    bucket->set_le_seconds(b.le_seconds);
    bucket->set_count(b.count);
  }
  return response;
}

absl::StatusOr<v1::PreviewScheduleResponse> JobQuery::PreviewSchedule(
    const v1::PreviewScheduleRequest& req) const {
  constexpr uint32_t kMaxCount = 1000;
  constexpr uint32_t kDefaultCount = 10;
  if (req.count() > kMaxCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("count: must be 0-", kMaxCount, " (0: ", kDefaultCount,
                     "), got ", req.count()));
  }
  const int64_t now_ms = clock_->NowMs();
  int64_t after_ms = now_ms;
  if (req.has_after()) {
    if (absl::Status s = ValidateTimestamp("after", req.after()); !s.ok()) {
      return s;
    }
    after_ms = TimestampToUnixMs(req.after());
  }
  // `after` stands for the time of the call in the recurrence's defaults
  // (start_at, an interval's anchor): a preview from a past instant shows
  // what a job scheduled then would have done.
  absl::StatusOr<recurring::Recurrence> recurrence =
      recurring::Recurrence::FromProto("recurrence", req.recurrence(),
                                       after_ms);
  if (!recurrence.ok()) return recurrence.status();
  v1::PreviewScheduleResponse response;
  const uint32_t count = req.count() == 0 ? kDefaultCount : req.count();
  for (uint32_t i = 0; i < count; ++i) {
    const std::optional<int64_t> next = recurrence->NextAfter(after_ms);
    if (!next.has_value()) break;
    *response.add_occurrences() =
        recurring::PresentOccurrence(*next, recurrence->zone());
    after_ms = *next;
  }
  return response;
}

}  // namespace delayd::server
