#!/usr/bin/env bash
# Where the server's CPU goes on the delivery path (issue 19): a server
# built with -DDELAYD_STAGE_CPU=ON (server/base/stage_cpu.h) runs the herd
# of compare.sh, 1M jobs due in the same millisecond delivered to 4
# subscribers that ack in batches, under --sync=always. Each round prints
# delayd-bench's result, the CPU of each of the server's threads from 0.7 s
# before the instant to the end (summed by thread name), and the CPU of
# each delivery stage (the server's "stage-cpu" lines at exit; a stage's
# parts are indented under it in stage_cpu.h).
#
#   bench/stages/measure.sh [BUILD_DIR] [DELAYD ...]
#
# BUILD_DIR (default build-stages) is configured with the option and built
# here (delayd and delayd-bench; a first build takes about 15 minutes on
# two cores). Each DELAYD given (built with the option too; default
# BUILD_DIR's) is measured ROUNDS (1) times, the binaries alternated.
# JOBS (1000000), LEAD_MS (20000). BUILD=0 leaves BUILD_DIR as it is and
# takes its delayd-bench, for binaries built without the option: the
# threads' CPU is there, the stage table empty.
set -euo pipefail
cd "$(dirname "$0")/../.."

build=${1:-build-stages}
shift || true
servers=("$@")
[[ ${#servers[@]} -gt 0 ]] || servers=("$build/server/delayd")
JOBS=${JOBS:-1000000}
ROUNDS=${ROUNDS:-1}
LEAD_MS=${LEAD_MS:-20000}

if [[ ${BUILD:-1} == 1 ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELAYD_WERROR=ON \
    -DDELAYD_BUILD_TESTS=OFF -DDELAYD_STAGE_CPU=ON >/dev/null
  cmake --build "$build" -j2 --target delayd delayd-bench >/dev/null
fi
BENCH=$build/bench/delayd-bench/delayd-bench

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# name cpu_ticks per thread of PID, summed by thread name
threads() {
  for t in /proc/"$1"/task/*; do
    echo "$(cat "$t/comm" | tr ' ' _) $(awk '{print $14 + $15}' "$t/stat")"
  done | awk '{c[$1] += $2} END {for (k in c) print k, c[k]}' | sort
}

run() {  # run DELAYD ROUND
  local d port pid bench
  d=$(mktemp -d /var/tmp/stages-bench-XXXXXX)
  port=$(free_port)
  "$1" --listen="127.0.0.1:$port" \
    --metrics-listen=127.0.0.1:0 --data-dir="$d/data" --sync=always \
    2>"$d/delayd.log" &
  pid=$!
  "$BENCH" waitready --target "127.0.0.1:$port" --expect 0 --timeout 60 \
    >/dev/null
  "$BENCH" herd --jobs "$JOBS" --batch 1000 --producers 8 --subscribers 4 \
    --lead-ms "$LEAD_MS" --target "127.0.0.1:$port" >"$d/herd.json" &
  bench=$!
  sleep "$(awk "BEGIN { print ($LEAD_MS - 700) / 1000 }")"
  threads "$pid" >"$d/cpu0"
  wait "$bench"
  threads "$pid" >"$d/cpu1"
  kill -TERM "$pid"
  wait "$pid" || true
  echo "== $1 round $2"
  /usr/bin/python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))
print(", ".join("%s %s" % (k, b[k]) for k in [
    "received", "duplicates", "early", "first_recv_minus_window_start_ms",
    "last_recv_minus_window_start_ms", "recv_rate_jobs_per_s",
    "client_cpu_s_receiving"]))' "$d/herd.json"
  echo "-- server threads, CPU s from 0.7 s before the instant"
  join "$d/cpu0" "$d/cpu1" |
    awk '$3 > $2 { printf "%-18s %6.2f\n", $1, ($3 - $2) / 100 }'
  echo "-- delivery stages, CPU s"
  { grep '^stage-cpu' "$d/delayd.log" || true; } | sed 's/^stage-cpu //'
  rm -rf "$d"
}

for round in $(seq 1 "$ROUNDS"); do
  for server in "${servers[@]}"; do run "$server" "$round"; done
done
