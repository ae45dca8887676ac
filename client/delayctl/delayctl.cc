#include "client/delayctl/delayctl.h"

#include <cstdlib>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "client/connection/credentials.h"
#include "client/delayctl/args.h"
#include "client/delayctl/format.h"
#include "client/delayctl/session.h"

namespace delayd::delayctl {
namespace {

constexpr char kDefaultServer[] = "127.0.0.1:7400";

std::vector<FlagSpec> GlobalFlags() {
  return {
      {"server", "HOST:PORT",
       absl::StrCat("delayd's gRPC address (default $DELAYD_SERVER, else ",
                    kDefaultServer, ")")},
      {"timeout", "DURATION",
       "deadline of each call, and of connecting (default 10s)"},
      {"token", "TOKEN",
       "bearer token sent with every call (default $DELAYD_TOKEN, which "
       "ps does not show)"},
      {"tls", "", "connect with TLS, verifying the server by the system's CAs"},
      {"tls-ca", "PATH",
       "connect with TLS, verifying the server by the CAs of this PEM file"},
      {"tls-cert", "PATH",
       "client certificate chain (PEM) for mutual TLS; needs TLS and "
       "--tls-key"},
      {"tls-key", "PATH", "the private key (PEM) of --tls-cert"},
      {"tls-server-name", "NAME",
       "with TLS, the name the server's certificate must carry (default: "
       "the host of --server)"},
      {"json", "",
       "print the API's reply messages as proto3 JSON, one per line"},
      {"help", "", "show help (also -h)"},
      {"version", "", "print delayctl's version"},
  };
}

std::vector<Command> AllCommands() {
  std::vector<Command> all = JobCommands();
  for (Command& c : DeliveryCommands()) all.push_back(std::move(c));
  for (Command& c : ServerCommands()) all.push_back(std::move(c));
  return all;
}

std::string MainHelp(const std::vector<Command>& commands) {
  std::vector<std::vector<std::string>> rows;
  for (const Command& c : commands) {
    rows.push_back({"  " + c.spec.name, c.spec.summary});
  }
  return absl::StrCat(
      "usage: delayctl [global flags] COMMAND [flags] [arguments]\n\n"
      "The command-line client of delayd, the delayed-job server.\n\n"
      "commands:\n",
      Table(rows),
      "\n`delayctl COMMAND --help` shows a command's flags.\n\n"
      "global flags (accepted before or after the command):\n",
      FlagTable(GlobalFlags()),
      "\ntimes: a delay from now (30s, 1h30m, 2d, now) or an RFC 3339 time "
      "(2026-11-22T06:30:00Z)\n\n"
      "exit codes:\n"
      "  0  ok\n"
      "  1  the server refused the call, or the job was not found (also a "
      "cancel\n"
      "     that found nothing, a stale ack token, health NOT_SERVING)\n"
      "  2  usage error: unknown command or flag, bad or missing argument\n"
      "  3  server unreachable within --timeout, or UNAVAILABLE\n");
}

// "delayctl 0.1.0 (commit <12 hex digits>)", the commit when the build knew
// it.
std::string VersionLine() {
  const absl::string_view commit = DELAYD_GIT_COMMIT;
  return commit.empty() ? absl::StrCat("delayctl ", DELAYD_VERSION, "\n")
                        : absl::StrCat("delayctl ", DELAYD_VERSION, " (commit ",
                                       commit, ")\n");
}

// The global flags that say how to reach the server, read and checked:
// INVALID_ARGUMENT naming the flag, or the PEM file that cannot be read.
absl::StatusOr<Endpoint> EndpointFromFlags(const Args& head,
                                           const Args& parsed) {
  auto has = [&](const std::string& f) { return head.Has(f) || parsed.Has(f); };
  auto flag = [&](const std::string& f) {
    return parsed.Get(f, head.Get(f, ""));
  };
  Endpoint endpoint;
  const char* env_server = std::getenv("DELAYD_SERVER");
  endpoint.server = has("server") ? flag("server")
                    : env_server != nullptr && *env_server != '\0'
                        ? env_server
                        : kDefaultServer;
  // An empty --token= sends none, whatever the environment holds.
  endpoint.token =
      has("token") ? flag("token") : connection::TokenFromEnvironment();
  if (absl::Status s = connection::CheckToken(endpoint.token); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        has("token") ? "--token" : "$DELAYD_TOKEN", ": ", s.message()));
  }
  for (const char* f : {"tls-ca", "tls-cert", "tls-key", "tls-server-name"}) {
    if (has(f) && flag(f).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", f, ": empty"));
    }
  }
  if (!has("tls") && !has("tls-ca")) {
    for (const char* f : {"tls-cert", "tls-key", "tls-server-name"}) {
      if (has(f)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f, " needs TLS on (--tls or --tls-ca)"));
      }
    }
    return endpoint;
  }
  if (has("tls-cert") != has("tls-key")) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key go together (mutual TLS needs both)");
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
      connection::TlsChannelCredentials(flag("tls-ca"), flag("tls-cert"),
                                        flag("tls-key"));
  if (!tls.ok()) return tls.status();
  endpoint.tls = *std::move(tls);
  endpoint.tls_server_name = flag("tls-server-name");
  return endpoint;
}

int Fail(const Io& io, int code, absl::string_view message) {
  *io.err << "delayctl: " << message << "\n";
  return code;
}

}  // namespace

bool StopsOnSignal(const std::vector<std::string>& args) {
  absl::StatusOr<Args> head = Parse(CommandSpec(), GlobalFlags(), args, true);
  return head.ok() && head->consumed() < args.size() &&
         args[head->consumed()] == "subscribe";
}

int Run(const std::vector<std::string>& args, const Io& io) {
  const std::vector<FlagSpec> global = GlobalFlags();
  const std::vector<Command> commands = AllCommands();
  // Global flags before the command name.
  CommandSpec none;
  absl::StatusOr<Args> head = Parse(none, global, args, true);
  if (!head.ok()) return Fail(io, kExitUsage, head.status().message());
  if (head->Has("version")) {
    *io.out << VersionLine();
    return kExitOk;
  }
  if (head->consumed() >= args.size()) {
    if (head->help()) {
      *io.out << MainHelp(commands);
      return kExitOk;
    }
    return Fail(io, kExitUsage, "no command given (see delayctl --help)");
  }
  const std::string& name = args[head->consumed()];
  if (name == "help") {
    *io.out << MainHelp(commands);
    return kExitOk;
  }
  const Command* command = nullptr;
  for (const Command& c : commands) {
    if (c.spec.name == name) command = &c;
  }
  if (command == nullptr) {
    return Fail(
        io, kExitUsage,
        absl::StrCat("unknown command '", name, "' (see delayctl --help)"));
  }
  std::vector<std::string> rest(args.begin() + head->consumed() + 1,
                                args.end());
  absl::StatusOr<Args> parsed = Parse(command->spec, global, rest);
  if (!parsed.ok()) return Fail(io, kExitUsage, parsed.status().message());
  if (parsed->Has("version")) {
    *io.out << VersionLine();
    return kExitOk;
  }
  if (parsed->help() || head->help()) {
    *io.out << HelpText(command->spec, global);
    return kExitOk;
  }

  auto flag = [&](const std::string& f, const std::string& fallback) {
    return parsed->Get(f, head->Get(f, fallback));
  };
  absl::StatusOr<absl::Duration> timeout =
      ParseDuration(flag("timeout", "10s"), "--timeout");
  if (!timeout.ok()) return Fail(io, kExitUsage, timeout.status().message());
  if (*timeout <= absl::ZeroDuration()) {
    return Fail(io, kExitUsage, "--timeout: must be more than 0");
  }
  const bool json = parsed->Has("json") || head->Has("json");
  absl::StatusOr<Endpoint> endpoint = EndpointFromFlags(*head, *parsed);
  if (!endpoint.ok()) return Fail(io, kExitUsage, endpoint.status().message());

  Session session(*std::move(endpoint), *timeout, json, io);
  const Exit exit = command->run(session, *parsed);
  if (exit.code != kExitOk || !exit.message.empty()) {
    if (!exit.message.empty()) *io.err << "delayctl: " << exit.message << "\n";
  }
  io.out->flush();
  return exit.code;
}

}  // namespace delayd::delayctl
