// Session: what every delayctl command works with — the channel and stubs to
// one server (plain or TLS), the global flags (--timeout, --json), the
// token every call carries and the output streams — plus the mapping of
// gRPC failures to one error line and an exit code, and the shape of a
// command's unary call (deadline, call, failure, output).
// One per Run(); not thread-safe except where noted.
#ifndef DELAYD_CLIENT_DELAYCTL_SESSION_H_
#define DELAYD_CLIENT_DELAYCTL_SESSION_H_

#include <atomic>
#include <memory>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "client/delayctl/args.h"
#include "client/delayctl/delayctl.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"

namespace delayd::delayctl {

// How a command ended: an exit code and, unless OK, the error line's text.
struct Exit {
  int code = kExitOk;
  std::string message;

  static Exit Ok() { return {}; }
  static Exit Usage(std::string message) {
    return {kExitUsage, std::move(message)};
  }
  static Exit Failed(std::string message) {
    return {kExitFailed, std::move(message)};
  }
};

// How a Session reaches its server: the global flags --server, --tls,
// --tls-ca, --tls-cert, --tls-key, --tls-server-name and --token, read and
// checked (the PEM files read) by Run().
struct Endpoint {
  std::string server;  // host:port, or any gRPC target
  // TLS credentials; null: plain TCP.
  std::shared_ptr<grpc::ChannelCredentials> tls;
  // With TLS: the name the server's certificate must carry; empty: the host
  // of `server`.
  std::string tls_server_name;
  // Sent with every call as `authorization: Bearer TOKEN`; empty: none.
  // REQUIRES: printable ASCII (connection::CheckToken).
  std::string token;
};

// A unary rpc of a generated stub, e.g. &v1::DelayQueue::Stub::GetJob.
template <typename Stub, typename Request, typename Response>
using UnaryRpc = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&,
                                        Response*);

class Session {
 public:
  Session(Endpoint endpoint, absl::Duration timeout, bool json, const Io& io);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  v1::DelayQueue::Stub& stub() { return *stub_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  const std::string& server() const { return endpoint_.server; }
  absl::Duration timeout() const { return timeout_; }
  bool json() const { return json_; }
  std::ostream& out() { return *io_.out; }
  std::istream& in() { return *io_.in; }
  // Thread-safe.
  bool stop_requested() const {
    return io_.stop != nullptr && io_.stop->load();
  }

  // A context for one call to the server, without a deadline: the token's
  // metadata, if there is a token. Every call delayctl makes takes its
  // context from here (a context is neither copyable nor movable).
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  // Waits up to --timeout for the channel to connect. A connection attempt
  // that fails (refused, or closed before the server spoke HTTP/2) is tried
  // again for up to kConnectPatience before this gives up with exit 3, so a
  // refused connection fails in about a second, not at the timeout.
  Exit Connect();

  // The Exit of a failed rpc: 3 for UNAVAILABLE or a deadline missed without
  // a connection, else 1; the message names the server and the code (and,
  // for UNAUTHENTICATED without a token, how to give one).
  Exit RpcFailed(const grpc::Status& status) const;

  // Prints a message as one line of proto3 JSON (enums by name, fields with
  // default values included).
  void PrintJson(const google::protobuf::Message& message);

  // Calls a unary rpc of `stub` once the channel is connected (as Connect
  // waits), all within one --timeout deadline. When no connection came, the
  // call still goes out and fails at once with gRPC's own reason (refused,
  // no such host) or at the deadline.
  template <typename Stub, typename Request, typename Response>
  grpc::Status Call(Stub& stub, UnaryRpc<Stub, Request, Response> rpc,
                    const Request& request, Response* response) const {
    const absl::Time deadline = absl::Now() + timeout_;
    AwaitReady(deadline);
    std::unique_ptr<grpc::ClientContext> context = NewContext();
    context->set_deadline(absl::ToChronoTime(deadline));
    return (stub.*rpc)(context.get(), request, response);
  }

  // Shows a message: as JSON (PrintJson) with --json, else print_text(it).
  template <typename Message, typename PrintText>
  void Show(const Message& message, PrintText print_text) {
    if (json_) {
      PrintJson(message);
    } else {
      print_text(message);
    }
  }

  // The shape of most commands: Call, then Show the reply, then return
  // verdict(reply), the command's judgement of a reply shown either way.
  // A failed call shows nothing and returns RpcFailed(status).
  template <typename Stub, typename Request, typename Response,
            typename PrintText, typename Verdict>
  Exit CallAndShow(Stub& stub, UnaryRpc<Stub, Request, Response> rpc,
                   const Request& request, PrintText print_text,
                   Verdict verdict) {
    Response response;
    const grpc::Status status = Call(stub, rpc, request, &response);
    if (!status.ok()) return RpcFailed(status);
    Show(response, print_text);
    return verdict(response);
  }
  // The same for a command whose every reply is a success.
  template <typename Stub, typename Request, typename Response,
            typename PrintText>
  Exit CallAndShow(Stub& stub, UnaryRpc<Stub, Request, Response> rpc,
                   const Request& request, PrintText print_text) {
    return CallAndShow(stub, rpc, request, print_text,
                       [](const Response&) { return Exit::Ok(); });
  }

 private:
  // connection::AwaitReady with kConnectPatience (session.cc): waits for the
  // channel to connect, until `deadline` or a second after an attempt failed.
  grpc_connectivity_state AwaitReady(absl::Time deadline) const;

  const Endpoint endpoint_;
  const absl::Duration timeout_;
  const bool json_;
  const Io io_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DelayQueue::Stub> stub_;
};

// One delayctl command: its spec (flags, help) and what it does.
struct Command {
  CommandSpec spec;
  Exit (*run)(Session& session, const Args& args);
};

// The commands, in the order `delayctl --help` lists them.
std::vector<Command> JobCommands();       // commands_jobs.cc
std::vector<Command> DeliveryCommands();  // commands_delivery.cc
std::vector<Command> ServerCommands();    // commands_server.cc

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_SESSION_H_
