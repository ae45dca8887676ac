#!/usr/bin/env bash
# Checks deploy/systemd/delayd.service with `systemd-analyze verify`.
# verify exits 0 on mere warnings (an unknown key, an unparsable value, which
# systemd then ignores), so any output at all fails the test. ExecStart names
# /usr/local/bin/delayd, which verify requires to exist: the copy checked
# points it at the binary just built, and nothing else is changed.
# Usage: systemd_verify.sh UNIT DELAYD_BINARY
set -euo pipefail
unit=$1
binary=$2
command -v systemd-analyze >/dev/null || {
  echo "systemd-analyze not installed (apt-get install systemd)" >&2
  exit 1
}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|/usr/local/bin/delayd|$binary|" "$unit" >"$dir/delayd.service"
grep -q "^ExecStart=$binary " "$dir/delayd.service" || {
  echo "ExecStart does not start /usr/local/bin/delayd" >&2
  exit 1
}
out=$(systemd-analyze verify "$dir/delayd.service" 2>&1) || {
  echo "$out" >&2
  exit 1
}
if [[ -n "$out" ]]; then
  echo "systemd-analyze verify warned:" >&2
  echo "$out" >&2
  exit 1
fi
# The hardening score, for the log (systemd-analyze security --offline).
systemd-analyze security --offline=yes "$dir/delayd.service" 2>/dev/null |
  tail -1 || true
echo "OK: systemd-analyze verify accepts delayd.service"
