// The job commands of delayctl: schedule, preview, get, list, cancel,
// cancel-prefix, reschedule, pause, resume.
#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/delayctl/format.h"
#include "client/delayctl/job_text.h"
#include "client/delayctl/recurrence_flags.h"
#include "client/delayctl/session.h"
#include "delayd/proto_time.h"

namespace delayd::delayctl {
namespace {

using Stub = v1::DelayQueue::Stub;

// Reads all of a stream.
absl::StatusOr<std::string> ReadAll(std::istream& in, const std::string& what) {
  std::string data((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", what));
  }
  return data;
}

absl::Status ParseUint(const Args& a, const std::string& flag, uint32_t* out) {
  if (!a.Has(flag)) return absl::OkStatus();
  if (!absl::SimpleAtoi(a.Get(flag, ""), out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", a.Get(flag, ""), "' is not a non-negative integer"));
  }
  return absl::OkStatus();
}

// Sets a Duration field from a flag when given; `field` returns the
// mutable field (called only then, so unset fields stay unset).
template <typename Field>
absl::Status DurationFlag(const Args& a, const std::string& flag, Field field) {
  if (!a.Has(flag)) return absl::OkStatus();
  absl::StatusOr<absl::Duration> d =
      ParseDuration(a.Get(flag, ""), "--" + flag);
  if (!d.ok()) return d.status();
  *field() = ToProtoSaturated(*d);
  return absl::OkStatus();
}

absl::Status BuildRetry(const Args& a, v1::RetryPolicy* retry) {
  uint32_t max_attempts = 0;
  if (absl::Status s = ParseUint(a, "max-attempts", &max_attempts); !s.ok()) {
    return s;
  }
  if (max_attempts != 0) retry->set_max_attempts(max_attempts);
  absl::Status s =
      DurationFlag(a, "lease", [&] { return retry->mutable_lease(); });
  if (s.ok()) {
    s = DurationFlag(a, "initial-backoff",
                     [&] { return retry->mutable_initial_backoff(); });
  }
  if (s.ok()) {
    s = DurationFlag(a, "max-backoff",
                     [&] { return retry->mutable_max_backoff(); });
  }
  if (!s.ok()) return s;
  if (a.Has("backoff-multiplier")) {
    double m = 0;
    if (!absl::SimpleAtod(a.Get("backoff-multiplier", ""), &m)) {
      return absl::InvalidArgumentError("--backoff-multiplier: not a number");
    }
    retry->set_backoff_multiplier(m);
  }
  return absl::OkStatus();
}

template <typename Request>
absl::Status SetWhen(const std::string& text, Request* request) {
  absl::StatusOr<When> when = ParseWhen(text, "WHEN");
  if (!when.ok()) return when.status();
  if (when->absolute) {
    *request->mutable_fire_at() = ToProtoSaturated(when->at);
  } else {
    *request->mutable_delay() = ToProtoSaturated(when->delay);
  }
  return absl::OkStatus();
}

// The usage error of a recurrence flag given with WHEN: a recurring job's
// recurrence says when.
Exit RecurringWithWhen(const std::string& command, const Args& a,
                       const std::string& when, absl::string_view hint) {
  return Exit::Usage(absl::StrCat(command, ": ", RecurringFlag(a),
                                  " and WHEN ('", when,
                                  "') exclude each other: a recurring job's "
                                  "recurrence says when",
                                  hint));
}

Exit Schedule(Session& s, const Args& a) {
  const std::vector<std::string>& pos = a.positional();
  v1::ScheduleRequest request;
  v1::JobSpec* job = request.mutable_job();
  job->set_topic(pos[0]);
  job->set_id(a.Get("id", ""));
  absl::StatusOr<std::optional<v1::Recurrence>> recurrence =
      OptionalRecurrence(a, absl::Now());
  if (!recurrence.ok()) {
    return Exit::Usage(std::string(recurrence.status().message()));
  }
  // One-shot: TOPIC WHEN [PAYLOAD | -]; recurring: TOPIC [PAYLOAD | -].
  size_t payload_at = 2;
  if (recurrence->has_value()) {
    payload_at = 1;
    if (pos.size() == 3) return RecurringWithWhen("schedule", a, pos[1], "");
    // A lone argument that reads as a time was most likely meant as WHEN:
    // refused rather than sent as the payload.
    if (pos.size() == 2 && pos[1] != "-" && ParseWhen(pos[1], "WHEN").ok()) {
      return RecurringWithWhen(
          "schedule", a, pos[1],
          " (a payload that reads as a time goes by - or --payload-file)");
    }
    *job->mutable_recurrence() = **std::move(recurrence);
  } else if (pos.size() < 2) {
    return Exit::Usage(
        "schedule: expected TOPIC WHEN [PAYLOAD | -], or --cron or --every "
        "for a recurring job (see delayctl schedule --help)");
  } else if (absl::Status st = SetWhen(pos[1], job); !st.ok()) {
    return Exit::Usage(std::string(st.message()));
  }
  const bool payload_arg = pos.size() > payload_at;
  if (payload_arg && a.Has("payload-file")) {
    return Exit::Usage(
        "schedule: give the payload as an argument or with --payload-file, "
        "not both");
  }
  if (a.Has("payload-file")) {
    const std::string path = a.Get("payload-file", "");
    std::ifstream file(path, std::ios::binary);
    if (!file)
      return Exit::Usage(absl::StrCat("cannot open --payload-file ", path));
    absl::StatusOr<std::string> data = ReadAll(file, path);
    if (!data.ok()) return Exit::Usage(std::string(data.status().message()));
    job->set_payload(*std::move(data));
  } else if (payload_arg && pos[payload_at] == "-") {
    absl::StatusOr<std::string> data = ReadAll(s.in(), "stdin");
    if (!data.ok()) return Exit::Usage(std::string(data.status().message()));
    job->set_payload(*std::move(data));
  } else if (payload_arg) {
    job->set_payload(pos[payload_at]);
  }
  const std::string if_exists = a.Get("if-exists", "fail");
  if (if_exists == "fail") {
    request.set_if_exists(v1::IF_EXISTS_FAIL);
  } else if (if_exists == "keep") {
    request.set_if_exists(v1::IF_EXISTS_KEEP);
  } else if (if_exists == "replace") {
    request.set_if_exists(v1::IF_EXISTS_REPLACE);
  } else {
    return Exit::Usage(absl::StrCat("--if-exists: '", if_exists,
                                    "' is not one of fail, keep, replace"));
  }
  for (const std::string& label : a.All("label")) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos) {
      return Exit::Usage(
          absl::StrCat("--label: '", label, "' is not KEY=VALUE"));
    }
    (*job->mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
  }
  if (absl::Status st = BuildRetry(a, job->mutable_retry()); !st.ok()) {
    return Exit::Usage(std::string(st.message()));
  }
  if (job->retry().ByteSizeLong() == 0) job->clear_retry();

  return s.CallAndShow(
      s.stub(), &Stub::Schedule, request,
      [&s](const v1::ScheduleResponse& response) {
        s.out() << (response.created() ? "scheduled  " : "unchanged  ")
                << JobLine(response.job(), absl::Now()) << "\n";
      });
}

Exit Preview(Session& s, const Args& a) {
  const absl::Time now = absl::Now();
  absl::StatusOr<v1::Recurrence> recurrence = RecurrenceFromFlags(a, now);
  if (!recurrence.ok()) {
    return Exit::Usage(std::string(recurrence.status().message()));
  }
  v1::PreviewScheduleRequest request;
  *request.mutable_recurrence() = *std::move(recurrence);
  uint32_t count = 10;
  if (absl::Status st = ParseUint(a, "count", &count); !st.ok()) {
    return Exit::Usage(std::string(st.message()));
  }
  request.set_count(count);
  if (a.Has("after")) {
    absl::StatusOr<absl::Time> after =
        ParseTimeOrDelay(a.Get("after", ""), "--after", now);
    if (!after.ok()) return Exit::Usage(std::string(after.status().message()));
    *request.mutable_after() = ToProtoSaturated(*after);
  }
  return s.CallAndShow(
      s.stub(), &Stub::PreviewSchedule, request,
      [&s](const v1::PreviewScheduleResponse& response) {
        if (response.occurrences().empty()) {
          s.out() << "no occurrences\n";
          return;
        }
        std::vector<std::vector<std::string>> rows = {{"UTC", "LOCAL"}};
        for (const v1::Occurrence& o : response.occurrences()) {
          rows.push_back(
              {AbsoluteTime(FromProto(o.at()), true), o.local_time()});
        }
        s.out() << Table(rows);
      });
}

Exit Get(Session& s, const Args& a) {
  v1::GetJobRequest request;
  request.mutable_key()->set_topic(a.positional()[0]);
  request.mutable_key()->set_id(a.positional()[1]);
  return s.CallAndShow(s.stub(), &Stub::GetJob, request,
                       [&s, &a](const v1::Job& job) {
                         if (a.Has("raw-payload")) {
                           s.out() << job.payload();
                         } else {
                           s.out() << JobDetail(job, absl::Now());
                         }
                       });
}

Exit List(Session& s, const Args& a) {
  v1::ListJobsRequest request;
  request.set_topic(a.positional()[0]);
  request.set_id_prefix(a.Get("prefix", ""));
  request.set_include_payload(a.Has("payload"));
  for (const std::string& text : a.All("state")) {
    for (absl::string_view one : absl::StrSplit(text, ',')) {
      absl::StatusOr<v1::JobState> state = ParseState(std::string(one));
      if (!state.ok())
        return Exit::Usage(std::string(state.status().message()));
      request.add_states(*state);
    }
  }
  const absl::Time now = absl::Now();
  for (const auto& [flag, field] :
       {std::pair{"due-after", &v1::ListJobsRequest::mutable_due_after},
        std::pair{"due-before", &v1::ListJobsRequest::mutable_due_before}}) {
    if (!a.Has(flag)) continue;
    absl::StatusOr<absl::Time> t =
        ParseTimeOrDelay(a.Get(flag, ""), absl::StrCat("--", flag), now);
    if (!t.ok()) return Exit::Usage(std::string(t.status().message()));
    *(request.*field)() = ToProtoSaturated(*t);
  }
  uint32_t limit = 100, page_size = 0;
  if (absl::Status st = ParseUint(a, "limit", &limit); !st.ok()) {
    return Exit::Usage(std::string(st.message()));
  }
  if (absl::Status st = ParseUint(a, "page-size", &page_size); !st.ok()) {
    return Exit::Usage(std::string(st.message()));
  }
  if (page_size == 0) page_size = limit == 0 ? 1000 : std::min(limit, 1000u);
  request.set_page_size(page_size);

  // Follows the page tokens until the end or --limit; the result is one
  // ListJobsResponse whose next_page_token says where it stopped.
  v1::ListJobsResponse all;
  while (true) {
    v1::ListJobsResponse page;
    grpc::Status status = s.Call(s.stub(), &Stub::ListJobs, request, &page);
    if (!status.ok()) return s.RpcFailed(status);
    for (v1::Job& job : *page.mutable_jobs()) {
      if (limit != 0 && static_cast<uint32_t>(all.jobs_size()) >= limit) {
        break;
      }
      *all.add_jobs() = std::move(job);
    }
    all.set_next_page_token(page.next_page_token());
    if (page.next_page_token().empty()) break;
    if (limit != 0 && static_cast<uint32_t>(all.jobs_size()) >= limit) {
      // The page may hold jobs past the limit: a token that resumes right
      // after our last job is not ours to make, so report "more" only.
      break;
    }
    request.set_page_token(page.next_page_token());
  }
  s.Show(all, [&](const v1::ListJobsResponse& list) {
    if (list.jobs().empty()) {
      s.out() << "no jobs\n";
      return;
    }
    std::vector<std::vector<std::string>> rows = {
        {"ID", "STATE", "DUE", "ATTEMPTS", "LAST ERROR"}};
    if (a.Has("payload")) rows[0].push_back("PAYLOAD");
    for (const v1::Job& job : list.jobs()) {
      rows.push_back({job.id(), StateName(job.state()),
                      RelativeTime(FromProto(job.fire_at()), now),
                      absl::StrCat(job.attempts()), job.last_error()});
      if (a.Has("payload"))
        rows.back().push_back(PayloadPreview(job.payload(), 40));
    }
    const bool more = !list.next_page_token().empty();
    s.out() << Table(rows);
    s.out() << list.jobs_size() << (list.jobs_size() == 1 ? " job" : " jobs")
            << (more ? absl::StrCat(" shown; more exist (--limit ", limit * 10,
                                    " or --limit 0 for all)")
                     : "")
            << "\n";
  });
  return Exit::Ok();
}

Exit Cancel(Session& s, const Args& a) {
  v1::CancelRequest request;
  request.mutable_key()->set_topic(a.positional()[0]);
  request.mutable_key()->set_id(a.positional()[1]);
  const std::string key = KeyText(a.positional()[0], a.positional()[1]);
  return s.CallAndShow(
      s.stub(), &Stub::Cancel, request,
      [&s, &key](const v1::CancelResponse& response) {
        if (response.outcome() == v1::CANCEL_OUTCOME_CANCELED) {
          s.out() << "canceled " << key << ": it will not be delivered\n";
        } else if (response.outcome() ==
                   v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT) {
          s.out() << "canceled " << key
                  << " in flight: the current delivery stands, no redelivery\n";
        }
      },
      [&key](const v1::CancelResponse& response) {
        switch (response.outcome()) {
          case v1::CANCEL_OUTCOME_CANCELED:
          case v1::CANCEL_OUTCOME_CANCELED_IN_FLIGHT:
            return Exit::Ok();
          case v1::CANCEL_OUTCOME_ALREADY_DONE:
            return Exit::Failed(absl::StrCat(key, " was already done (acked)"));
          case v1::CANCEL_OUTCOME_NOT_FOUND:
            return Exit::Failed(absl::StrCat(key, " not found"));
          default:
            return Exit::Failed(
                absl::StrCat("unexpected cancel outcome ", response.outcome()));
        }
      });
}

Exit CancelPrefix(Session& s, const Args& a) {
  v1::CancelByPrefixRequest request;
  request.set_topic(a.positional()[0]);
  request.set_id_prefix(a.positional()[1]);
  return s.CallAndShow(
      s.stub(), &Stub::CancelByPrefix, request,
      [&s, &request](const v1::CancelByPrefixResponse& response) {
        s.out() << "canceled " << response.canceled()
                << (response.canceled() == 1 ? " job" : " jobs") << " of "
                << request.topic() << " with ids starting '"
                << request.id_prefix() << "'\n";
      });
}

Exit Reschedule(Session& s, const Args& a) {
  const std::vector<std::string>& pos = a.positional();
  v1::RescheduleRequest request;
  request.mutable_key()->set_topic(pos[0]);
  request.mutable_key()->set_id(pos[1]);
  absl::StatusOr<std::optional<v1::Recurrence>> recurrence =
      OptionalRecurrence(a, absl::Now());
  if (!recurrence.ok()) {
    return Exit::Usage(std::string(recurrence.status().message()));
  }
  if (recurrence->has_value()) {
    if (pos.size() == 3) return RecurringWithWhen("reschedule", a, pos[2], "");
    *request.mutable_recurrence() = **std::move(recurrence);
  } else if (pos.size() < 3) {
    return Exit::Usage(
        "reschedule: expected TOPIC ID WHEN, or --cron or --every for a "
        "recurring job (see delayctl reschedule --help)");
  } else if (absl::Status st = SetWhen(pos[2], &request); !st.ok()) {
    return Exit::Usage(std::string(st.message()));
  }
  return s.CallAndShow(s.stub(), &Stub::Reschedule, request,
                       [&s](const v1::RescheduleResponse& response) {
                         s.out()
                             << "rescheduled  "
                             << JobLine(response.job(), absl::Now()) << "\n";
                       });
}

// pause and resume: the same call shape, printing the job as get does.
template <typename Request, typename Response>
Exit SetPaused(Session& s, const Args& a,
               UnaryRpc<Stub, Request, Response> rpc) {
  Request request;
  request.mutable_key()->set_topic(a.positional()[0]);
  request.mutable_key()->set_id(a.positional()[1]);
  return s.CallAndShow(s.stub(), rpc, request, [&s](const Response& response) {
    s.out() << JobDetail(response.job(), absl::Now());
  });
}

Exit Pause(Session& s, const Args& a) {
  return SetPaused(s, a, &Stub::PauseJob);
}

Exit Resume(Session& s, const Args& a) {
  return SetPaused(s, a, &Stub::ResumeJob);
}

// `a` followed by each of `more`.
std::vector<FlagSpec> Flags(std::vector<FlagSpec> a,
                            std::initializer_list<std::vector<FlagSpec>> more) {
  for (const std::vector<FlagSpec>& m : more) {
    a.insert(a.end(), m.begin(), m.end());
  }
  return a;
}

}  // namespace

std::vector<Command> JobCommands() {
  return {
      {{"schedule", "TOPIC [WHEN] [PAYLOAD | -]",
        "Create a job: deliver PAYLOAD to TOPIC at WHEN, or on a schedule.",
        "WHEN is a delay from now (30s, 1h30m, 2d, now) or an RFC 3339 time\n"
        "(2026-11-22T06:30:00Z). The payload is the argument, `-` for stdin,\n"
        "or --payload-file. Without --id the server makes a time-ordered id.\n"
        "Prints the job as stored; \"unchanged\" when it already existed\n"
        "(--if-exists keep, or an identical retry).\n"
        "\n"
        "With --cron or --every the job is recurring and takes no WHEN (try\n"
        "the schedule first with preview). It is never delivered itself: each\n"
        "occurrence becomes a job <id>@<unix ms> with its payload, retry\n"
        "policy and labels. pause, resume and cancel act on the schedule.\n"
        "Examples:\n"
        "  delayctl schedule orders.close 30m '{\"order\":8812}'\n"
        "  delayctl schedule reports.daily '{}' --cron '0 0 6 * * ?' \\\n"
        "      --tz Europe/Berlin --id daily --misfire skip\n",
        Flags(
            {{"id", "ID",
              "the job's id within its topic (default: server-made)"},
             {"payload-file", "FILE", "read the payload from FILE"},
             {"if-exists", "fail|keep|replace",
              "when the id exists: refuse unless identical (default), keep it, "
              "or replace it"},
             {"label", "KEY=VALUE", "a label returned with the job", true},
             {"max-attempts", "N", "deliveries before the job is DEAD (10)"},
             {"lease", "DURATION", "ack timeout of a delivery (30s)"},
             {"initial-backoff", "DURATION",
              "delay before the first retry (1s)"},
             {"max-backoff", "DURATION",
              "upper bound of the retry delay (10m)"},
             {"backoff-multiplier", "X", "growth of the retry delay (2)"}},
            {ScheduleFlags(), PolicyFlags()}),
        1, 3},
       Schedule},
      {{"preview", "",
        "Show the next occurrences of a recurrence; nothing is stored.",
        "A cron schedule (--cron, with --dialect and --tz) or a fixed\n"
        "interval (--every, from --anchor). DST: a local time in a\n"
        "spring-forward gap fires once at the gap's end; one that occurs\n"
        "twice fires at its first occurrence. Example:\n"
        "  delayctl preview --cron '0 30 2 * * ?' --tz America/New_York\n",
        Flags(ScheduleFlags(),
              {{{"after", "TIME", "occurrences after TIME (default: now)"},
                {"count", "N", "how many, 1-1000 (10)"}}}),
        0, 0},
       Preview},
      {{"get",
        "TOPIC ID",
        "Show one job: state, due time, attempts, retry policy, payload.",
        "A recurring job shows its schedule and policies, the occurrences\n"
        "fired and skipped, and its next, last and buffered occurrence; an\n"
        "occurrence shows the job it came from. Example:\n"
        "  delayctl get reports.daily daily\n",
        {{"raw-payload", "", "print only the payload's bytes"}},
        2,
        2},
       Get},
      {{"list",
        "TOPIC",
        "List a topic's jobs, ordered by id, following the pages.",
        "With --json prints one ListJobsResponse holding every job listed;\n"
        "its nextPageToken is non-empty when --limit cut the list short.\n",
        {{"prefix", "PREFIX", "only ids starting with PREFIX"},
         {"state", "STATE[,STATE]",
          "only these states: scheduled, ready, in-flight, dead, paused", true},
         {"due-after", "TIME", "only jobs due at or after TIME (or a delay)"},
         {"due-before", "TIME", "only jobs due before TIME (or a delay)"},
         {"limit", "N", "list at most N jobs (default 100; 0: all)"},
         {"page-size", "N", "jobs per rpc, 1-1000 (default: min(limit, 1000))"},
         {"payload", "", "show payloads too"}},
        1,
        1},
       List},
      {{"cancel",
        "TOPIC ID",
        "Cancel a job; says exactly what happened.",
        "Exits 1 when nothing was canceled: the job was not found or was\n"
        "already done.\n",
        {},
        2,
        2},
       Cancel},
      {{"cancel-prefix",
        "TOPIC PREFIX",
        "Cancel every live job of TOPIC whose id starts with PREFIX.",
        "PREFIX \"\" cancels every job of the topic. PAUSED recurring jobs\n"
        "are canceled too; a recurring job's occurrences have ids <id>@...\n",
        {},
        2,
        2},
       CancelPrefix},
      {{"reschedule", "TOPIC ID [WHEN]",
        "Move a SCHEDULED or READY job's due time, or change a recurrence.",
        "WHEN as for schedule. A recurring job takes --cron or --every\n"
        "instead: the new recurrence replaces the whole old one (flags not\n"
        "given take their defaults) and its schedule starts again from now.\n"
        "The occurrence counts stay; a PAUSED job stays paused. Examples:\n"
        "  delayctl reschedule orders.close order-8812 2h\n"
        "  delayctl reschedule reports.daily daily --every 12h\n",
        Flags(ScheduleFlags(), {PolicyFlags()}), 2, 3},
       Reschedule},
      {{"pause",
        "TOPIC ID",
        "Pause a recurring job: no occurrence fires until resume.",
        "The occurrences already made are not touched. Pausing a PAUSED job\n"
        "does nothing. Prints the job as get does. Example:\n"
        "  delayctl pause reports.daily daily\n",
        {},
        2,
        2},
       Pause},
      {{"resume",
        "TOPIC ID",
        "Resume a PAUSED recurring job.",
        "The occurrences that fell due while it was paused are misfires,\n"
        "handled by its --misfire policy. Resuming a job that is not paused\n"
        "does nothing. Prints the job as get does. Example:\n"
        "  delayctl resume reports.daily daily\n",
        {},
        2,
        2},
       Resume},
  };
}

}  // namespace delayd::delayctl
