#!/usr/bin/env bash
# Recurring jobs against one-shot jobs, in one run, alternated (issue 14):
#   mem   JOBS (1M) pending jobs — one-shot due 60-3600 s ahead, or
#         recurring every hour from such a time — loaded by ScheduleBatch
#         of 100 into a fresh delayd: RSS per job, disk, and RSS per job
#         after a kill -9 restart;
#   late  BURST (100k) jobs falling due within one second (delayd-bench
#         burst --window-ms 1000): one-shot jobs, or the second occurrences
#         of jobs recurring every 20 s (OCCURRENCE, INTERVAL_MS: a
#         steady-state occurrence, made from the first one's handling).
#         Lateness = receive time - nominal due time.
# Each figure is measured ROUNDS (2) times per kind, the kinds alternated.
#
#   bench/recurring/measure.sh [mem|late|all] [BUILD_DIR]
#
# BUILD_DIR (default build) holds delayd and delayd-bench; a Release or
# RelWithDebInfo build. Prints one line per measurement and a JSON line per
# delayd-bench run under $OUT (default /tmp/recurring-bench).
set -euo pipefail

what=${1:-all}
build=${2:-build}
JOBS=${JOBS:-1000000}
BURST=${BURST:-100000}
ROUNDS=${ROUNDS:-2}
OCCURRENCE=${OCCURRENCE:-2}
INTERVAL_MS=${INTERVAL_MS:-20000}
OUT=${OUT:-/tmp/recurring-bench}
DELAYD=$build/server/delayd
BENCH=$build/bench/delayd-bench/delayd-bench
mkdir -p "$OUT"

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
jget() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | tail -1 | tr -d '"'; }

PID=
start() {  # start DIR PORT
  "$DELAYD" --listen="127.0.0.1:$2" --metrics-listen=127.0.0.1:0 \
    --data-dir="$1/data" --sync=always >"$1/delayd.log" 2>&1 &
  PID=$!
  "$BENCH" waitready --target "127.0.0.1:$2" --expect "${3:-0}" \
    --timeout 300 >"$1/ready.json"
}
stop() { kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }

interval_of() { [[ $1 == recurring ]] && echo 3600000 || echo 0; }

mem_run() {  # mem_run KIND ROUND
  local kind=$1 d port rss0 rss1 rss2
  d=$(mktemp -d /tmp/recurring-mem-XXXXXX)
  port=$(free_port)
  start "$d" "$port"
  rss0=$(rss_kb "$PID")
  "$BENCH" load --target "127.0.0.1:$port" --topic mem --jobs "$JOBS" \
    --batch 100 --recurring-interval-ms "$(interval_of "$kind")" \
    >"$OUT/mem-$kind-$2.json"
  sleep 1.5
  rss1=$(rss_kb "$PID")
  local disk
  disk=$(du -sk "$d/data" | cut -f1)
  local t0
  t0=$(date +%s%3N)
  kill -9 "$PID"; wait "$PID" 2>/dev/null || true
  start "$d" "$port" "$JOBS"
  rss2=$(rss_kb "$PID")
  echo "mem $kind round $2: jobs $(jget "$OUT/mem-$kind-$2.json" jobs_done)" \
    "rss/job $(( (rss1 - rss0) * 1024 / JOBS )) B," \
    "after restart $(( (rss2 - rss0) * 1024 / JOBS )) B," \
    "disk $(( disk / 1024 )) MiB," \
    "restart $(awk "BEGIN { printf \"%.2f\", ($(jget "$d/ready.json" t_ready_ms) - $t0) / 1000 }") s"
  stop
  rm -rf "$d"
}

late_run() {  # late_run KIND ROUND
  local kind=$1 d port f
  d=$(mktemp -d /tmp/recurring-late-XXXXXX)
  port=$(free_port)
  start "$d" "$port"
  f=$OUT/late-$kind-$2.json
  local recurring=()
  if [[ $kind == recurring ]]; then
    recurring=(--recurring-interval-ms "$INTERVAL_MS" --occurrence "$OCCURRENCE")
  fi
  "$BENCH" burst --target "127.0.0.1:$port" --topic late --jobs "$BURST" \
    --batch 100 --window-ms 1000 --lead-ms 15000 "${recurring[@]}" >"$f" || true
  echo "late $kind round $2: received $(jget "$f" received)/$BURST," \
    "early $(jget "$f" early), p50 $(jget "$f" lat_ms_p50) ms," \
    "p99 $(jget "$f" lat_ms_p99) ms, max $(jget "$f" lat_ms_max) ms," \
    "last after window end $(jget "$f" last_recv_minus_window_end_ms) ms"
  stop
  rm -rf "$d"
}

for round in $(seq 1 "$ROUNDS"); do
  for kind in oneshot recurring; do
    if [[ $what == mem || $what == all ]]; then mem_run "$kind" "$round"; fi
  done
done
for round in $(seq 1 "$ROUNDS"); do
  for kind in oneshot recurring; do
    if [[ $what == late || $what == all ]]; then late_run "$kind" "$round"; fi
  done
done
