#include "client/delayctl/session.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/connection/await_ready.h"
#include "client/connection/credentials.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace delayd::delayctl {
namespace {

// How long to keep trying after a connection attempt failed. Long enough
// for several attempts (100 ms backoff growing 1.6x), short enough that a
// server that is down is reported at once by a person's standard.
constexpr absl::Duration kConnectPatience = absl::Seconds(1);

// gRPC's codes are Abseil's, number for number and name for name.
std::string CodeName(grpc::StatusCode code) {
  std::string name =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

}  // namespace

Session::Session(Endpoint endpoint, absl::Duration timeout, bool json,
                 const Io& io)
    : endpoint_(std::move(endpoint)), timeout_(timeout), json_(json), io_(io) {
  grpc::ChannelArguments args;
  // ListJobs pages and payloads are bounded by the server at 4 MiB and
  // 1 MiB; leave room above gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // Try a failed connection again soon (AwaitReady): gRPC's default first
  // backoff is 1 s, and 1.51 connects again only after the resolver answers
  // anew, which by default it does at most every 30 s.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 100);
  if (endpoint_.tls != nullptr && !endpoint_.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(endpoint_.tls_server_name);
  }
  channel_ = grpc::CreateCustomChannel(endpoint_.server,
                                       endpoint_.tls != nullptr
                                           ? endpoint_.tls
                                           : grpc::InsecureChannelCredentials(),
                                       args);
  stub_ = v1::DelayQueue::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> Session::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!endpoint_.token.empty()) {
    context->AddMetadata(connection::kAuthorizationKey,
                         connection::AuthorizationValue(endpoint_.token));
  }
  return context;
}

grpc_connectivity_state Session::AwaitReady(absl::Time deadline) const {
  return connection::AwaitReady(*channel_, deadline, kConnectPatience);
}

Exit Session::Connect() {
  switch (AwaitReady(absl::Now() + timeout_)) {
    case GRPC_CHANNEL_READY:
      return Exit::Ok();
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
    case GRPC_CHANNEL_SHUTDOWN:
      return {kExitUnavailable,
              absl::StrCat("cannot reach server ", server(), ": ",
                           endpoint_.tls != nullptr
                               ? "connection or TLS handshake failed"
                               : "connection failed")};
    default:
      return {kExitUnavailable,
              absl::StrCat("cannot reach server ", server(), " within ",
                           absl::FormatDuration(timeout_))};
  }
}

Exit Session::RpcFailed(const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return {kExitUnavailable,
            absl::StrCat("server ", server(),
                         " unavailable: ", status.error_message())};
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      channel_->GetState(false) != GRPC_CHANNEL_READY) {
    return {kExitUnavailable,
            absl::StrCat("cannot reach server ", server(), " within ",
                         absl::FormatDuration(timeout_))};
  }
  const bool no_token =
      status.error_code() == grpc::StatusCode::UNAUTHENTICATED &&
      endpoint_.token.empty();
  return Exit::Failed(absl::StrCat(
      CodeName(status.error_code()), ": ", status.error_message(),
      no_token ? " (no token was sent: give --token or $DELAYD_TOKEN)" : ""));
}

void Session::PrintJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a well-formed message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  out() << json << "\n";
  out().flush();
}

}  // namespace delayd::delayctl
