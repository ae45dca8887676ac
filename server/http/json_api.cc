#include "server/http/json_api.h"

#include <memory>
#include <random>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "delayd/v1/delayd.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"

namespace delayd::server {
namespace {

namespace pb = google::protobuf;

// 128 random bits, as hex.
std::string NewToken() {
  std::random_device random;  // /dev/urandom
  std::string token;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&token, absl::Hex(random(), absl::kZeroPad8));
  }
  return token;
}

// Compares in time independent of where they differ.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string Text(pb::StringPiece s) { return std::string(s.data(), s.size()); }

// `s` percent-decoded, in a query ('+' is a space, as in a form) or a
// path. A '%' not followed by two hex digits stays as it is.
std::string Decode(absl::string_view s, bool query = true) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (query && s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() &&
               absl::ascii_isxdigit(s[i + 1]) &&
               absl::ascii_isxdigit(s[i + 2])) {
      const auto hex = [](char c) {
        return absl::ascii_isdigit(c) ? c - '0'
                                      : absl::ascii_tolower(c) - 'a' + 10;
      };
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Whether a query parameter may set `f`: a scalar, an enum or a Timestamp
// (not another message).
bool Queryable(const pb::FieldDescriptor* f) {
  return f->message_type() == nullptr ||
         f->message_type()->full_name() == "google.protobuf.Timestamp";
}

// The request's fields from the query string: each parameter is a field,
// by its proto or JSON name, or an alias; its value goes through the JSON
// parser as a string (numbers, enums, timestamps) or a literal (bools), so
// that it is read exactly as in a body.
absl::Status FromQuery(absl::string_view query, pb::Message& request) {
  const pb::Descriptor* d = request.GetDescriptor();
  absl::flat_hash_set<const pb::FieldDescriptor*> seen;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    const size_t eq = pair.find('=');
    std::string name = Decode(pair.substr(0, eq));
    const std::string value =
        eq == absl::string_view::npos ? "" : Decode(pair.substr(eq + 1));
    if (name == "state") name = "states";
    if (name == "prefix") name = "id_prefix";
    const pb::FieldDescriptor* f = d->FindFieldByName(name);
    if (f == nullptr) f = d->FindFieldByCamelcaseName(name);
    const std::string field = absl::StrCat("query parameter '", name, "'");
    if (f == nullptr || !Queryable(f)) {
      std::string known;
      for (int i = 0; i < d->field_count(); ++i) {
        if (!Queryable(d->field(i))) continue;
        absl::StrAppend(&known, known.empty() ? "" : ", ", d->field(i)->name());
      }
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": unknown; this call takes ", known));
    }
    if (!f->is_repeated() && !seen.insert(f).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": given twice (it takes one value)"));
    }
    std::string json;
    if (f->type() == pb::FieldDescriptor::TYPE_BOOL) {
      if (value != "true" && value != "false") {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": must be true or false, got ", JsonQuote(value)));
      }
      json = value;
    } else if (f->enum_type() != nullptr &&
               f->enum_type()->FindValueByName(value) == nullptr) {
      // state=DEAD for JOB_STATE_DEAD: the prefix of the UNSPECIFIED value
      // (without one, the name is read as given, and refused).
      absl::string_view prefix = f->enum_type()->value(0)->name();
      absl::ConsumeSuffix(&prefix, "UNSPECIFIED");
      json = JsonQuote(absl::StrCat(prefix, absl::AsciiStrToUpper(value)));
    } else {
      json = JsonQuote(value);
    }
    if (f->is_repeated()) json = absl::StrCat("[", json, "]");
    std::unique_ptr<pb::Message> one(request.New());
    pb::util::Status s = pb::util::JsonStringToMessage(
        absl::StrCat("{", JsonQuote(f->json_name()), ":", json, "}"),
        one.get());
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", Text(s.message())));
    }
    request.MergeFrom(*one);
  }
  return absl::OkStatus();
}

// A call whose request is its path and body takes no query.
absl::Status NoQuery(absl::string_view query) {
  if (query.empty()) return absl::OkStatus();
  const std::string name = Decode(query.substr(0, query.find_first_of("=&")));
  return absl::InvalidArgumentError(
      absl::StrCat("query parameter '", name,
                   "': this call takes none (its request is the path and "
                   "the body)"));
}

absl::Status FromBody(absl::string_view body, pb::Message& request) {
  if (absl::StripAsciiWhitespace(body).empty()) return absl::OkStatus();
  pb::util::Status s = pb::util::JsonStringToMessage(
      pb::StringPiece(body.data(), body.size()), &request);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("body: not a ", request.GetDescriptor()->name(),
                     " in JSON: ", Text(s.message())));
  }
  return absl::OkStatus();
}

// Puts the path's `value` into a field the body may have set too.
absl::Status FromPath(absl::string_view field, absl::string_view value,
                      std::string& target) {
  if (!target.empty() && target != value) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": the path says ", JsonQuote(value), ", the body ",
                     JsonQuote(target)));
  }
  target = std::string(value);
  return absl::OkStatus();
}

absl::Status FromPath(absl::string_view topic, absl::string_view id,
                      v1::JobKey& key) {
  if (absl::Status s = FromPath("key.topic", topic, *key.mutable_topic());
      !s.ok()) {
    return s;
  }
  return FromPath("key.id", id, *key.mutable_id());
}

HttpReply Reply(const pb::Message& response) {
  pb::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  HttpReply reply;
  pb::util::Status s =
      pb::util::MessageToJsonString(response, &reply.body, options);
  if (!s.ok()) {
    return ErrorReply(absl::InternalError(
        absl::StrCat("the reply does not print as JSON: ", Text(s.message()))));
  }
  reply.body += '\n';
  return reply;
}

}  // namespace

std::string GetStatsJson(const v1::GetStatsResponse& response) {
  v1::GetStatsResponse rest;  // all but the topics
  if (response.has_due_soon()) *rest.mutable_due_soon() = response.due_soon();
  *rest.mutable_fire_lateness() = response.fire_lateness();
  pb::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string printed;
  constexpr absl::string_view kNoTopics = "{\"topics\":[]";
  if (!pb::util::MessageToJsonString(rest, &printed, options).ok() ||
      !absl::StartsWith(printed, kNoTopics)) {
    printed.clear();  // the printer's own form, whatever it is
    (void)pb::util::MessageToJsonString(response, &printed, options);
    return printed;
  }
  std::string out = "{\"topics\":[";
  out.reserve(printed.size() + 300 * response.topics_size());
  for (const v1::TopicStats& t : response.topics()) {
    if (&t != &response.topics(0)) out += ',';
    // Field number order; 64-bit integers as strings, as the mapping says.
    absl::StrAppend(&out, "{\"topic\":", JsonQuote(t.topic()),
                    ",\"scheduled\":\"", t.scheduled(), "\",\"ready\":\"",
                    t.ready(), "\",\"inFlight\":\"", t.in_flight(),
                    "\",\"dead\":\"", t.dead(),
                    "\",\"subscribers\":", t.subscribers());
    absl::StrAppend(&out, ",\"dueNextMinute\":\"", t.due_next_minute(),
                    "\",\"dueNextHour\":\"", t.due_next_hour(),
                    "\",\"dueNextDay\":\"", t.due_next_day(), "\",\"done\":\"",
                    t.done(), "\",\"canceled\":\"", t.canceled(),
                    "\",\"fired\":\"", t.fired(), "\",\"acked\":\"", t.acked(),
                    "\"}");
  }
  out += ']';
  out.append(printed, kNoTopics.size());
  return out;
}

namespace {

HttpReply Reply(const v1::GetStatsResponse& response) {
  HttpReply reply;
  reply.body = GetStatsJson(response);
  reply.body += '\n';
  return reply;
}

// Runs `method` (the rpc `name`) of the JobService for `caller` on
// `request`, which `fill` fills first: authorized, its answer restricted
// to what the caller may read, audited as over gRPC.
template <typename Request, typename Response, typename Fill>
HttpReply Call(JobService* jobs, QuotaKeeper* quotas, const Caller& caller,
               const char* name,
               absl::StatusOr<Response> (JobService::*method)(const Request&),
               Fill fill) {
  Request request;
  if (absl::Status s = fill(request); !s.ok()) return ErrorReply(s);
  std::string topic;
  if (absl::Status s = Authorize(caller, request, &topic); !s.ok()) {
    Audit(caller, name, topic, s);
    return ErrorReply(s);
  }
  absl::StatusOr<QuotaKeeper::Ticket> ticket = Admit(quotas, caller, request);
  if (!ticket.ok()) {
    Audit(caller, name, topic, ticket.status());
    return ErrorReply(ticket.status());
  }
  absl::StatusOr<Response> response = (jobs->*method)(request);
  *ticket = QuotaKeeper::Ticket();  // applied: the jobs count as live
  if (IsAdminMethod(name)) Audit(caller, name, topic, response.status());
  if (!response.ok()) return ErrorReply(response.status());
  Restrict(caller, request, &*response);
  return Reply(*response);
}

}  // namespace

JsonApi::JsonApi(JobService* jobs, const Access* access, QuotaKeeper* quotas)
    : jobs_(jobs), access_(access), quotas_(quotas), csrf_token_(NewToken()) {}

HttpReply JsonApi::Handle(const HttpRequest& request) const {
  const absl::string_view method = request.method;
  const absl::string_view path = request.path;
  const absl::string_view query = request.query;
  const absl::string_view body = request.body;
  if (!serving()) {
    return ErrorReply(absl::UnavailableError(
        "the server is not serving (starting, or shutting down)"));
  }
  const bool changes_state = method == "POST" || method == "DELETE" ||
                             method == "PUT" || method == "PATCH";
  if (changes_state && request.from_browser &&
      !SameToken(request.csrf_token, csrf_token_)) {
    return ErrorReply(absl::PermissionDeniedError(
        "X-CSRF-Token: a call from a browser that changes state must carry "
        "the console's token (GET / holds it)"));
  }
  absl::string_view rest = path;
  if (!absl::ConsumePrefix(&rest, kPrefix)) return NoRoute(method, path);
  Caller caller;
  if (access_ != nullptr && !access_->open()) {
    Credentials credentials;
    credentials.authorization = request.authorization;
    absl::StatusOr<Caller> authenticated = access_->Authenticate(credentials);
    if (!authenticated.ok()) {
      Audit(Caller(), absl::StrCat(method, " ", path), "",
            authenticated.status());
      return ErrorReply(authenticated.status());
    }
    caller = *std::move(authenticated);
  }
  const bool get = method == "GET";
  const bool post = method == "POST";
  const auto body_only = [&](auto& request) {
    absl::Status s = NoQuery(query);
    return s.ok() ? FromBody(body, request) : s;
  };

  if (rest == "/jobs") {
    if (!post) return MethodNotAllowed(method, path, "POST");
    return Call(jobs_, quotas_, caller, "Schedule", &JobService::Schedule,
                body_only);
  }
  if (rest == "/jobs:batch") {
    if (!post) return MethodNotAllowed(method, path, "POST");
    return Call(jobs_, quotas_, caller, "ScheduleBatch",
                &JobService::ScheduleBatch, body_only);
  }
  if (rest == "/stats") {
    if (!get) return MethodNotAllowed(method, path, "GET");
    return Call(jobs_, quotas_, caller, "GetStats", &JobService::GetStats,
                [&](v1::GetStatsRequest& r) { return FromQuery(query, r); });
  }
  if (rest == "/recurrences:preview") {
    if (!post) return MethodNotAllowed(method, path, "POST");
    return Call(jobs_, quotas_, caller, "PreviewSchedule",
                &JobService::PreviewSchedule, body_only);
  }
  if (!absl::ConsumePrefix(&rest, "/topics/")) return NoRoute(method, path);

  // /topics/{topic}:redrive — a topic may hold ':', the verb is after the
  // last one.
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) {
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos ||
        rest.substr(colon + 1) != "redrive") {
      return NoRoute(method, path);
    }
    if (!post) return MethodNotAllowed(method, path, "POST");
    const std::string topic = Decode(rest.substr(0, colon), false);
    return Call(jobs_, quotas_, caller, "Redrive", &JobService::Redrive,
                [&](v1::RedriveRequest& r) {
                  absl::Status s = body_only(r);
                  return s.ok() ? FromPath("topic", topic, *r.mutable_topic())
                                : s;
                });
  }
  const std::string topic = Decode(rest.substr(0, slash), false);
  rest.remove_prefix(slash);
  if (rest == "/jobs") {
    if (!get) return MethodNotAllowed(method, path, "GET");
    return Call(jobs_, quotas_, caller, "ListJobs", &JobService::ListJobs,
                [&](v1::ListJobsRequest& r) {
                  absl::Status s = FromQuery(query, r);
                  return s.ok() ? FromPath("topic", topic, *r.mutable_topic())
                                : s;
                });
  }
  if (rest == "/jobs:cancelByPrefix") {
    if (!post) return MethodNotAllowed(method, path, "POST");
    return Call(jobs_, quotas_, caller, "CancelByPrefix",
                &JobService::CancelByPrefix, [&](v1::CancelByPrefixRequest& r) {
                  absl::Status s = body_only(r);
                  return s.ok() ? FromPath("topic", topic, *r.mutable_topic())
                                : s;
                });
  }
  if (!absl::ConsumePrefix(&rest, "/jobs/")) return NoRoute(method, path);
  if (get || method == "DELETE") {
    // All of the rest: ids may hold ':' and '/'.
    const std::string id = Decode(rest, false);
    const auto by_path = [&](auto& r) {
      absl::Status s = NoQuery(query);
      return s.ok() ? FromPath(topic, id, *r.mutable_key()) : s;
    };
    if (get)
      return Call(jobs_, quotas_, caller, "GetJob", &JobService::GetJob,
                  by_path);
    return Call(jobs_, quotas_, caller, "Cancel", &JobService::Cancel, by_path);
  }
  const size_t colon = rest.rfind(':');
  const absl::string_view verb =
      colon == absl::string_view::npos ? "" : rest.substr(colon + 1);
  if (verb != "cancel" && verb != "reschedule" && verb != "pause" &&
      verb != "resume") {
    return colon == absl::string_view::npos
               ? MethodNotAllowed(method, path, "GET, DELETE")
               : NoRoute(method, path);
  }
  if (!post) return MethodNotAllowed(method, path, "POST");
  const std::string id = Decode(rest.substr(0, colon), false);
  const auto keyed = [&](auto& r) {
    absl::Status s = body_only(r);
    return s.ok() ? FromPath(topic, id, *r.mutable_key()) : s;
  };
  if (verb == "cancel")
    return Call(jobs_, quotas_, caller, "Cancel", &JobService::Cancel, keyed);
  if (verb == "reschedule")
    return Call(jobs_, quotas_, caller, "Reschedule", &JobService::Reschedule,
                keyed);
  if (verb == "pause")
    return Call(jobs_, quotas_, caller, "PauseJob", &JobService::PauseJob,
                keyed);
  return Call(jobs_, quotas_, caller, "ResumeJob", &JobService::ResumeJob,
              keyed);
}

}  // namespace delayd::server
