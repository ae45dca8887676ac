#include "tests/client/recording_server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "delayd/v1/delayd.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace delayd::testing {

class RecordingServer::DelayQueue final : public v1::DelayQueue::Service {
 public:
  explicit DelayQueue(RecordingServer* server) : server_(server) {}

  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest*,
                      v1::Job*) override {
    return server_->Record("GetJob", *context);
  }
  grpc::Status GetStats(grpc::ServerContext* context,
                        const v1::GetStatsRequest*,
                        v1::GetStatsResponse*) override {
    return server_->Record("GetStats", *context);
  }
  grpc::Status Ack(grpc::ServerContext* context, const v1::AckRequest*,
                   v1::AckResponse*) override {
    return server_->Record("Ack", *context);
  }
  grpc::Status Subscribe(grpc::ServerContext* context,
                         const v1::SubscribeRequest*,
                         grpc::ServerWriter<v1::SubscribeResponse>*) override {
    return server_->Record("Subscribe", *context);
  }

 private:
  RecordingServer* const server_;
};

class RecordingServer::Health final : public grpc::health::v1::Health::Service {
 public:
  explicit Health(RecordingServer* server) : server_(server) {}

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return server_->Record("Check", *context);
  }

 private:
  RecordingServer* const server_;
};

RecordingServer::RecordingServer(std::optional<Tls> tls)
    : delay_queue_(std::make_unique<DelayQueue>(this)),
      health_(std::make_unique<Health>(this)) {
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (tls.has_value()) {
    grpc::SslServerCredentialsOptions options(
        tls->client_ca_pem.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    options.pem_key_cert_pairs.push_back({tls->key_pem, tls->cert_pem});
    options.pem_root_certs = tls->client_ca_pem;
    credentials = grpc::SslServerCredentials(options);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
  builder.RegisterService(delay_queue_.get());
  builder.RegisterService(health_.get());
  server_ = builder.BuildAndStart();
}

RecordingServer::~RecordingServer() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
  }
}

std::string RecordingServer::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

void RecordingServer::RequireToken(const std::string& token) {
  absl::MutexLock lock(&mu_);
  required_ = absl::StrCat("Bearer ", token);
}

void RecordingServer::FailNext(int calls) {
  absl::MutexLock lock(&mu_);
  fail_next_ = calls;
}

std::vector<std::string> RecordingServer::Seen(
    const std::string& method) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> values;
  for (const auto& [m, value] : seen_) {
    if (m == method) values.push_back(value);
  }
  return values;
}

grpc::Status RecordingServer::Record(const std::string& method,
                                     const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const std::string value =
      it == metadata.end() ? kNone
                           : std::string(it->second.data(), it->second.size());
  absl::MutexLock lock(&mu_);
  seen_.emplace_back(method, value);
  if (fail_next_ > 0) {
    --fail_next_;
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "failing as told");
  }
  if (required_.has_value() && value != *required_) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing or unknown token");
  }
  return grpc::Status::OK;
}

}  // namespace delayd::testing
