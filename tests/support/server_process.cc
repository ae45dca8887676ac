#include "tests/support/server_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/rpc_deadline.h"

extern char** environ;

namespace delayd::testing {

std::string ScrapeMetrics(const std::string& address) {
  return HttpExchange(address,
                      "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n");
}

std::string HttpExchange(const std::string& address,
                         const std::string& request) {
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port =
      htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) !=
      1) {
    return "";
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
    }
  }
  close(fd);
  return out;
}
namespace {

// Value of `key=` up to the next space or end of line in `line`.
std::string Field(const std::string& line, const std::string& key) {
  const size_t start = line.find(key + "=");
  if (start == std::string::npos) return "";
  const size_t begin = start + key.size() + 1;
  const size_t end = line.find_first_of(" \n", begin);
  return line.substr(begin, end == std::string::npos ? end : end - begin);
}

}  // namespace

std::string DelaydBinary() { return DELAYD_BINARY_PATH; }

std::string MakeTempDir() {
  std::string pattern =
      std::filesystem::path(::testing::TempDir()) / "delayd-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
  }
  return pattern;
}

DelaydProcess::DelaydProcess(pid_t pid, std::string dir)
    : pid_(pid), dir_(std::move(dir)) {}

DelaydProcess::~DelaydProcess() {
  if (!exited_) {
    Signal(SIGKILL);
    (void)Wait();
  }
  if (!keep_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

absl::StatusOr<std::unique_ptr<DelaydProcess>> DelaydProcess::Start(
    std::vector<std::string> extra_args, std::string dir,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<std::unique_ptr<DelaydProcess>> process =
      Launch(std::move(extra_args), std::move(dir), timeout);
  if (!process.ok()) return process.status();
  if (absl::Status s = (*process)->WaitServing(deadline - absl::Now());
      !s.ok()) {
    return s;
  }
  return process;
}

absl::StatusOr<std::unique_ptr<DelaydProcess>> DelaydProcess::Launch(
    std::vector<std::string> extra_args, std::string dir,
    absl::Duration timeout) {
  if (dir.empty()) dir = MakeTempDir();
  const std::string log_path = dir + "/delayd.log";
  std::vector<std::string> args = {DelaydBinary(), "--listen=127.0.0.1:0",
                                   "--http-listen=127.0.0.1:0",
                                   "--data-dir=" + dir + "/data"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Hermetic: delayd reads DELAYD_* variables as flags (and refuses unknown
  // ones), so neither a developer's settings nor test knobs such as
  // DELAYD_CRASH_ROUNDS reach it; the test passes all it wants as flags.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DELAYD_", 7) != 0) envp.push_back(*e);
  }
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // Child: stderr (and stdout) to the log, appended across restarts.
    FILE* log = std::fopen(log_path.c_str(), "a");
    if (log != nullptr) {
      dup2(fileno(log), STDERR_FILENO);
      dup2(fileno(log), STDOUT_FILENO);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  std::unique_ptr<DelaydProcess> process(new DelaydProcess(pid, dir));
  // The log may hold lines of an earlier run in the same dir: only the
  // "listening" line written after this start counts.
  std::error_code ec;
  const uintmax_t skip = std::filesystem::file_size(log_path, ec);
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::string log = process->Log();
    if (!ec && skip <= log.size()) log = log.substr(skip);
    const size_t at = log.find("delayd: listening ");
    if (at != std::string::npos && log.find('\n', at) != std::string::npos) {
      const std::string line = log.substr(at, log.find('\n', at) - at);
      process->grpc_address_ = Field(line, "grpc");
      process->http_address_ = Field(line, "http");
      return process;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      process->exited_ = true;
      return absl::InternalError(
          absl::StrCat("delayd exited during start; log:\n", process->Log()));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("delayd did not start in time; log:\n", process->Log()));
}

absl::Status DelaydProcess::WaitServing(
    absl::Duration timeout, std::shared_ptr<grpc::Channel> channel) {
  auto stub = grpc::health::v1::Health::NewStub(
      channel != nullptr ? std::move(channel) : NewChannel());
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(1));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    if (stub->Check(&context, request, &response).ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      return absl::InternalError(
          absl::StrCat("delayd exited before serving; log:\n", Log()));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("delayd did not report SERVING in time; log:\n", Log()));
}

std::shared_ptr<grpc::Channel> DelaydProcess::NewChannel() const {
  return grpc::CreateChannel(grpc_address_, grpc::InsecureChannelCredentials());
}

void DelaydProcess::Signal(int signal) {
  if (!exited_) kill(pid_, signal);
}

absl::StatusOr<int> DelaydProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!exited_) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      return 128 + WTERMSIG(status);
    }
    if (r < 0) return absl::InternalError("waitpid failed");
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("delayd did not exit in time");
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::FailedPreconditionError("already reaped");
}

std::string DelaydProcess::Log() const {
  std::ifstream in(dir_ + "/delayd.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace delayd::testing
