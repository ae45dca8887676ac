#!/usr/bin/env bash
# The HTTP/JSON API beside gRPC, in one run against one fresh delayd
# (--sync=always, data under /var/tmp: the real disk), issue 16:
#   1. Schedule, one job per call, THREADS closed-loop callers for SECONDS:
#      over gRPC and as POST /api/v1/jobs, alternated ROUNDS times;
#   2. GET /api/v1/stats in a closed loop (the jobs of step 1 spread over
#      TOPICS topics);
#   3. with BULK=N (default 0): N more jobs in one more topic, due over the
#      next day, loaded in batches of 1000 (delayd-bench load);
#   4. the console's live view: the server's CPU over WINDOW seconds idle,
#      then with one GET /api/v1/stats a second (every tenth with the
#      due-soon chart), as % of one core.
#
#   bench/http/measure.sh [BUILD_DIR]     (a Release or RelWithDebInfo build)
#   SETTLE=S: wait S seconds after the load before timing the refresh.
set -euo pipefail

build=${1:-build}
THREADS=${THREADS:-8}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
TOPICS=${TOPICS:-1000}
ROUNDS=${ROUNDS:-2}
WINDOW=${WINDOW:-30}
BULK=${BULK:-0}
DELAYD=${DELAYD:-$build/server/delayd}  # DELAYD=...: another build's server
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
if [ "$BULK" -gt 0 ]; then
  "$build/bench/delayd-bench/delayd-bench" load --target "$grpc" \
    --topic bulk --jobs "$BULK" --conns 4 --batch 1000 \
    --min-delay-ms 60000 --max-delay-ms 86400000
fi
"$BENCH" stats "${flags[@]}"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# The CPU of the threads that serve HTTP (CivetWeb's): what the refresh
# itself costs, without the store's compactions owed after the load.
http_ticks() {
  local n=0 task
  for task in /proc/"$pid"/task/*; do
    case $(cat "$task/comm" 2>/dev/null) in civetweb-*)
      n=$((n + $(awk '{print $14 + $15}' "$task/stat")));;
    esac
  done
  echo "$n"
}
hz=$(getconf CLK_TCK)
sleep "${SETTLE:-0}"
t0=$(cpu_ticks); sleep "$WINDOW"; t1=$(cpu_ticks)
h1=$(http_ticks)
"$BENCH" refresh --http="$http" --seconds="$WINDOW"; t2=$(cpu_ticks)
h2=$(http_ticks)
jobs=$(/usr/bin/python3 -c 'import json, sys, urllib.request
r = json.load(urllib.request.urlopen("http://" + sys.argv[1] + "/api/v1/stats"))
print(sum(int(t["scheduled"]) for t in r["topics"]), len(r["topics"]))' "$http")
awk -v idle=$((t1 - t0)) -v busy=$((t2 - t1)) -v http=$((h2 - h1)) \
  -v hz="$hz" -v w="$WINDOW" \
  -v topics="${jobs#* }" -v jobs="${jobs% *}" 'BEGIN {
    printf "console refresh (%d topics, %d jobs scheduled): " \
           "server CPU %.2f%% of a core idle, %.2f%% with GET " \
           "/api/v1/stats once a second\n",
           topics, jobs, 100 * idle / hz / w, 100 * busy / hz / w
    printf "console refresh: CPU of the HTTP threads %.2f%% of a core\n",
           100 * http / hz / w }'
