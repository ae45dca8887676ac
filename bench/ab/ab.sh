#!/usr/bin/env bash
# ab.sh: two delayd binaries alternated on the same workloads, in one run —
# the A/B comparison for a change that should not move a figure (this
# machine's figures drift by tens of percent between runs, so only an
# alternated run tells a change from the day).
#
#   bench/ab/ab.sh OLD_DELAYD NEW_DELAYD [ROUNDS]      (default 3 rounds)
#
# Each round runs, for OLD then NEW, each on a fresh server in a fresh data
# dir under /var/tmp: one Schedule per round trip (8 conns, --sync=none,
# 10 s), ScheduleBatch of 100 (8 conns, --sync=always, 10 s) and a burst of
# 200k jobs due in 2 s (scheduled 100 per call, 4 subscribers,
# --sync=always). Prints one JSON line per run. DELAYD_BENCH selects the load
# generator (default: this build's); BURST=0 skips the burst, LOADS=0 the
# two loads.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bench=${DELAYD_BENCH:-$repo/build/bench/delayd-bench/delayd-bench}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() {  # NAME BINARY SYNC -- delayd-bench args
  local name=$1 bin=$2 sync=$3 d port pid
  shift 3
  d=$(mktemp -d /var/tmp/ab-XXXX)
  port=$(free_port)
  "$bin" --listen="127.0.0.1:$port" --metrics-listen=127.0.0.1:0 \
    --data-dir="$d/data" --sync="$sync" >"$d/log" 2>&1 &
  pid=$!
  timeout 60 "$bench" waitready --target "127.0.0.1:$port" --expect 0 >/dev/null
  local out
  out=$(timeout 300 "$bench" "$@" --target "127.0.0.1:$port" | tr -d "\n")
  echo "{\"binary\": \"$name\", \"workload\": \"$1\", \"result\": $out}"
  kill -TERM "$pid"; wait "$pid" || true
  rm -rf "$d"
}

for ((r = 1; r <= rounds; r++)); do
  for side in old new; do
    bin=$old; [[ $side == new ]] && bin=$new
    if [[ ${LOADS:-1} != 0 ]]; then
      run "$side" "$bin" none load --topic t1 --jobs 1000000 --conns 8 \
        --batch 1 --max-seconds 10
      run "$side" "$bin" always load --topic t100 --jobs 1000000 --conns 8 \
        --batch 100 --max-seconds 10
    fi
    [[ ${BURST:-1} == 0 ]] && continue
    run "$side" "$bin" always burst --topic b --jobs 200000 --producers 8 \
      --batch 100 --subscribers 4
  done
done
