#!/bin/bash
# measure.sh MODE PORT [BUILD_DIR] — one `delayd-bench MODE` run (burst or
# herd, with the arguments of bench/compare.sh) against a fresh floor_server
# on 127.0.0.1:PORT. Prints one JSON line: the bench's line under "bench",
# plus the load average before and after, the floor server's CPU (utime +
# stime from /proc/PID/stat) over the whole run and from 0.7 s before the
# window opens ("delivery"), the client's CPU from that point, and the
# machine's busy CPU over the same span (what else ran shows as the rest).
# FLOOR_PRELOAD=/path/to/lib.so runs the server under LD_PRELOAD.
# MEASURE_SERVER=delayd measures delayd itself instead (as compare.sh runs
# it: --sync=always, a fresh data directory), for its CPU per delivery.
# MEASURE_ARGS are added to the bench's arguments (e.g. "--max-batch 1" for
# one delivery per stream message, as before batched messages).
set -eu
mode=$1 port=$2 build=${3:-$(dirname "$0")/../../build}
case $mode in
  herd) args="herd --jobs 1000000 --batch 1000 --producers 8 --subscribers 4 --lead-ms 30000"
        lead_ms=30000 ;;
  burst) args="burst --jobs 200000 --producers 8 --subscribers 4 --batch 100"
         lead_ms=10000 ;;
  *) echo "usage: $0 burst|herd PORT [BUILD_DIR]" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "${MEASURE_SERVER:-floor}" = delayd ]; then
  "$build/server/delayd" --listen="127.0.0.1:$port" \
    --metrics-listen=127.0.0.1:0 --data-dir="$tmp/data" --sync=always \
    2> "$tmp/server.log" &
  server=$!
  "$build/bench/delayd-bench/delayd-bench" waitready \
    --target "127.0.0.1:$port" --expect 0 --timeout 60 > /dev/null
else
  ${FLOOR_PRELOAD:+env LD_PRELOAD=$FLOOR_PRELOAD} \
    "$build/bench/floor/floor_server" "127.0.0.1:$port" > "$tmp/server.log" &
  server=$!
  sleep 0.5
fi
jiffies() { awk '{print $14 + $15}' "/proc/$1/stat"; }
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
s0=$(jiffies $server)
t0=$(date +%s%3N)
/usr/bin/time -f "%U %S" -o "$tmp/time" "$build/bench/delayd-bench/delayd-bench" \
  $args ${MEASURE_ARGS:-} --target "127.0.0.1:$port" > "$tmp/bench.json" &
timer=$!
# The window opens at the earliest lead_ms after the bench starts.
sleep "$(echo "($lead_ms - 700) / 1000" | bc -l)"
sw=$(jiffies $server)
bw=$(busy)
cw=$(jiffies "$(pgrep -P $timer)")
rc=0
wait $timer || rc=$?
s1=$(jiffies $server)
b1=$(busy)
t1=$(date +%s%3N)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
kill $server
wait $server 2>/dev/null || true
client=$(awk '{print $1 + $2}' "$tmp/time")
printf '{"server": "%s", "mode": "%s", "rc": %d, "load_before": "%s", "load_after": "%s", ' \
  "${MEASURE_SERVER:-floor}" "$mode" $rc "$load0" "$load1"
printf '"wall_s": %.2f, "server_cpu_s_total": %.2f, ' \
  "$(echo "($t1 - $t0) / 1000" | bc -l)" "$(echo "($s1 - $s0) / 100" | bc -l)"
printf '"server_cpu_s_delivery": %.2f, "client_cpu_s_total": %.2f, ' \
  "$(echo "($s1 - $sw) / 100" | bc -l)" "$client"
printf '"client_cpu_s_delivery": %.2f, "machine_busy_s_delivery": %.2f, ' \
  "$(echo "$client - $cw / 100" | bc -l)" "$(echo "($b1 - $bw) / 100" | bc -l)"
printf '"bench": %s}\n' "$(cat "$tmp/bench.json")"
