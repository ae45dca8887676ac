// The fixture of the security end-to-end tests (docs/security.md): a
// public key infrastructure made by the openssl tool in the test's temp
// dir, an auth file of five principals (orders, billing, ops, quota, bytes), a
// real delayd serving TLS with it, and raw stubs that send a bearer token. Not
// thread-safe; one per test.
#ifndef DELAYD_TESTS_E2E_SECURITY_FIXTURE_H_
#define DELAYD_TESTS_E2E_SECURITY_FIXTURE_H_

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "server/auth/auth_config.h"
#include "tests/support/rpc_deadline.h"
#include "tests/support/server_process.h"

namespace delayd::testing::security {

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Runs a shell command; fails the test when it fails.
inline void Run(const std::string& command) {
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// Certificates for the tests, made by openssl in `dir`: two CAs; a server
// certificate for localhost/127.0.0.1 from each; client certificates from
// CA 1 for the identity "orders-client" and for an unknown "stranger".
class Pki {
 public:
  explicit Pki(std::string dir) : dir_(std::move(dir)) {}

  void Make() {
    const std::string ec =
        "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    for (const char* ca : {"ca1", "ca2"}) {
      Run(absl::StrCat("cd ", dir_, " && openssl req -x509 ", ec,
                       " -days 2 -subj /CN=test-", ca, " -keyout ", ca,
                       ".key -out ", ca, ".pem 2>/dev/null"));
    }
    Leaf("server1", "ca1", "localhost", "DNS:localhost,IP:127.0.0.1");
    Leaf("server2", "ca2", "localhost", "DNS:localhost,IP:127.0.0.1");
    Leaf("orders", "ca1", "orders-client", "DNS:orders-client");
    Leaf("stranger", "ca1", "stranger", "DNS:stranger");
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }
  std::string Pem(const std::string& name) const { return ReadAll(Path(name)); }

 private:
  void Leaf(const std::string& name, const std::string& ca,
            const std::string& cn, const std::string& san) {
    WriteAll(Path(name + ".ext"), absl::StrCat("subjectAltName=", san, "\n"));
    Run(absl::StrCat("cd ", dir_,
                     " && openssl req -newkey ec -pkeyopt "
                     "ec_paramgen_curve:prime256v1 -nodes -subj /CN=",
                     cn, " -keyout ", name, ".key -out ", name,
                     ".csr 2>/dev/null && openssl x509 -req -in ", name,
                     ".csr -CA ", ca, ".pem -CAkey ", ca,
                     ".key -CAcreateserial ", "-days 2 -extfile ", name,
                     ".ext -out ", name, ".pem 2>/dev/null"));
  }

  const std::string dir_;
};

constexpr char kOrdersToken[] = "orders-secret-token";
constexpr char kBillingToken[] = "billing-secret-token";
constexpr char kOpsToken[] = "ops-secret-token";
constexpr char kLateToken[] = "late-comer-token";
constexpr char kQuotaToken[] = "quota-token";
constexpr char kBytesToken[] = "bytes-token";

inline std::string AuthFile(bool with_late_comer = false) {
  std::string text = absl::StrCat(
      "# principals of the security test\n"
      "principal orders\n"
      "  token sha256:",
      server::auth::Sha256Hex(kOrdersToken), "\n",
      "  identity orders-client\n"
      "  grant schedule,cancel,read,consume orders.*\n"
      "principal billing\n"
      "  token sha256:",
      server::auth::Sha256Hex(kBillingToken), "\n",
      "  grant schedule,read,consume billing.*\n"
      "principal ops\n"
      "  token sha256:",
      server::auth::Sha256Hex(kOpsToken), "\n", "  grant admin *\n",
      "principal quota\n"
      "  token sha256:",
      server::auth::Sha256Hex(kQuotaToken), "\n",
      "  grant schedule,read,consume quota.*\n"
      "  quota pending quota.* 3\n"
      "  quota subscriptions 1\n"
      "principal bytes\n"
      "  token sha256:",
      server::auth::Sha256Hex(kBytesToken), "\n",
      "  grant schedule,cancel,read bytes.*\n"
      "  quota pending_bytes bytes.* 1000\n");
  if (with_late_comer) {
    absl::StrAppend(&text, "principal late\n  token sha256:",
                    server::auth::Sha256Hex(kLateToken),
                    "\n  grant read late.*\n");
  }
  return text;
}

// A channel over TLS trusting `ca_pem`, with a client certificate when
// `cert_pem` is set.
inline std::shared_ptr<grpc::Channel> TlsChannel(
    const std::string& address, const std::string& ca_pem,
    const std::string& cert_pem = "", const std::string& key_pem = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ca_pem;
  ssl.pem_cert_chain = cert_pem;
  ssl.pem_private_key = key_pem;
  grpc::ChannelArguments args;
  // Each channel its own connection: a rotated certificate shows on a new
  // channel only if it does not share the old one's subchannel.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

inline void Authorize(grpc::ClientContext& context, const std::string& token) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  SetDeadline(context, absl::Seconds(10));
}

inline v1::JobSpec Job(const std::string& topic, const std::string& id,
                       absl::Duration delay = absl::Hours(1)) {
  v1::JobSpec job;
  job.set_topic(topic);
  job.set_id(id);
  job.set_payload("p");
  job.mutable_delay()->set_seconds(absl::ToInt64Seconds(delay));
  return job;
}

inline grpc::Status Schedule(v1::DelayQueue::Stub& stub,
                             const std::string& token, const v1::JobSpec& job) {
  grpc::ClientContext context;
  Authorize(context, token);
  v1::ScheduleRequest request;
  *request.mutable_job() = job;
  v1::ScheduleResponse response;
  return stub.Schedule(&context, request, &response);
}

inline grpc::Status GetJob(v1::DelayQueue::Stub& stub, const std::string& token,
                           const std::string& topic, const std::string& id) {
  grpc::ClientContext context;
  Authorize(context, token);
  v1::GetJobRequest request;
  request.mutable_key()->set_topic(topic);
  request.mutable_key()->set_id(id);
  v1::Job job;
  return stub.GetJob(&context, request, &job);
}

// A Subscribe stream with its own context.
struct Stream {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::SubscribeResponse>> reader;

  Stream(v1::DelayQueue::Stub& stub, const std::string& token,
         const std::string& topic) {
    if (!token.empty()) {
      context.AddMetadata("authorization", "Bearer " + token);
    }
    v1::SubscribeRequest request;
    request.set_topic(topic);
    request.set_max_in_flight(10);
    reader = stub.Subscribe(&context, request);
  }
  ~Stream() {
    if (finished) return;
    context.TryCancel();
    v1::SubscribeResponse ignored;
    while (reader->Read(&ignored)) {
    }
    reader->Finish().ok();
  }
  // REQUIRES: Next() returned nullopt. The stream's status.
  grpc::Status Finish() {
    finished = true;
    return reader->Finish();
  }
  bool finished = false;
  // The next delivery, or nullopt when the stream ended.
  std::optional<v1::Delivery> Next() {
    v1::SubscribeResponse message;
    if (!reader->Read(&message) || message.deliveries_size() == 0) {
      return std::nullopt;
    }
    return message.deliveries(0);
  }
};

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    pki_ = std::make_unique<Pki>(dir_);
    pki_->Make();
    if (HasFatalFailure()) return;
    auth_file_ = dir_ + "/auth.txt";
    WriteAll(auth_file_, AuthFile());
    // The server reads its certificate from fixed paths, so that a test can
    // rotate it.
    WriteAll(dir_ + "/tls.pem", pki_->Pem("server1.pem"));
    WriteAll(dir_ + "/tls.key", pki_->Pem("server1.key"));
  }

  // Starts delayd with TLS and the auth file, plus `extra`; waits until it
  // serves (health over a channel trusting CA 1, with the orders client
  // certificate for mutual TLS).
  void StartServer(std::vector<std::string> extra = {},
                   const std::string& data = "") {
    std::vector<std::string> args = {"--tls-cert=" + dir_ + "/tls.pem",
                                     "--tls-key=" + dir_ + "/tls.key",
                                     "--auth-file=" + auth_file_};
    args.insert(args.end(), extra.begin(), extra.end());
    absl::StatusOr<std::unique_ptr<DelaydProcess>> process =
        DelaydProcess::Launch(args, data);
    ASSERT_TRUE(process.ok()) << process.status();
    server_ = *std::move(process);
    ASSERT_TRUE(
        server_
            ->WaitServing(
                absl::Seconds(30),
                TlsChannel(server_->grpc_address(), pki_->Pem("ca1.pem"),
                           pki_->Pem("orders.pem"), pki_->Pem("orders.key")))
            .ok())
        << server_->Log();
  }

  std::unique_ptr<v1::DelayQueue::Stub> Stub(
      std::shared_ptr<grpc::Channel> channel) {
    return v1::DelayQueue::NewStub(std::move(channel));
  }
  std::unique_ptr<v1::DelayQueue::Stub> TlsStub() {
    return Stub(TlsChannel(server_->grpc_address(), pki_->Pem("ca1.pem")));
  }

  std::string dir_;
  std::unique_ptr<Pki> pki_;
  std::string auth_file_;
  std::unique_ptr<DelaydProcess> server_;
};

}  // namespace delayd::testing::security

#endif  // DELAYD_TESTS_E2E_SECURITY_FIXTURE_H_
