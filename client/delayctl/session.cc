#include "client/delayctl/session.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace delayd::delayctl {
namespace {

// gRPC's codes are Abseil's, number for number and name for name.
std::string CodeName(grpc::StatusCode code) {
  std::string name =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

}  // namespace

Session::Session(std::string server, absl::Duration timeout, bool json,
                 const Io& io)
    : server_(std::move(server)), timeout_(timeout), json_(json), io_(io) {
  grpc::ChannelArguments args;
  // ListJobs pages and payloads are bounded by the server at 4 MiB and
  // 1 MiB; leave room above gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(
      server_, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::DelayQueue::NewStub(channel_);
}

void Session::SetDeadline(grpc::ClientContext& context) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
}

Exit Session::Connect() {
  const absl::Time deadline = absl::Now() + timeout_;
  grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_SHUTDOWN ||
        state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      return {kExitUnavailable, absl::StrCat("cannot reach server ", server_,
                                             ": connection failed")};
    }
    if (!channel_->WaitForStateChange(state, absl::ToChronoTime(deadline))) {
      return {kExitUnavailable,
              absl::StrCat("cannot reach server ", server_, " within ",
                           absl::FormatDuration(timeout_))};
    }
    state = channel_->GetState(/*try_to_connect=*/true);
  }
  return Exit::Ok();
}

Exit Session::RpcFailed(const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return {kExitUnavailable, absl::StrCat("server ", server_, " unavailable: ",
                                           status.error_message())};
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      channel_->GetState(false) != GRPC_CHANNEL_READY) {
    return {kExitUnavailable,
            absl::StrCat("cannot reach server ", server_, " within ",
                         absl::FormatDuration(timeout_))};
  }
  return Exit::Failed(absl::StrCat(CodeName(status.error_code()), ": ",
                                   status.error_message()));
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
