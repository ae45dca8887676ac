#include "tests/client/delayctl/cli_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "tests/support/server_process.h"

extern char** environ;

namespace delayd::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string DelayctlBinary() { return DELAYCTL_BINARY_PATH; }

CliProcess::CliProcess(const std::vector<std::string>& args,
                       const std::string& stdin_data,
                       const std::vector<std::string>& env)
    : dir_(MakeTempDir()) {
  {
    std::ofstream in(dir_ + "/stdin", std::ios::binary);
    in << stdin_data;
  }
  std::vector<std::string> argv_s = {DelayctlBinary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DELAYD_", 7) != 0) env_s.push_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string in_path = dir_ + "/stdin", out_path = dir_ + "/stdout",
                    err_path = dir_ + "/stderr";
  pid_ = fork();
  if (pid_ == 0) {
    const int in = open(in_path.c_str(), O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
}

CliProcess::~CliProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string CliProcess::Out() const { return ReadFile(dir_ + "/stdout"); }

void CliProcess::Signal(int signal) {
  if (pid_ > 0 && !exited_) kill(pid_, signal);
}

CliResult CliProcess::Wait(absl::Duration timeout) {
  CliResult result;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (!exited_) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      result.exit_code =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      exited_ = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  result.out = ReadFile(dir_ + "/stdout");
  result.err = ReadFile(dir_ + "/stderr");
  return result;
}

CliResult RunCli(const std::vector<std::string>& args,
                 const std::string& stdin_data,
                 const std::vector<std::string>& env) {
  CliProcess process(args, stdin_data, env);
  return process.Wait();
}

}  // namespace delayd::testing
