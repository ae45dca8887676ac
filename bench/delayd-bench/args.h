// Args: the "--name value" / "--name=value" options of one delayd-bench
// sub-command. Unknown names are an error, so a typo in an orchestrating
// script fails loudly instead of silently running the default. Plain value,
// not thread-safe; read once at startup.
#ifndef DELAYD_BENCH_DELAYD_BENCH_ARGS_H_
#define DELAYD_BENCH_DELAYD_BENCH_ARGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace delayd::bench {

// Prints "delayd-bench: <what>" and exits 2 (a usage error).
[[noreturn]] void Fail(const std::string& what);

class Args {
 public:
  // Parses argv[from..argc). Exits with a message on a malformed option.
  Args(int argc, char** argv, int from);

  // Each accessor marks `name` as known and returns its value or `def`;
  // exits with a message naming the option when the value does not parse.
  int64_t Int(const std::string& name, int64_t def);
  double Double(const std::string& name, double def);
  std::string Str(const std::string& name, const std::string& def);

  // Exits with a message when an option was given that no accessor asked
  // for. Call after reading every option.
  void CheckAllUsed() const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

}  // namespace delayd::bench

#endif  // DELAYD_BENCH_DELAYD_BENCH_ARGS_H_
