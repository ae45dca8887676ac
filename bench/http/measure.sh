#!/usr/bin/env bash
# The HTTP/JSON API beside gRPC, in one run against one fresh delayd
# (--sync=always, data under /var/tmp: the real disk), issue 16:
#   1. Schedule, one job per call, THREADS closed-loop callers for SECONDS:
#      over gRPC and as POST /api/v1/jobs, alternated ROUNDS times;
#   2. GET /api/v1/stats in a closed loop (the jobs of step 1 spread over
#      TOPICS topics);
#   3. the console's live view: the server's CPU over WINDOW seconds idle,
#      then with one GET /api/v1/stats a second, as % of one core.
#
#   bench/http/measure.sh [BUILD_DIR]     (a Release or RelWithDebInfo build)
set -euo pipefail

build=${1:-build}
THREADS=${THREADS:-8}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
TOPICS=${TOPICS:-1000}
ROUNDS=${ROUNDS:-2}
WINDOW=${WINDOW:-30}
DELAYD=$build/server/delayd
BENCH=$build/bench/http/http_bench

dir=$(mktemp -d /var/tmp/http-bench-XXXXXX)
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$DELAYD" --listen=127.0.0.1:0 --http-listen=127.0.0.1:0 \
  --data-dir="$dir/data" --sync=always 2>"$dir/log" &
pid=$!
until grep -q "serving" "$dir/log"; do sleep 0.1; done
grpc=$(sed -n 's/.*listening grpc=\([^ ]*\) .*/\1/p' "$dir/log")
http=$(sed -n 's/.*listening grpc=[^ ]* http=\([^ ]*\).*/\1/p' "$dir/log")
flags=(--grpc="$grpc" --http="$http" --threads="$THREADS"
       --seconds="$SECONDS_PER_RUN" --topics="$TOPICS")

echo "# $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  "$BENCH" grpc "${flags[@]}"
  "$BENCH" post "${flags[@]}"
done
"$BENCH" stats "${flags[@]}"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
t0=$(cpu_ticks); sleep "$WINDOW"; t1=$(cpu_ticks)
"$BENCH" refresh --http="$http" --seconds="$WINDOW"; t2=$(cpu_ticks)
jobs=$(/usr/bin/python3 -c 'import json, sys, urllib.request
r = json.load(urllib.request.urlopen("http://" + sys.argv[1] + "/api/v1/stats"))
print(sum(int(t["scheduled"]) for t in r["topics"]))' "$http")
awk -v idle=$((t1 - t0)) -v busy=$((t2 - t1)) -v hz="$hz" -v w="$WINDOW" \
  -v topics="$TOPICS" -v jobs="$jobs" 'BEGIN {
    printf "console refresh (%d topics, %d jobs due within the hour): " \
           "server CPU %.2f%% of a core idle, %.2f%% with GET " \
           "/api/v1/stats once a second\n",
           topics, jobs, 100 * idle / hz / w, 100 * busy / hz / w }'
