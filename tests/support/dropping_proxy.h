// DroppingProxy: a TCP relay on loopback whose first connections fail. It
// listens on 127.0.0.1 (a free port), closes each of the first `drop`
// connections as soon as it accepts them, and relays every later one, byte
// for byte, to 127.0.0.1:target_port. A client sees exactly what a failed
// connection attempt looks like (the peer closes before HTTP/2 settings), then
// a working server, so tests can show that a client tries again.
// The constructor starts a thread; the destructor closes every connection and
// joins. port() and accepted() are thread-safe.
#ifndef DELAYD_TESTS_SUPPORT_DROPPING_PROXY_H_
#define DELAYD_TESTS_SUPPORT_DROPPING_PROXY_H_

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace delayd::testing {

class DroppingProxy {
 public:
  // Crashes the test (CHECK-style abort) if it cannot listen.
  DroppingProxy(int target_port, int drop);
  DroppingProxy(const DroppingProxy&) = delete;
  DroppingProxy& operator=(const DroppingProxy&) = delete;
  ~DroppingProxy();

  // The port it listens on.
  int port() const { return port_; }
  // Connections accepted so far, dropped ones included.
  int accepted() const { return accepted_.load(); }

 private:
  void AcceptLoop();
  void Relay(int client_fd);

  // Constant after construction.
  const int target_port_;
  const int drop_;
  int listen_fd_ = -1;
  int port_ = 0;

  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<std::thread> relays_ ABSL_GUARDED_BY(mu_);
};

}  // namespace delayd::testing

#endif  // DELAYD_TESTS_SUPPORT_DROPPING_PROXY_H_
