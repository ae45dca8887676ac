#include "tests/support/dropping_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace delayd::testing {
namespace {

// Polls wake up this often to see stop_.
constexpr int kPollMs = 50;

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::abort();
}

sockaddr_in Loopback(int port) {
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// Copies what `from` has to `to`; false when `from` ended or either failed.
bool Pump(int from, int to) {
  char buffer[16384];
  const ssize_t n = read(from, buffer, sizeof(buffer));
  if (n <= 0) return false;
  for (ssize_t sent = 0; sent < n;) {
    const ssize_t w = write(to, buffer + sent, static_cast<size_t>(n - sent));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    sent += w;
  }
  return true;
}

}  // namespace

DroppingProxy::DroppingProxy(int target_port, int drop)
    : target_port_(target_port), drop_(drop) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) Die("DroppingProxy: socket");
  sockaddr_in addr = Loopback(0);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Die("DroppingProxy: bind");
  }
  if (listen(listen_fd_, 64) != 0) Die("DroppingProxy: listen");
  socklen_t len = sizeof(addr);
  if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Die("DroppingProxy: getsockname");
  }
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

DroppingProxy::~DroppingProxy() {
  stop_.store(true);
  acceptor_.join();
  close(listen_fd_);
  std::vector<std::thread> relays;
  {
    absl::MutexLock lock(&mu_);
    relays.swap(relays_);
  }
  for (std::thread& relay : relays) relay.join();
}

void DroppingProxy::AcceptLoop() {
  while (!stop_.load()) {
    pollfd p = {listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (accepted_.fetch_add(1) < drop_) {
      close(client);
      continue;
    }
    absl::MutexLock lock(&mu_);
    relays_.emplace_back([this, client] { Relay(client); });
  }
}

void DroppingProxy::Relay(int client_fd) {
  const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(target_port_);
  if (upstream < 0 || connect(upstream, reinterpret_cast<sockaddr*>(&addr),
                              sizeof(addr)) != 0) {
    if (upstream >= 0) close(upstream);
    close(client_fd);
    return;
  }
  while (!stop_.load()) {
    pollfd p[2] = {{client_fd, POLLIN, 0}, {upstream, POLLIN, 0}};
    if (poll(p, 2, kPollMs) <= 0) continue;
    if (p[0].revents != 0 && !Pump(client_fd, upstream)) break;
    if (p[1].revents != 0 && !Pump(upstream, client_fd)) break;
  }
  close(upstream);
  close(client_fd);
}

}  // namespace delayd::testing
