#include "bench/delayd-bench/args.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"

namespace delayd::bench {

void Fail(const std::string& what) {
  std::fprintf(stderr, "delayd-bench: %s\n", what.c_str());
  std::exit(2);
}

Args::Args(int argc, char** argv, int from) {
  for (int i = from; i < argc; ++i) {
    std::string a = argv[i];
    if (!a.starts_with("--") || a.size() < 3) Fail("unexpected argument " + a);
    a = a.substr(2);
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      values_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      values_[a] = argv[++i];
    } else {
      Fail("--" + a + " needs a value");
    }
  }
}

int64_t Args::Int(const std::string& name, int64_t def) {
  used_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) {
    Fail("--" + name + ": not an integer: " + it->second);
  }
  return v;
}

double Args::Double(const std::string& name, double def) {
  used_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  double v = 0;
  if (!absl::SimpleAtod(it->second, &v)) {
    Fail("--" + name + ": not a number: " + it->second);
  }
  return v;
}

std::string Args::Str(const std::string& name, const std::string& def) {
  used_.insert(name);
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

void Args::CheckAllUsed() const {
  for (const auto& [name, value] : values_) {
    if (!used_.contains(name)) Fail("unknown option --" + name);
  }
}

}  // namespace delayd::bench
