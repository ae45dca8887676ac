#!/usr/bin/env bash
# Restart after a burst (issue 18): JOBS (1M) jobs loaded through gRPC
# (delayd-bench load, ScheduleBatch of BATCH, 8 connections, one-shot jobs
# due 60-3600 s ahead) into a fresh delayd under --sync=always, then
# kill -9 at once and a restart: the time from the kill until the server
# answers with every job counted (delayd-bench waitready --expect JOBS),
# and the load's rate, which is what a bound on the WAL costs. Each given
# delayd binary is measured ROUNDS (3) times, the binaries alternated.
#
#   bench/restart/measure.sh [BUILD_DIR] [DELAYD ...]
#
# BUILD_DIR (default build) holds delayd-bench, and delayd when no DELAYD
# is given. Prints one line per run; delayd-bench's JSON lines go to $OUT
# (default /tmp/restart-bench).
set -euo pipefail

build=${1:-build}
shift || true
servers=("$@")
[[ ${#servers[@]} -gt 0 ]] || servers=("$build/server/delayd")
JOBS=${JOBS:-1000000}
BATCH=${BATCH:-100}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-/tmp/restart-bench}
BENCH=$build/bench/delayd-bench/delayd-bench
mkdir -p "$OUT"

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
jget() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | tail -1 | tr -d '"'; }

PID=
start() {  # start DELAYD DIR PORT EXPECT
  "$1" --listen="127.0.0.1:$3" --metrics-listen=127.0.0.1:0 \
    --data-dir="$2/data" --sync=always >>"$2/delayd.log" 2>&1 &
  PID=$!
  "$BENCH" waitready --target "127.0.0.1:$3" --expect "$4" \
    --timeout 300 >"$2/ready.json"
}

run() {  # run N DELAYD ROUND
  local d port t0 f=$OUT/load-$1-$3.json
  d=$(mktemp -d /var/tmp/restart-bench-XXXXXX)
  port=$(free_port)
  start "$2" "$d" "$port" 0
  "$BENCH" load --target "127.0.0.1:$port" --topic restart --jobs "$JOBS" \
    --batch "$BATCH" >"$f"
  local wal
  wal=$(du -ck "$d"/data/*.log | tail -1 | cut -f1)
  t0=$(date +%s%3N)
  kill -9 "$PID"; wait "$PID" 2>/dev/null || true
  start "$2" "$d" "$port" "$JOBS"
  echo "$2 round $3: load $(jget "$f" jobs_per_s) jobs/s," \
    "WAL at the kill $(( wal / 1024 )) MiB," \
    "restart $(awk "BEGIN { printf \"%.2f\", ($(jget "$d/ready.json" t_ready_ms) - $t0) / 1000 }") s," \
    "jobs $(jget "$d/ready.json" count)"
  grep -h "recovered" "$d/delayd.log" | tail -1
  kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true
  rm -rf "$d"
}

for round in $(seq 1 "$ROUNDS"); do
  for i in "${!servers[@]}"; do run "$i" "${servers[$i]}" "$round"; done
done
