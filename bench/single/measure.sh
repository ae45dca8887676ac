#!/usr/bin/env bash
# One Schedule per round trip (issue 18): delayd beside its transport floor
# and the peers, in one run on this machine. ROUNDS (3) times, alternated:
#   floor         floor_server --discard under jemalloc (as delayd links
#                 it): parses Schedule, replies with the job, keeps nothing;
#   delayd-none   delayd --sync=none;
#   delayd-always delayd --sync=always (the default);
#   stream-none, stream-always   delayd, each connection a ScheduleStream
#                 with STREAM_WINDOW (16) requests in flight, one request
#                 per message (not in the default set: ONLY=... to add
#                 them);
#   lib-none, lib-always   delayd through the C++ client library: 8 threads
#                 sharing one Client, each calling Client::Schedule one job
#                 at a time (delayd-bench library; over its ScheduleStream);
#   batch64-none, batch64-always   the same with 64 threads and the
#                 library's linger at LINGER_US (200) microseconds;
#   lib-floor, batch64-floor   those two loads against floor_server
#                 --discard: the library's transport floor;
#   unary-callback, unary-sync, unary-async   floor_unary under jemalloc:
#                 the floor of one unary Schedule under each of gRPC's
#                 server models (not in the default set); unary-async
#                 polls 2 completion queues, each with its own thread,
#                 unary-async-N polls N;
#   async-store   async_schedule: delayd's JobService over RocksDB
#                 (--sync=none), answering Schedule inline on one
#                 completion queue thread (not in the default set);
#   async-batch   the same, the Schedules that came together answered
#                 with one JobService::Stream (not in the default set);
#                 async-batch-always, with --sync=always: one fsync for
#                 the calls that came together;
#   redis-always, redis-everysec   Redis, appendfsync always / everysec;
#   bean-f0, bean-f50              beanstalkd, binlog fsync -f0 / -f50;
# each a fresh server in a fresh dir under DATA_ROOT, loaded for
# MAX_SECONDS (15) over 8 connections with one job per round trip by the
# same clients as bench/compare.sh (delayd-bench load for gRPC, the peers'
# dqbench for Redis and beanstalkd; 100-byte payloads).
#
# Prints one line per run: jobs/s, round trip p50 and p99, and the server's
# CPU per call (utime + stime of the server process over the load, from
# /proc, divided by the jobs done). First it prints the fsync latency of
# DATA_ROOT (dqbench fsync-probe); at the end the medians, and the group
# commit ceiling of issue 18, 8 / (floor rtt p50 + fsync p50).
#
#   bench/single/measure.sh [BUILD_DIR]    (default build)
#
# BUILD_DIR holds delayd, delayd-bench, floor_server, floor_unary and
# async_schedule (a build with benchmarks, the default). dqbench is built into BUILD_DIR/single from
# ../shared/peers. Needs redis-server, beanstalkd and libhiredis-dev.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$REPO/build}" && pwd)
ROUNDS=${ROUNDS:-3}
MAX_SECONDS=${MAX_SECONDS:-15}
DATA_ROOT=${DATA_ROOT:-/var/tmp}
ONLY=${ONLY:-floor,delayd-none,delayd-always,lib-floor,lib-none,lib-always,batch64-floor,batch64-always,redis-always,redis-everysec,bean-f0,bean-f50}
STREAM_WINDOW=${STREAM_WINDOW:-16}
LINGER_US=${LINGER_US:-200}
PEERS_DIR=${PEERS_DIR:-$REPO/../shared/peers}
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
DELAYD=$build/server/delayd
BENCH=$build/bench/delayd-bench/delayd-bench
FLOOR=$build/bench/floor/floor_server
UNARY=$build/bench/floor/floor_unary
ASYNC=$build/bench/single/async_schedule
OUT=$build/single
mkdir -p "$OUT"
DQ=$OUT/dqbench
[[ -x $DQ ]] || g++ -O2 -std=c++17 -Wall -pthread "$PEERS_DIR/src/dqbench.cpp" \
  -lhiredis -o "$DQ"

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
jget() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | tail -1 | tr -d '"'; }
jiffies() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

server=""
dir=""
cleanup() {
  [[ -n $server ]] && kill -KILL "$server" 2>/dev/null && wait "$server" 2>/dev/null
  [[ -n $dir ]] && rm -rf "$dir"
  return 0
}
trap cleanup EXIT

# run CONFIG ROUND: one fresh server, one load; one result line.
run() {
  local config=$1 round=$2 port out j0 j1
  dir=$(mktemp -d "$DATA_ROOT/single-XXXXXX")
  port=$(free_port)
  out=$OUT/$config-$round.json
  case $config in
    floor | *-floor)
      LD_PRELOAD=$JEMALLOC "$FLOOR" "127.0.0.1:$port" --discard >"$dir/log" 2>&1 &
      server=$! ;;
    unary-*)
      # unary-async-1: the async model on one completion queue thread.
      local model=${config#unary-} threads=2
      [[ $model == async-* ]] && threads=${model#async-} model=async
      LD_PRELOAD=$JEMALLOC "$UNARY" "127.0.0.1:$port" --model="$model" \
        --threads="$threads" >"$dir/log" 2>&1 &
      server=$! ;;
    async-store | async-batch | async-batch-always)
      local batch=()
      [[ $config == async-batch* ]] && batch=(--batch)
      [[ $config == async-batch-always ]] && batch+=(--sync=always)
      LD_PRELOAD=$JEMALLOC "$ASYNC" "127.0.0.1:$port" "$dir/data" "${batch[@]}" \
        >"$dir/log" 2>&1 &
      server=$! ;;
    delayd-* | stream-* | lib-* | batch64-*)
      "$DELAYD" --listen="127.0.0.1:$port" --http-listen=127.0.0.1:0 \
        --data-dir="$dir/data" --sync="${config#*-}" >"$dir/log" 2>&1 &
      server=$! ;;
    redis-*)
      redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" \
        --appendonly yes --appendfsync "${config#redis-}" --save "" \
        --daemonize no --protected-mode yes --logfile "$dir/redis.log" &
      server=$! ;;
    bean-f0)
      mkdir -p "$dir/wal"
      beanstalkd -l 127.0.0.1 -p "$port" -b "$dir/wal" -f0 &
      server=$! ;;
    bean-f50)
      mkdir -p "$dir/wal"
      beanstalkd -l 127.0.0.1 -p "$port" -b "$dir/wal" &
      server=$! ;;
  esac
  local stream=()
  [[ $config == stream-* ]] && stream=(--stream "$STREAM_WINDOW")
  case $config in
    floor | unary-* | async-* | delayd-* | stream-*)
      "$BENCH" waitready --target "127.0.0.1:$port" --expect 0 --timeout 60 >/dev/null
      j0=$(jiffies "$server")
      "$BENCH" load --target "127.0.0.1:$port" --topic single --jobs 100000000 \
        --conns 8 --batch 1 --max-seconds "$MAX_SECONDS" "${stream[@]}" \
        >"$out" 2>>"$OUT/client.log" ;;
    lib-* | batch64-*)
      local threads=8 linger=0
      [[ $config == batch64-* ]] && threads=64 linger=$LINGER_US
      "$BENCH" waitready --target "127.0.0.1:$port" --expect 0 --timeout 60 >/dev/null
      j0=$(jiffies "$server")
      "$BENCH" library --target "127.0.0.1:$port" --topic single \
        --jobs 100000000 --threads "$threads" --linger-us "$linger" \
        --max-seconds "$MAX_SECONDS" >"$out" 2>>"$OUT/client.log" ;;
    *)
      local peer=${config%%-*}  # dqbench's name: redis or bean
      "$DQ" "$peer" waitready --port "$port" --expect 0 --timeout 60 >/dev/null
      j0=$(jiffies "$server")
      "$DQ" "$peer" load --port "$port" --jobs 100000000 --conns 8 --batch 1 \
        --max-seconds "$MAX_SECONDS" >"$out" 2>>"$OUT/client.log" ;;
  esac
  j1=$(jiffies "$server")
  kill -KILL "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
  rm -rf "$dir"
  dir=""
  local done_jobs
  done_jobs=$(jget "$out" jobs_done)
  printf '%-15s round %d  %9.0f jobs/s  rtt p50 %6.3f ms  p99 %6.3f ms  server CPU %6.1f us/call\n' \
    "$config" "$round" "$(jget "$out" jobs_per_s)" \
    "$(awk "BEGIN {print $(jget "$out" rtt_us_p50) / 1000}")" \
    "$(awk "BEGIN {print $(jget "$out" rtt_us_p99) / 1000}")" \
    "$(awk "BEGIN {print ($j1 - $j0) / $hz * 1e6 / ($done_jobs > 0 ? $done_jobs : 1)}")" |
    tee -a "$OUT/results.txt"
  echo "$config $(jget "$out" jobs_per_s) $(jget "$out" rtt_us_p50) $(awk "BEGIN {print ($j1 - $j0) / $hz * 1e6 / ($done_jobs > 0 ? $done_jobs : 1)}")" \
    >>"$OUT/rows.txt"
}

: >"$OUT/rows.txt"
echo "== $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), ${ROUNDS} rounds of ${MAX_SECONDS} s" |
  tee -a "$OUT/results.txt"
"$DQ" fsync-probe --dir "$DATA_ROOT" --n 2000 >"$OUT/fsync.json"
fsync_p50=$(jget "$OUT/fsync.json" write_fsync_us_p50)
echo "fsync of $DATA_ROOT: p50 $(jget "$OUT/fsync.json" write_fsync_us_p50) us, p99 $(jget "$OUT/fsync.json" write_fsync_us_p99) us" |
  tee -a "$OUT/results.txt"
IFS=, read -r -a configs <<<"$ONLY"
for ((round = 1; round <= ROUNDS; round++)); do
  for config in "${configs[@]}"; do run "$config" "$round"; done
done

echo "-- medians of $ROUNDS: jobs/s, rtt p50 (ms), server CPU (us/call)" | tee -a "$OUT/results.txt"
for config in "${configs[@]}"; do
  rate=$(awk -v c="$config" '$1 == c {print $2}' "$OUT/rows.txt" | median)
  rtt=$(awk -v c="$config" '$1 == c {print $3 / 1000}' "$OUT/rows.txt" | median)
  cpu=$(awk -v c="$config" '$1 == c {print $4}' "$OUT/rows.txt" | median)
  printf '%-15s %9.0f jobs/s  rtt p50 %6.3f ms  %6.1f us/call\n' "$config" "$rate" "$rtt" "$cpu" |
    tee -a "$OUT/results.txt"
  [[ $config == floor ]] && floor_rtt=$rtt
done
if [[ -n ${floor_rtt:-} ]]; then
  awk -v r="$floor_rtt" -v f="$fsync_p50" 'BEGIN {
    printf "group commit ceiling, 8 / (floor rtt p50 %.3f ms + fsync p50 %.3f ms): %.0f jobs/s\n",
      r, f / 1000, 8 / ((r + f / 1000) / 1000) }' | tee -a "$OUT/results.txt"
fi
