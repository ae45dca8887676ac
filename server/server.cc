#include "server/server.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/impl/codegen/grpc_types.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/server_builder.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "server/base/log.h"
#include "server/core/jobs_collector.h"

namespace delayd::server {
namespace {

// The gRPC port's credentials: TLS (mutual with a client CA) from files
// gRPC re-reads every reload_interval, or plain text. The files are read
// once here so that a missing or empty one stops the start, naming its
// flag, instead of failing every handshake later.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcCredentials(
    const TlsConfig& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"--tls-cert", tls.cert_file},
        {"--tls-key", tls.key_file},
        {"--tls-client-ca", tls.client_ca_file}}) {
    if (path.empty()) continue;
    std::ifstream in(path);
    std::string head(64, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    if (!in && in.gcount() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": cannot read ", path));
    }
    if (head.find("-----BEGIN") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", path, " is not a PEM file"));
    }
  }
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          tls.key_file, tls.cert_file, tls.client_ca_file,
          static_cast<unsigned int>(absl::ToInt64Seconds(tls.reload_interval)));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls.client_ca_file.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

// "127.0.0.1:0" + 4711 -> "127.0.0.1:4711".
std::string WithPort(const std::string& address, int port) {
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

}  // namespace

Server::Server(const Config& config,
               std::unique_ptr<storage::RocksDbJobStore> store,
               std::unique_ptr<Access> access)
    : config_(config),
      metrics_(std::make_unique<Metrics>()),
      store_(std::move(store)),
      instrumented_store_(store_.get(), metrics_->registry()),
      rpc_metrics_(metrics_->registry()),
      delivery_metrics_(metrics_->registry()),
      jobs_(std::make_unique<JobService>(&instrumented_store_, &clock_,
                                         config.limits, &delivery_metrics_,
                                         config.retention)),
      access_(std::move(access)),
      quota_metrics_(metrics_->registry()),
      quotas_(&jobs_->topics(), &clock_, &quota_metrics_),
      service_(std::make_unique<DelayQueueService>(jobs_.get(), &rpc_metrics_,
                                                   access_.get(), &quotas_)),
      json_api_(
          std::make_unique<JsonApi>(jobs_.get(), access_.get(), &quotas_)) {
  jobs_->SetMemoryHorizon(config.memory_horizon);
  // Without fsyncs a write waits for nothing: the gRPC thread makes it.
  jobs_->SetInlineWrites(config.sync == SyncMode::kNone);
  metrics_->AddCollectable(std::make_shared<JobsCollector>(jobs_.get()));
}

Server::~Server() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const Config& config) {
  // What can refuse the start without touching the store comes first.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      GrpcCredentials(config.tls);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Access> access = std::make_unique<Access>();
  if (!config.auth_file.empty()) {
    absl::StatusOr<std::unique_ptr<Access>> loaded =
        Access::FromFile(config.auth_file);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-file: ", loaded.status().message()));
    }
    access = *std::move(loaded);
  }
  if (config.insecure) {
    DELAYD_LOG_WARN(
        "delayd: --insecure: a non-loopback address may be served without "
        "TLS or an auth file; anyone who reaches it can do anything");
  }
  storage::RocksDbJobStore::Options store_options;
  store_options.sync_mode = config.sync == SyncMode::kAlways
                                ? storage::SyncMode::kAlways
                                : storage::SyncMode::kNone;
  // The compactions RocksDB owes wait until the timers are rebuilt, so that
  // recovery has both cores (Recover turns them on).
  store_options.defer_auto_compactions = true;
  absl::StatusOr<std::unique_ptr<storage::RocksDbJobStore>> store =
      storage::RocksDbJobStore::Open(config.data_dir, store_options);
  if (!store.ok()) return store.status();
  std::unique_ptr<Server> server(
      new Server(config, *std::move(store), std::move(access)));
  absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start(
      config.http_listen, server->metrics_.get(), server->json_api_.get());
  if (!http.ok()) return http.status();
  server->http_server_ = *std::move(http);
  server->http_address_ =
      WithPort(config.http_listen, server->http_server_->port());

  // Health is served by the service itself, on its completion queue (the
  // default health service would bring callback threads of its own).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, *std::move(credentials), &port);
  // gRPC sets SO_REUSEPORT by default: a second delayd on the same port (or,
  // with port 0, one the kernel happened to pick twice) would bind it too
  // and take half the connections, with a store of its own. One port, one
  // server: a taken port is refused like any bind failure.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server->service_->Register(builder);
  // A 1 MiB payload fits with room to spare; a ScheduleBatch is bounded by
  // this too.
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  server->grpc_server_ = builder.BuildAndStart();
  if (server->grpc_server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot serve gRPC on ", config.listen));
  }
  server->grpc_address_ = WithPort(config.listen, port);
  server->service_->Start();
  return server;
}

namespace {

// The version of the system tzdata ("2025b"), from the first line of
// tzdata.zi in $TZDIR or /usr/share/zoneinfo (where Abseil reads the
// zones); "" when it cannot be told.
std::string TzdataVersion() {
  const char* dir = std::getenv("TZDIR");
  std::ifstream in(
      absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/usr/share/zoneinfo",
                   "/tzdata.zi"));
  std::string line;
  if (!std::getline(in, line)) return "";
  constexpr absl::string_view kPrefix = "# version ";
  if (!absl::StartsWith(line, kPrefix) || line.size() == kPrefix.size()) {
    return "";
  }
  return line.substr(kPrefix.size());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

}  // namespace

absl::StatusOr<JobService::RecoveryStats> Server::Recover() {
  // Recurring jobs' next occurrences depend on the zone rules: they are
  // computed again at start when the tzdata is not the one the last start
  // saw (or cannot be told), which costs a read per recurring job.
  const std::string stamp_path = config_.data_dir + "/TZDATA";
  const std::string tzdata = TzdataVersion();
  const bool tzdata_changed = tzdata.empty() || ReadFile(stamp_path) != tzdata;
  absl::StatusOr<JobService::RecoveryStats> stats =
      jobs_->Recover(tzdata_changed);
  if (!stats.ok()) return stats.status();
  if (tzdata_changed && !tzdata.empty()) {
    // Written once the recomputed occurrences are stored; a crash before
    // the rename recomputes again at the next start.
    const std::string tmp = stamp_path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << tzdata << "\n";
    }
    if (std::rename(tmp.c_str(), stamp_path.c_str()) != 0) {
      DELAYD_LOG_ERROR(
          "delayd: cannot write %s; the next start computes the "
          "recurring jobs' occurrences again",
          stamp_path);
    }
  }
  if (absl::Status s = store_->EnableAutoCompactions(); !s.ok()) {
    return s;
  }
  prometheus::Registry& registry = metrics_->registry();
  prometheus::BuildHistogram()
      .Name("delayd_recovery_duration_seconds")
      .Help("Time to rebuild the timers from the store at startup")
      .Register(registry)
      .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25,
                                                       0.5, 1, 2, 4, 8, 16, 60})
      .Observe(absl::ToDoubleSeconds(stats->duration));
  prometheus::BuildGauge()
      .Name("delayd_recovered_jobs")
      .Help("Live jobs found in the store at startup")
      .Register(registry)
      .Add({})
      .Set(static_cast<double>(stats->jobs));
  jobs_->Start();
  service_->StartServing();  // and health SERVING
  json_api_->StartServing();
  return stats;
}

void Server::Shutdown() {
  if (grpc_server_ == nullptr) return;
  service_->StartDraining();  // and health NOT_SERVING
  json_api_->StartDraining();
  // Streams end cleanly; their unacked deliveries are released.
  jobs_->deliverer().CloseAll(
      absl::UnavailableError("server is shutting down"));
  // Beside the gRPC drain: CivetWeb takes up to its poll quantum to stop.
  std::thread stop_http([this] { http_server_->Stop(); });
  const auto deadline = std::chrono::system_clock::now() +
                        absl::ToChronoMilliseconds(config_.shutdown_grace);
  grpc_server_->Shutdown(deadline);
  grpc_server_->Wait();
  service_->Stop();  // every call answered, the workers joined
  grpc_server_.reset();
  service_.reset();
  stop_http.join();  // every HTTP call has returned too
  jobs_->Stop();
  if (absl::Status s = store_->Close(); !s.ok()) {
    DELAYD_LOG_ERROR("closing the store: %s", s.ToString());
  }
}

}  // namespace delayd::server
