// make_seeds: writes the binary seed inputs of the fuzz targets —
// serialized requests (request_parser), ack tokens (ack_token), page
// tokens (page_token) and stored keys and records (job_record) — made with
// delayd's own types and encoders, so that they stay what the server sends
// and stores. The text seeds (cron, auth_file, config) are plain files in
// corpus/. Usage, from the repository root:
//   cmake --build build-fuzz --target make_seeds
//   build-fuzz/make_seeds tests/fuzz/corpus
// Deterministic: running it again rewrites the same bytes.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "delayd/proto_time.h"
#include "delayd/v1/delayd.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "server/core/page_token.h"
#include "server/delivery/ack_token.h"
#include "storage/job_record.h"
#include "storage/key_codec.h"

namespace {

namespace server = delayd::server;
namespace storage = delayd::storage;
namespace v1 = delayd::v1;

std::filesystem::path out_dir;

void Write(const std::string& target, const std::string& name,
           const std::string& bytes) {
  const std::filesystem::path dir = out_dir / target;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
}

std::string Serialize(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

// request_parser's input: the type byte (its kTypes index), the message.
void Request(const std::string& name, uint8_t type,
             const google::protobuf::Message& m) {
  Write("request_parser", name,
        std::string(1, static_cast<char>(type)) + Serialize(m));
}

google::protobuf::Timestamp At(const char* rfc3339) {
  absl::Time t;
  std::string error;
  absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &error);
  return delayd::ToProto(t);
}

google::protobuf::Duration Seconds(int64_t s) {
  return delayd::ToProto(absl::Seconds(s));
}

v1::JobKey Key(const std::string& topic, const std::string& id) {
  v1::JobKey key;
  key.set_topic(topic);
  key.set_id(id);
  return key;
}

std::string Token(const std::string& topic, const std::string& id,
                  uint32_t attempt) {
  server::AckToken token;
  token.topic = topic;
  token.id = id;
  token.attempt = attempt;
  token.nonce = 0x0123456789abcdefULL;
  token.check = 0xfedcba9876543210ULL;
  return server::EncodeAckToken(token);
}

void Requests() {
  v1::ScheduleRequest schedule;
  v1::JobSpec& job = *schedule.mutable_job();
  job.set_topic("orders");
  job.set_id("order-1");
  job.set_payload("{\"total\": 12}");
  *job.mutable_delay() = Seconds(30);
  (*job.mutable_labels())["tenant"] = "acme";
  v1::RetryPolicy& retry = *job.mutable_retry();
  retry.set_max_attempts(5);
  *retry.mutable_lease() = Seconds(30);
  *retry.mutable_initial_backoff() = Seconds(1);
  *retry.mutable_max_backoff() = Seconds(60);
  retry.set_backoff_multiplier(2);
  schedule.set_if_exists(v1::IF_EXISTS_KEEP);
  Request("schedule_delay", 0, schedule);

  v1::ScheduleRequest at;
  at.mutable_job()->set_topic("billing.invoices");
  *at.mutable_job()->mutable_fire_at() = At("2026-06-01T09:00:00.250Z");
  at.set_if_exists(v1::IF_EXISTS_REPLACE);
  Request("schedule_fire_at", 0, at);

  v1::ScheduleRequest cron;
  cron.mutable_job()->set_topic("reports");
  cron.mutable_job()->set_id("weekly");
  v1::Recurrence& r = *cron.mutable_job()->mutable_recurrence();
  r.mutable_cron()->set_expression("0 0 12 ? * MON-FRI");
  r.mutable_cron()->set_dialect(v1::CRON_DIALECT_QUARTZ);
  r.mutable_cron()->set_time_zone("Europe/Berlin");
  *r.mutable_end_at() = At("2030-01-01T00:00:00Z");
  *r.mutable_jitter() = Seconds(5);
  r.set_misfire(v1::MISFIRE_POLICY_FIRE_ONCE);
  r.set_overlap(v1::OVERLAP_POLICY_SKIP);
  Request("schedule_recurring_cron", 0, cron);

  v1::ScheduleRequest every;
  every.mutable_job()->set_topic("heartbeat");
  every.mutable_job()->set_id("hb");
  v1::Recurrence& e = *every.mutable_job()->mutable_recurrence();
  *e.mutable_every()->mutable_interval() = Seconds(90);
  *e.mutable_every()->mutable_anchor() = At("2026-01-01T00:00:00Z");
  e.set_max_occurrences(3);

  v1::ScheduleBatchRequest batch;
  *batch.add_requests() = schedule;
  *batch.add_requests() = at;
  *batch.add_requests() = every;
  Request("schedule_batch", 1, batch);

  v1::RescheduleRequest reschedule;
  *reschedule.mutable_key() = Key("orders", "order-1");
  *reschedule.mutable_delay() = Seconds(120);
  Request("reschedule_delay", 2, reschedule);
  v1::RescheduleRequest rerecur;
  *rerecur.mutable_key() = Key("reports", "weekly");
  *rerecur.mutable_recurrence() = r;
  Request("reschedule_recurrence", 2, rerecur);

  v1::CancelRequest cancel;
  *cancel.mutable_key() = Key("orders", "order-1");
  Request("cancel", 3, cancel);

  v1::CancelByPrefixRequest by_prefix;
  by_prefix.set_topic("orders");
  by_prefix.set_id_prefix("order-");
  Request("cancel_by_prefix", 4, by_prefix);

  v1::GetJobRequest get;
  *get.mutable_key() = Key("orders", "order-1");
  Request("get_job", 5, get);
  // An id that is not UTF-8: ParseRequest must name key.id.
  *get.mutable_key() = Key("orders", "x");
  std::string bad = Serialize(get);
  bad.back() = '\xff';
  Write("request_parser", "get_job_bad_utf8", std::string(1, '\x05') + bad);

  // A message of ScheduleStream (bit 5 of the type byte): a Schedule, a
  // Reschedule and a Cancel; then the same with the Cancel's id not UTF-8.
  v1::ScheduleStreamRequest stream;
  v1::JobSpec* streamed =
      stream.add_requests()->mutable_schedule()->mutable_job();
  streamed->set_topic("orders");
  streamed->set_id("order-1");
  streamed->set_payload("{}");
  *streamed->mutable_delay() = Seconds(60);
  v1::RescheduleRequest* moved = stream.add_requests()->mutable_reschedule();
  *moved->mutable_key() = Key("orders", "order-1");
  *moved->mutable_delay() = Seconds(120);
  *stream.add_requests()->mutable_cancel()->mutable_key() = Key("orders", "x");
  Request("schedule_stream", 0x20, stream);
  std::string stream_bad = Serialize(stream);
  stream_bad.back() = '\xff';
  Write("request_parser", "schedule_stream_bad_utf8",
        std::string(1, '\x20') + stream_bad);

  v1::ListJobsRequest list;
  list.set_topic("orders");
  list.set_id_prefix("order-");
  list.add_states(v1::JOB_STATE_SCHEDULED);
  list.add_states(v1::JOB_STATE_DEAD);
  *list.mutable_due_after() = At("2026-01-01T00:00:00Z");
  *list.mutable_due_before() = At("2027-01-01T00:00:00Z");
  list.set_page_size(50);
  list.set_page_token(server::EncodePageToken(list, "order-0042"));
  list.set_include_payload(true);
  Request("list_jobs", 6, list);

  v1::AckRequest ack;
  ack.add_ack_tokens(Token("orders", "order-1", 1));
  ack.add_ack_tokens(Token("orders", "order-2", 3));
  Request("ack", 7, ack);

  v1::NackRequest nack;
  nack.set_ack_token(Token("orders", "order-1", 2));
  *nack.mutable_retry_after() = Seconds(10);
  nack.set_reason("upstream timed out");
  Request("nack", 8, nack);

  v1::ExtendLeaseRequest extend;
  extend.set_ack_token(Token("orders", "order-1", 1));
  *extend.mutable_extend_by() = Seconds(60);
  Request("extend_lease", 9, extend);

  v1::RedriveRequest redrive;
  redrive.set_topic("orders");
  redrive.set_id_prefix("order-");
  Request("redrive", 10, redrive);

  v1::GetStatsRequest stats;
  stats.set_topic("orders");
  stats.set_due_soon(true);
  Request("get_stats", 11, stats);

  v1::PreviewScheduleRequest preview;
  v1::CronSchedule& unix_cron = *preview.mutable_recurrence()->mutable_cron();
  unix_cron.set_expression("*/15 9-17 * * 1-5");
  unix_cron.set_dialect(v1::CRON_DIALECT_UNIX);
  unix_cron.set_time_zone("America/New_York");
  *preview.mutable_after() = At("2026-03-08T05:00:00Z");
  preview.set_count(5);
  Request("preview_schedule", 12, preview);

  v1::PauseJobRequest pause;
  *pause.mutable_key() = Key("reports", "weekly");
  Request("pause_job", 13, pause);
  v1::ResumeJobRequest resume;
  *resume.mutable_key() = Key("reports", "weekly");
  Request("resume_job", 14, resume);

  v1::SubscribeRequest subscribe;
  subscribe.set_topic("orders");
  subscribe.set_consumer("worker-1");
  subscribe.set_max_in_flight(10);
  subscribe.set_max_batch(5);
  Request("subscribe", 15, subscribe);
}

// A token's bytes before base64 (the format in ack_token.h), as the
// encoder would not make them.
std::string RawToken(char version, char attempt, char topic_size,
                     const std::string& rest) {
  std::string raw{version, attempt};
  raw += std::string(version == 1 ? 8 : 16, '\x5a');  // nonce, check
  raw += topic_size;
  raw += rest;
  return absl::WebSafeBase64Escape(raw);
}

void AckTokens() {
  Write("ack_token", "valid", Token("orders", "order-1", 1));
  Write("ack_token", "valid_empty_id", Token("orders.eu", "", 7));
  Write("ack_token", "valid_unicode_id",
        Token("t", "caf\xc3\xa9-\xe2\x82\xac", 1));
  Write("ack_token", "valid_max_attempt", Token("a", "b", 0xffffffff));
  // Version 1: no check (from before an upgrade).
  Write("ack_token", "version1", RawToken(1, 1, 6, "ordersorder-1"));
  // Attempt 0, never issued; base64 with padding; not base64; another
  // version; a topic length past the end.
  Write("ack_token", "attempt_zero", RawToken(2, 0, 6, "ordersorder-1"));
  Write("ack_token", "padded", Token("orders", "order-1", 1) + "==");
  Write("ack_token", "not_base64", "not a token!");
  Write("ack_token", "version3", RawToken(3, 1, 6, "ordersorder-1"));
  Write("ack_token", "topic_past_end", RawToken(2, 1, 127, "t"));
}

void PageTokens() {
  v1::ListJobsRequest query;
  query.set_topic("orders");
  query.set_id_prefix("order-");
  query.add_states(v1::JOB_STATE_SCHEDULED);
  const std::string token = server::EncodePageToken(query, "order-0042");
  const std::string states(1, static_cast<char>(v1::JOB_STATE_SCHEDULED));
  // page_token NUL topic NUL id_prefix NUL states.
  Write("page_token", "valid",
        token + '\0' + "orders" + '\0' + "order-" + '\0' + states);
  Write("page_token", "other_query",
        token + '\0' + "orders" + '\0' + "order-" + '\0');
  v1::ListJobsRequest plain;
  plain.set_topic("t");
  Write("page_token", "valid_no_prefix",
        server::EncodePageToken(plain, "") + '\0' + "t");
  Write("page_token", "empty_token", std::string(1, '\0') + "orders");
  Write("page_token", "garbage", "AAAA$$" + std::string(1, '\0') + "orders");
}

// job_record's input: the key's length, the key, the value.
void Stored(const std::string& name, const std::string& key,
            const std::string& value) {
  Write("job_record", name,
        std::string(1, static_cast<char>(key.size())) + key + value);
}

storage::JobRecord Record(const std::string& topic, const std::string& id,
                          v1::JobState state) {
  storage::JobRecord r;
  r.set_format_version(storage::kJobRecordFormatVersion);
  v1::Job& job = *r.mutable_job();
  job.set_topic(topic);
  job.set_id(id);
  job.set_payload("payload");
  job.set_state(state);
  *job.mutable_fire_at() = At("2026-01-01T00:00:30.500Z");
  *job.mutable_created_at() = At("2026-01-01T00:00:00Z");
  *job.mutable_updated_at() = At("2026-01-01T00:00:00Z");
  (*job.mutable_labels())["tenant"] = "acme";
  return r;
}

void JobRecords() {
  const std::string key = storage::EncodeJobKey("orders", "order-1");
  storage::JobRecord scheduled =
      Record("orders", "order-1", v1::JOB_STATE_SCHEDULED);
  scheduled.set_spec_digest(0x1122334455667788ULL);
  Stored("scheduled", key, Serialize(scheduled));

  storage::JobRecord in_flight =
      Record("orders", "order-1", v1::JOB_STATE_IN_FLIGHT);
  in_flight.mutable_job()->set_attempts(2);
  in_flight.set_delivery_nonce(0xabcdef);
  in_flight.set_lease_expires_at_ms(1'767'225'660'000);
  Stored("in_flight", key, Serialize(in_flight));

  storage::JobRecord done = Record("orders", "order-1", v1::JOB_STATE_DONE);
  done.set_expires_at_ms(1'767'312'000'000);
  Stored("done_retained", key, Serialize(done));

  storage::JobRecord parent =
      Record("reports", "weekly", v1::JOB_STATE_SCHEDULED);
  v1::RecurringStatus& rs = *parent.mutable_job()->mutable_recurring();
  rs.mutable_recurrence()->mutable_cron()->set_expression("0 0 12 ? * MON");
  rs.set_occurrences_fired(3);
  parent.set_occurrences_through_ms(1'767'225'600'000);
  parent.set_ahead_ms(1'767'830'400'000);
  Stored("recurring_parent", storage::EncodeJobKey("reports", "weekly"),
         Serialize(parent));

  storage::JobRecord child =
      Record("reports", "weekly@1767830400000", v1::JOB_STATE_SCHEDULED);
  child.set_made_ahead(true);
  child.mutable_job()->mutable_occurrence_of()->set_id("weekly");
  Stored("occurrence_made_ahead",
         storage::EncodeJobKey("reports", "weekly@1767830400000"),
         Serialize(child));

  storage::JobRecord newer = scheduled;
  newer.set_format_version(storage::kJobRecordFormatVersion + 1);
  Stored("newer_format", key, Serialize(newer));
  Stored("names_another_job", storage::EncodeJobKey("orders", "order-2"),
         Serialize(scheduled));

  const std::string due =
      storage::EncodeDueKey(1'767'225'630'500, "orders", "order-1");
  Stored("due_attempt_mark", due, storage::EncodeDueValue({3, 100}));
  Stored("due_recurring_mark", due,
         storage::EncodeDueValue({storage::kRecurringMark, 100}));
  Stored("due_no_mark", due, storage::EncodeDueValue({0, 100}));
  Stored("due_layout5_mark", due, "\x03");
  Stored("due_empty", due, "");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  out_dir = argv[1];
  Requests();
  AckTokens();
  PageTokens();
  JobRecords();
  return 0;
}
