#include "client/delayctl/args.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace delayd::delayctl {
namespace {

const FlagSpec* Find(const std::string& name, const CommandSpec& spec,
                     const std::vector<FlagSpec>& global) {
  for (const auto* list : {&spec.flags, &global}) {
    for (const FlagSpec& f : *list) {
      if (f.name == name) return &f;
    }
  }
  return nullptr;
}

std::string Where(const CommandSpec& spec) {
  return spec.name.empty()
             ? "see delayctl --help"
             : absl::StrCat("see delayctl ", spec.name, " --help");
}

}  // namespace

std::string Args::Get(const std::string& flag,
                      const std::string& fallback) const {
  auto it = flags_.find(flag);
  return it == flags_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::All(const std::string& flag) const {
  auto it = flags_.find(flag);
  return it == flags_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<Args> Parse(const CommandSpec& spec,
                           const std::vector<FlagSpec>& global,
                           const std::vector<std::string>& argv,
                           bool stop_at_positional) {
  Args args;
  bool flags_done = false;
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    const bool is_flag =
        !flags_done && token.size() > 1 && token[0] == '-' && token != "-";
    if (!is_flag) {
      if (stop_at_positional) break;
      args.positional_.push_back(token);
      continue;
    }
    if (token == "--") {
      flags_done = true;
      continue;
    }
    if (token == "-h" || token == "--help") {
      args.help_ = true;
      continue;
    }
    if (!absl::StartsWith(token, "--")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", token, " (", Where(spec), ")"));
    }
    std::string name = token.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    const FlagSpec* flag = Find(name, spec, global);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (", Where(spec), ")"));
    }
    if (flag->value_name.empty()) {
      if (has_value) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " takes no value"));
      }
    } else if (!has_value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --", name, " needs a value (", flag->value_name, ")"));
      }
      value = argv[++i];
    }
    std::vector<std::string>& values = args.flags_[name];
    if (!flag->repeated) values.clear();
    values.push_back(value);
  }
  args.consumed_ = i;
  if (stop_at_positional || args.help_) return args;
  const int n = static_cast<int>(args.positional_.size());
  if (n < spec.min_args || n > spec.max_args) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec.name, ": expected ",
        spec.positional.empty() ? "no arguments" : spec.positional, ", got ", n,
        " argument", n == 1 ? "" : "s", " (", Where(spec), ")"));
  }
  return args;
}

std::string FlagTable(const std::vector<FlagSpec>& flags) {
  std::vector<std::string> left;
  size_t width = 0;
  for (const FlagSpec& f : flags) {
    std::string l = absl::StrCat("  --", f.name);
    if (!f.value_name.empty()) absl::StrAppend(&l, " ", f.value_name);
    width = std::max(width, l.size());
    left.push_back(std::move(l));
  }
  std::string out;
  for (size_t i = 0; i < flags.size(); ++i) {
    absl::StrAppend(&out, left[i], std::string(width + 2 - left[i].size(), ' '),
                    flags[i].help, flags[i].repeated ? " (repeatable)" : "",
                    "\n");
  }
  return out;
}

std::string HelpText(const CommandSpec& spec,
                     const std::vector<FlagSpec>& global) {
  std::string out = absl::StrCat("usage: delayctl ", spec.name, " [flags]",
                                 spec.positional.empty() ? "" : " ",
                                 spec.positional, "\n\n", spec.summary, "\n");
  if (!spec.details.empty()) absl::StrAppend(&out, "\n", spec.details);
  if (!spec.flags.empty()) {
    absl::StrAppend(&out, "\nflags:\n", FlagTable(spec.flags));
  }
  absl::StrAppend(&out, "\nglobal flags:\n", FlagTable(global));
  return out;
}

}  // namespace delayd::delayctl
