#!/usr/bin/env bash
# Throughput with TLS and a bearer token (issue 15), beside the plain
# figures: a fresh delayd under --sync=$SYNC (always) per run, loaded by
# delayd-bench load over 8 connections, once batched (ScheduleBatch of 100,
# JOBS jobs or MAX_SECONDS) and once one Schedule per round trip
# (MAX_SECONDS). Three configurations, alternated, ROUNDS (3) times:
#   plain  - no TLS, no auth file (a loopback address, as today);
#   token  - an auth file, a bearer token on every call, no TLS;
#   tls    - TLS and a bearer token (the production set-up).
# Also the server's CPU per job (utime+stime of the delayd process over the
# load, /proc/PID/stat). SYNC=none measures the CPU-bound case, without the
# fsync whose time varies most on this machine.
#
#   bench/security/measure.sh [BUILD_DIR]
#
# BUILD_DIR (default build) holds delayd and delayd-bench. Prints one line
# per run; delayd-bench's JSON lines go to $OUT (default /tmp/security-bench).
set -euo pipefail

build=${1:-build}
JOBS=${JOBS:-1000000}
MAX_SECONDS=${MAX_SECONDS:-15}
SYNC=${SYNC:-always}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-/tmp/security-bench}
DELAYD=$build/server/delayd
BENCH=$build/bench/delayd-bench/delayd-bench
TOKEN=bench-token-0123456789
mkdir -p "$OUT"

pki=$(mktemp -d /var/tmp/security-bench-pki-XXXXXX)
trap 'rm -rf "$pki"' EXIT
(
  cd "$pki"
  ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  openssl req -x509 $ec -days 2 -subj /CN=bench-ca -keyout ca.key \
    -out ca.pem 2>/dev/null
  openssl req $ec -subj /CN=localhost -keyout server.key -out server.csr \
    2>/dev/null
  echo "subjectAltName=DNS:localhost,IP:127.0.0.1" >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 2 -extfile server.ext -out server.pem 2>/dev/null
  printf 'principal bench\n  token sha256:%s\n  grant admin *\n' \
    "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" >auth.txt
)

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
jget() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | tail -1 | tr -d '"'; }
jiffies() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

run() {  # run CONFIG ROUND
  local config=$1 round=$2 d port pid server_args=() client_args=()
  d=$(mktemp -d /var/tmp/security-bench-XXXXXX)
  port=$(free_port)
  case $config in
    plain) ;;
    token) server_args=(--auth-file="$pki/auth.txt")
           client_args=(--token "$TOKEN") ;;
    tls) server_args=(--auth-file="$pki/auth.txt" --tls-cert="$pki/server.pem"
                      --tls-key="$pki/server.key")
         client_args=(--token "$TOKEN" --tls-ca "$pki/ca.pem") ;;
  esac
  "$DELAYD" --listen="127.0.0.1:$port" --http-listen=127.0.0.1:0 \
    --data-dir="$d/data" --sync="$SYNC" "${server_args[@]}" \
    >>"$d/delayd.log" 2>&1 &
  pid=$!
  "$BENCH" waitready --target "127.0.0.1:$port" --expect 0 --timeout 60 \
    "${client_args[@]}" >/dev/null
  local batch f s0 s1
  for batch in 100 1; do
    f=$OUT/$config-batch$batch-$round.json
    s0=$(jiffies "$pid")
    "$BENCH" load --target "127.0.0.1:$port" --topic "b$batch" \
      --jobs "$JOBS" --conns 8 --batch "$batch" \
      --max-seconds "$MAX_SECONDS" "${client_args[@]}" >"$f"
    s1=$(jiffies "$pid")
    local jobs rate
    jobs=$(jget "$f" jobs_done)
    rate=$(jget "$f" jobs_per_s)
    echo "$config sync=$SYNC round $round batch $batch: $(printf %.0f "$rate") jobs/s," \
      "rtt p50 $(jget "$f" rtt_us_p50) us, errors $(jget "$f" errors)," \
      "server CPU $(awk "BEGIN { printf \"%.2f\", ($s1 - $s0) / $hz * 1e6 / $jobs }") us/job"
  done
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$d"
}

for round in $(seq 1 "$ROUNDS"); do
  for config in plain token tls; do run "$config" "$round"; done
done
