// Command-line parsing for delayctl: each command declares its flags and
// positional arguments in a CommandSpec, from which both the parser and the
// command's --help text are made, so the two cannot drift apart.
//
// Flags are `--name=value`, `--name value` or, for booleans, `--name`; `--`
// ends the flags; `-` is a positional argument (stdin). Plain data, no
// threads.
#ifndef DELAYD_CLIENT_DELAYCTL_ARGS_H_
#define DELAYD_CLIENT_DELAYCTL_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace delayd::delayctl {

struct FlagSpec {
  std::string name;        // without the leading "--"
  std::string value_name;  // e.g. "DURATION"; empty for a boolean flag
  std::string help;
  bool repeated = false;  // may be given more than once
};

struct CommandSpec {
  std::string name;
  std::string positional;  // usage of the positional arguments
  std::string summary;     // one line, for the command list
  std::string details;     // paragraphs after the usage line; may be empty
  std::vector<FlagSpec> flags;
  int min_args = 0;
  int max_args = 0;
};

// The parsed command line of one command.
class Args {
 public:
  bool Has(const std::string& flag) const { return flags_.contains(flag); }
  // The last value of `flag`, or `fallback` when absent.
  std::string Get(const std::string& flag, const std::string& fallback) const;
  // Every value of a repeated flag, in order.
  std::vector<std::string> All(const std::string& flag) const;
  const std::vector<std::string>& positional() const { return positional_; }
  bool help() const { return help_; }
  // How many tokens of argv were read (with stop_at_positional).
  size_t consumed() const { return consumed_; }

 private:
  friend absl::StatusOr<Args> Parse(const CommandSpec& spec,
                                    const std::vector<FlagSpec>& global,
                                    const std::vector<std::string>& argv,
                                    bool stop_at_positional);
  std::map<std::string, std::vector<std::string>> flags_;
  std::vector<std::string> positional_;
  bool help_ = false;
  size_t consumed_ = 0;
};

// Parses `argv` against the flags of `spec` plus `global`. With
// `stop_at_positional`, stops before the first positional argument (used to
// read global flags before the command name) and does not check counts.
// Errors are INVALID_ARGUMENT with a one-line message.
absl::StatusOr<Args> Parse(const CommandSpec& spec,
                           const std::vector<FlagSpec>& global,
                           const std::vector<std::string>& argv,
                           bool stop_at_positional = false);

// The --help text of a command: usage, details, flags and global flags.
std::string HelpText(const CommandSpec& spec,
                     const std::vector<FlagSpec>& global);

// The flag table, one flag a line, help aligned.
std::string FlagTable(const std::vector<FlagSpec>& flags);

}  // namespace delayd::delayctl

#endif  // DELAYD_CLIENT_DELAYCTL_ARGS_H_
