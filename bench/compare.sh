#!/usr/bin/env bash
# compare.sh: delayd side by side with the peers users would pick instead —
# Redis 7 (sorted set + Lua mover) and beanstalkd 1.12 — on this machine, in
# one run, with the peers' own load generator (../shared/peers, dqbench) and
# ours (bench/delayd-bench) running the same workloads. Writes the table into
# BENCHMARKS.md between its "compare.sh" markers (the rest of the file is left
# alone); raw results go to $BUILD_DIR/compare/raw-<time>.jsonl.
#
#   bench/compare.sh                       # full run, ~20-25 min on 2 vCPUs
#   JOBS=100000 BURST_JOBS=20000 HERD_JOBS=100000 BACKGROUND_JOBS=80000 \
#     BIG_JOBS=0 CAP_SECONDS=8 bench/compare.sh     # smoke run, ~3 min
#   ONLY=delayd,late bench/compare.sh      # subsets, see ONLY below
#
# Knobs (environment):
#   JOBS=1000000         jobs of the throughput / memory / restart runs
#   CAP_SECONDS=30       wall-clock cap of each throughput load (the rate is
#                        measured over what was done, as the peers' harness)
#   BURST_JOBS=200000    jobs due in the 2-s window of the lateness run
#   LIGHT_JOBS=20000     the unsaturated lateness run (0 skips it)
#   BACKGROUND_JOBS=800000  issue 6: pending jobs besides the 200k burst
#                        (0 skips that run)
#   HERD_JOBS=1000000    jobs due at one instant (0 skips the herd)
#   BIG_JOBS=10000000    delayd-only memory run (0 skips it)
#   BIG_CAP_SECONDS=240  cap of its fill (RSS is then per job reached)
#   REPS=1               repetitions; the table shows medians
#   LINGER_US=200        the client library's linger in the batching rows of
#                        the single section
#   ONLY=                comma list; systems (redis, bean, delayd) and/or
#                        sections (tput, mem, late, herd, big, single);
#                        empty = all. Systems and sections combine:
#                        ONLY=delayd,late. single is issue 18's one job per
#                        call: every system's 1 per round trip, the gRPC
#                        floor server, and the client library (8 threads
#                        one job at a time; 64 threads with linger), against
#                        floor_server and delayd.
#                        herd runs delayd's herd again against
#                        floor_server (issue 19's transport floor: the same
#                        messages, nothing stored).
#   PEERS_DIR            the peers' harness (default ../shared/peers next to
#                        the repo, else /work/shared/peers); only read
#   BUILD_DIR=build-compare  BUILD_TYPE=RelWithDebInfo  DATA_ROOT=/var/tmp
#   WRITE=1              0: do not touch BENCHMARKS.md (report to stdout)
#   DELAYD_BINARY=       a delayd built elsewhere to measure instead of
#                        $BUILD_DIR's (delayd-bench stays $BUILD_DIR's)
#
# It starts every server itself on 127.0.0.1 (free ports), each in a fresh
# temp dir under DATA_ROOT, and stops only those processes, by PID — also on
# Ctrl-C, SIGTERM or a failure (trap). Every client run has a timeout.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-1000000}
CAP_SECONDS=${CAP_SECONDS:-30}
BURST_JOBS=${BURST_JOBS:-200000}
LIGHT_JOBS=${LIGHT_JOBS:-20000}
BACKGROUND_JOBS=${BACKGROUND_JOBS:-800000}
HERD_JOBS=${HERD_JOBS:-1000000}
BIG_JOBS=${BIG_JOBS:-10000000}
BIG_CAP_SECONDS=${BIG_CAP_SECONDS:-240}
REPS=${REPS:-1}
LINGER_US=${LINGER_US:-200}
ONLY=${ONLY:-}
BUILD_DIR=${BUILD_DIR:-$REPO/build-compare}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
DATA_ROOT=${DATA_ROOT:-/var/tmp}
WRITE=${WRITE:-1}
if [[ -z "${PEERS_DIR:-}" ]]; then
  PEERS_DIR=$REPO/../shared/peers
  [[ -f $PEERS_DIR/src/dqbench.cpp ]] || PEERS_DIR=/work/shared/peers
fi
PY=/usr/bin/python3
CONNS=8
CONSUMERS=4

# ------------------------------------------------------------ bookkeeping

declare -A LIVE=()  # pid -> "server" | "tool" (tools lead their own group)
TMPDIRS=()
T_START=$(date +%s)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  local pid
  for pid in "${!LIVE[@]}"; do
    if [[ ${LIVE[$pid]} == tool ]]; then
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    log "stopped pid $pid (${LIVE[$pid]})"
  done
  LIVE=()
  if ((${#TMPDIRS[@]})); then rm -rf "${TMPDIRS[@]}"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted: stopping what this run started"; exit 130' INT TERM HUP

want() {  # want SYSTEM SECTION: is this part selected by ONLY?
  [[ -z $ONLY ]] && return 0
  local sys_given=0 sec_given=0 sys_ok=0 sec_ok=0 w
  for w in ${ONLY//,/ }; do
    case $w in
      redis | bean | delayd) sys_given=1; [[ $w == "$1" ]] && sys_ok=1 ;;
      tput | mem | late | herd | big | single) sec_given=1; [[ $w == "$2" ]] && sec_ok=1 ;;
      *) echo "ONLY: unknown word $w" >&2; exit 2 ;;
    esac
  done
  ((sys_given == 0 || sys_ok == 1)) && ((sec_given == 0 || sec_ok == 1))
}

mkdata() {  # mkdata TAG: a fresh temp dir in $D (no subshell, so that
  # cleanup knows it)
  D=$(mktemp -d "$DATA_ROOT/compare-$1-XXXXXX")
  TMPDIRS+=("$D")
}

free_port() {
  $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || true; }
# cpu_ticks PID: the process's utime + stime so far, in clock ticks (HZ).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo null; }
HZ=$(getconf CLK_TCK)
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2

# alive PID: false (with a warning) when a server we started has exited.
alive() {
  kill -0 "$1" 2>/dev/null && return 0
  log "WARNING: server pid $1 exited unexpectedly; skipping the rest of this step"
  return 1
}

# jget FILE KEY: a scalar of the one-line JSON the tools print.
jget() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" "$1" | tail -1 | tr -d '"'; }
calc() {  # calc EXPR: "null" when an operand is missing
  [[ "$*" =~ null|nan ]] && { echo null; return; }
  awk "BEGIN { printf \"%.6g\", $* }" 2>/dev/null || echo null
}

# rec SYSTEM CONFIG FIGURE VALUE UNIT [NOTE]: one result for the report.
rec() {
  local v=${4:-null}
  [[ $v == "" || $v == null || $v == nan ]] && v=null
  printf '{"record": {"rep": %d, "system": "%s", "config": "%s", "figure": "%s", "value": %s, "unit": "%s", "note": "%s"}}\n' \
    "$REP" "$1" "$2" "$3" "$v" "$5" "${6:-}" >>"$RAW"
  log "  $1 | $2 | $3 = $v $5 ${6:-}"
}

# raw TAG FILE: keeps a tool's JSON line in the raw log.
raw() { printf '{"rep": %d, "step": "%s", "result": %s}\n' "$REP" "$1" "$(tail -1 "$2")" >>"$RAW"; }

# note_cmd CMD...: keeps the command line, ports and temp dirs generic.
note_cmd() {
  local a line="" empty="''"
  for a in "$@"; do line+=" ${a:-$empty}"; done
  echo "${line# }" | sed -E "s#$DATA_ROOT/compare-[^/ ]*#\$DATADIR#g; s#$BUILD_DIR/##g;
    s#(--port |-p |127\.0\.0\.1:)[0-9]{2,}#\1\$PORT#g" >>"$COMMANDS"
}

# tool SECONDS OUT CMD...: runs a client with a timeout, its JSON line to OUT;
# returns its exit code. Runs in the background so that a signal to this
# script is handled at once (bash defers traps while a foreground child runs),
# and is stopped when the server it talks to ($SERVER_PID) dies.
tool() {
  local secs=$1 out=$2 rc=0
  shift 2
  note_cmd "$@"
  timeout -k 10 "$secs" "$@" >"$out" 2>>"$LOG" &
  local pid=$! watch=${SERVER_PID:-}
  LIVE[$pid]=tool
  # Stop the client at once if the server it talks to dies.
  if [[ -n $watch ]] && kill -0 "$watch" 2>/dev/null; then
    while kill -0 "$pid" 2>/dev/null; do
      if ! kill -0 "$watch" 2>/dev/null; then
        log "WARNING: server pid $watch exited during: $*"
        kill -TERM -- "-$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
  fi
  wait "$pid" || rc=$?
  unset "LIVE[$pid]"
  [[ -s $out ]] || echo '{}' >"$out"
  return "$rc"
}

# Servers: start_* set SERVER_PID, SERVER_PORT; T0 is taken just before exec.
start_server() {  # start_server LOGFILE CMD...
  local logf=$1
  shift
  note_cmd "$@"
  T0=$EPOCHREALTIME
  "$@" >>"$logf" 2>&1 </dev/null &
  SERVER_PID=$!
  LIVE[$SERVER_PID]=server
}

stop_server() {  # SIGTERM, SIGKILL after 60 s
  local pid=$1 i
  [[ -n ${LIVE[$pid]:-} ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "LIVE[$pid]"
}

kill9() {
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  unset "LIVE[$1]"
}

start_redis() {  # DIR PORT FSYNC
  start_server "$1/server.out" redis-server --bind 127.0.0.1 --port "$2" \
    --dir "$1" --appendonly yes --appendfsync "$3" --save "" --daemonize no \
    --protected-mode yes --logfile "$1/redis.log"
}
start_bean() {  # DIR PORT FLAGS...
  local d=$1 p=$2
  shift 2
  mkdir -p "$d/wal"
  start_server "$d/server.out" beanstalkd -l 127.0.0.1 -p "$p" -b "$d/wal" "$@"
}
start_delayd() {  # DIR PORT SYNC
  start_server "$1/delayd.log" "$DELAYD" --listen="127.0.0.1:$2" \
    --metrics-listen=127.0.0.1:0 --data-dir="$1/data" --sync="$3"
}

# start_floor DIR PORT [floor_server options]: floor_server under jemalloc,
# as delayd links it.
start_floor() {
  local d=$1 port=$2
  shift 2
  start_server "$d/floor.log" env LD_PRELOAD="$JEMALLOC" "$FLOOR" "127.0.0.1:$port" "$@"
}

# wait_up SYSTEM PORT EXPECT OUT: polls until the server answers holding
# EXPECT jobs; restart time = t_ready_ms - T0.
wait_up() {
  local sys=$1 port=$2 expect=$3 out=$4
  if [[ $sys == delayd ]]; then
    tool 400 "$out" "$BENCH" waitready --target "127.0.0.1:$port" \
      --expect "$expect" --timeout 300 || true
  else
    tool 400 "$out" "$DQ" "$sys" waitready --port "$port" --expect "$expect" \
      --timeout 300 || true
  fi
  [[ $(jget "$out" ok) == true ]]
}

# since_t0 OUT [FIELD]: seconds from T0 to a waitready stamp (t_ready_ms:
# all jobs counted; t_answer_ms: first answer — for delayd health SERVING,
# which it reports only once every job is recovered).
since_t0() { calc "$(jget "$1" "${2:-t_ready_ms}") / 1000 - $T0"; }

# ------------------------------------------------------------ set-up, build

setup() {
  "$REPO/scripts/setup.sh"
  local missing=() p sudo=""
  for p in redis-server beanstalkd libhiredis-dev; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true) == ii* ]] ||
      missing+=("$p")
  done
  if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

build() {
  local launcher=() tests=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # A new build directory leaves the tests out; one that exists (BUILD_DIR=build)
  # keeps its own choice, so that its tests stay built.
  [[ -f $BUILD_DIR/CMakeCache.txt ]] || tests=(-DDELAYD_BUILD_TESTS=OFF)
  log "building delayd and delayd-bench ($BUILD_TYPE) in $BUILD_DIR"
  cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    "${tests[@]}" "${launcher[@]}" >/dev/null
  cmake --build "$BUILD_DIR" -j2 --target delayd delayd-bench floor_server >/dev/null
  # DELAYD_BINARY: another delayd to measure (an A/B of two builds in turn).
  DELAYD=${DELAYD_BINARY:-$BUILD_DIR/server/delayd}
  BENCH=$BUILD_DIR/bench/delayd-bench/delayd-bench
  FLOOR=$BUILD_DIR/bench/floor/floor_server
  log "building the peers' dqbench from $PEERS_DIR"
  mkdir -p "$BUILD_DIR/compare"
  DQ=$BUILD_DIR/compare/dqbench
  g++ -O2 -std=c++17 -Wall -pthread "$PEERS_DIR/src/dqbench.cpp" -lhiredis -o "$DQ"
}

# ------------------------------------------------------------ peers

note_cap() {  # the peers' note for a capped load
  if [[ $(jget "$1" capped) == true ]]; then
    echo "capped: $(jget "$1" jobs_done) of $(jget "$1" jobs_requested) jobs in $(calc "$(jget "$1" secs)") s"
  fi
}

# step_note OUT PID: the note of a load: the server died, or it was capped.
step_note() {
  if ! kill -0 "$2" 2>/dev/null; then
    log "WARNING: server pid $2 exited unexpectedly"
    echo "server exited during the run"
  else
    note_cap "$1"
  fi
}

redis_info_field() {  # PORT FIELD
  "$DQ" redis cmd --port "$1" INFO persistence | tr -d '\r' | sed -n "s/^$2://p"
}

redis_settle() {  # PORT PID: waits until no AOF rewrite runs or is scheduled
  local port=$1 i
  for ((i = 0; i < 1500; i++)); do
    alive "$2" || return 1
    [[ $(redis_info_field "$port" aof_rewrite_in_progress) == 0 &&
      $(redis_info_field "$port" aof_rewrite_scheduled) == 0 ]] && return 0
    sleep 0.2
  done
  log "WARNING: AOF rewrite did not settle"
}

# peer_cycle SYSTEM CONFIG FLAG: batched load -> memory -> kill -9 restart,
# as bench.py's redis_cycle / bean_cycle (without the BGREWRITEAOF step).
peer_cycle() {
  local sys=$1 cfg=$2 flag=$3 d port out name pid rss0 rss1
  mkdata "$sys"
  d=$D
  port=$(free_port)
  out=$d/out.json
  name=$([[ $sys == redis ]] && echo redis || echo beanstalkd)
  if [[ $sys == redis ]]; then start_redis "$d" "$port" "$flag"; else start_bean "$d" "$port" $flag; fi
  pid=$SERVER_PID
  wait_up "$sys" "$port" 0 "$out" || { log "$sys did not come up"; stop_server "$pid"; return; }
  rss0=$(rss_kb "$pid")
  tool $((CAP_SECONDS + 120)) "$out" "$DQ" "$sys" load --port "$port" --jobs "$JOBS" \
    --conns $CONNS --batch 100 --max-seconds "$CAP_SECONDS" || true
  raw "$sys $cfg load batch 100" "$out"
  rec "$name" "$cfg" tput100 "$(jget "$out" jobs_per_s)" jobs/s "$(step_note "$out" "$pid")"
  local held
  held=$(jget "$out" "$([[ $sys == redis ]] && echo server_zcard || echo server_jobs)")
  if [[ $(jget "$out" jobs_done) == "$JOBS" && $held == "$JOBS" ]] && want "$sys" mem; then
    if [[ $sys == redis ]] && ! redis_settle "$port" "$pid"; then
      stop_server "$pid"
      return
    fi
    sleep 1.5
    alive "$pid" || { stop_server "$pid"; return; }
    rss1=$(rss_kb "$pid")
    rec "$name" "$cfg" rss_mib "$(calc "$rss1 / 1024")" MiB
    rec "$name" "$cfg" rss_per_job "$(calc "($rss1 - $rss0) * 1024 / $JOBS")" B/job
    kill9 "$pid"
    if [[ $sys == redis ]]; then start_redis "$d" "$port" "$flag"; else start_bean "$d" "$port" $flag; fi
    pid=$SERVER_PID
    if wait_up "$sys" "$port" "$JOBS" "$out"; then
      rec "$name" "$cfg" restart "$(since_t0 "$out")" s
      rec "$name" "$cfg" rss_per_job_restart "$(calc "($(rss_kb "$pid") - $rss0) * 1024 / $JOBS")" B/job
    else
      rec "$name" "$cfg" restart null s "not all jobs back: count $(jget "$out" count)"
    fi
    raw "$sys $cfg restart" "$out"
  elif want "$sys" mem; then
    log "not fully loaded: no memory/restart figures for $name $cfg"
  fi
  stop_server "$pid"
  rm -rf "$d"
}

# single_cycle SYSTEM CONFIG FLAG: one request per round trip (bench.py).
peer_single() {
  local sys=$1 cfg=$2 flag=$3 d port out name j0 j1
  mkdata "$sys"
  d=$D
  port=$(free_port)
  out=$d/out.json
  name=$([[ $sys == redis ]] && echo redis || echo beanstalkd)
  if [[ $sys == redis ]]; then start_redis "$d" "$port" "$flag"; else start_bean "$d" "$port" $flag; fi
  wait_up "$sys" "$port" 0 "$out" || true
  j0=$(cpu_ticks "$SERVER_PID")
  tool $((CAP_SECONDS + 120)) "$out" "$DQ" "$sys" load --port "$port" --jobs "$JOBS" \
    --conns $CONNS --batch 1 --max-seconds "$CAP_SECONDS" || true
  j1=$(cpu_ticks "$SERVER_PID")
  end_single "$name" "$cfg" "$sys $cfg load batch 1" "$out" "$j0" "$j1" "$d"
}

# Records the lateness figures of a burst result; FIG is late200 / late20 /
# late1m (issue 6) / herd.
rec_burst() {
  local name=$1 cfg=$2 fig=$3 out=$4 note=""
  [[ $(jget "$out" scheduled_before_window) == true ]] || note="WARNING: scheduling ran into the window"
  kill -0 "$SERVER_PID" 2>/dev/null || note="$note server exited during the run"
  [[ $(jget "$out" received) == "$(jget "$out" jobs)" ]] ||
    note="$note received only $(jget "$out" received) of $(jget "$out" jobs)"
  rec "$name" "$cfg" "${fig}_p50" "$(jget "$out" lat_ms_p50)" ms "$note"
  rec "$name" "$cfg" "${fig}_p99" "$(jget "$out" lat_ms_p99)" ms
  rec "$name" "$cfg" "${fig}_p999" "$(jget "$out" lat_ms_p999)" ms
  rec "$name" "$cfg" "${fig}_max" "$(jget "$out" lat_ms_max)" ms
  rec "$name" "$cfg" "${fig}_first_after_start" "$(jget "$out" first_recv_minus_window_start_ms)" ms
  rec "$name" "$cfg" "${fig}_last_after_start" "$(jget "$out" last_recv_minus_window_start_ms)" ms
  rec "$name" "$cfg" "${fig}_last_after_end" "$(jget "$out" last_recv_minus_window_end_ms)" ms
  rec "$name" "$cfg" "${fig}_rate" "$(jget "$out" recv_rate_jobs_per_s)" jobs/s
}

# peer_burst SYSTEM JOBS FIG: bench.py's burst_cycle (Redis with P = 10 ms).
peer_burst() {
  local sys=$1 jobs=$2 fig=$3 d port out name cfg extra=()
  mkdata "$sys"
  d=$D
  port=$(free_port)
  out=$d/out.json
  if [[ $sys == redis ]]; then
    name=redis cfg="aof everysec, poll P=10 ms"
    start_redis "$d" "$port" everysec
    extra=(--poll-ms 10 --move-limit 100)
  else
    name=beanstalkd cfg="binlog -f50 (default)"
    start_bean "$d" "$port"
  fi
  wait_up "$sys" "$port" 0 "$out" || true
  tool 300 "$out" "$DQ" "$sys" burst --port "$port" --jobs "$jobs" --producers $CONNS \
    --batch 1 --consumers $CONSUMERS --lead-ms 10000 --window-ms 2000 \
    --max-wait-seconds 120 "${extra[@]}" || true
  raw "$sys burst $jobs" "$out"
  rec_burst "$name" "$cfg" "$fig" "$out"
  stop_server "$SERVER_PID"
  rm -rf "$d"
}

# ------------------------------------------------------------ delayd

# delayd_cycle SYNC: batched load -> memory -> kill -9 restart.
delayd_cycle() {
  local sync=$1 cfg="sync=$1" d port out pid rss0 rss1
  mkdata delayd
  d=$D
  port=$(free_port)
  out=$d/out.json
  start_delayd "$d" "$port" "$sync"
  pid=$SERVER_PID
  wait_up delayd "$port" 0 "$out" || { log "delayd did not come up"; stop_server "$pid"; return; }
  rss0=$(rss_kb "$pid")
  tool $((CAP_SECONDS + 120)) "$out" "$BENCH" load --target "127.0.0.1:$port" \
    --topic "load100-$sync" --jobs "$JOBS" --conns $CONNS --batch 100 \
    --max-seconds "$CAP_SECONDS" || true
  raw "delayd $cfg load batch 100" "$out"
  rec delayd "$cfg" tput100 "$(jget "$out" jobs_per_s)" jobs/s "$(step_note "$out" "$pid")"
  rec delayd "$cfg" tput100_client_cpu "$(jget "$out" client_cpu_s)" s
  if [[ $(jget "$out" jobs_done) == "$JOBS" && $(jget "$out" server_jobs) == "$JOBS" ]] && want delayd mem; then
    sleep 1.5
    alive "$pid" || { stop_server "$pid"; return; }
    rss1=$(rss_kb "$pid")
    rec delayd "$cfg" rss_mib "$(calc "$rss1 / 1024")" MiB
    rec delayd "$cfg" rss_per_job "$(calc "($rss1 - $rss0) * 1024 / $JOBS")" B/job
    rec delayd "$cfg" disk_mib "$(calc "$(du -sk "$d/data" | cut -f1) / 1024")" MiB
    kill9 "$pid"
    start_delayd "$d" "$port" "$sync"
    pid=$SERVER_PID
    if wait_up delayd "$port" "$JOBS" "$out"; then
      rec delayd "$cfg" restart "$(since_t0 "$out" t_answer_ms)" s
      rec delayd "$cfg" restart_listening "$(since_t0 "$out" t_connect_ms)" s
      rec delayd "$cfg" restart_counted "$(since_t0 "$out")" s
      rec delayd "$cfg" rss_per_job_restart "$(calc "($(rss_kb "$pid") - $rss0) * 1024 / $JOBS")" B/job
    else
      rec delayd "$cfg" restart null s "not all jobs back: count $(jget "$out" count)"
    fi
    raw "delayd $cfg restart" "$out"
  elif want delayd mem; then
    log "not fully loaded: no memory/restart figures for delayd $cfg"
  fi
  stop_server "$pid"
  rm -rf "$d"
}

delayd_single() {
  local sync=$1 cfg="sync=$1" d port out j0 j1
  mkdata delayd
  d=$D
  port=$(free_port)
  out=$d/out.json
  start_delayd "$d" "$port" "$sync"
  wait_up delayd "$port" 0 "$out" || true
  j0=$(cpu_ticks "$SERVER_PID")
  tool $((CAP_SECONDS + 120)) "$out" "$BENCH" load --target "127.0.0.1:$port" \
    --topic "load1-$sync" --jobs "$JOBS" --conns $CONNS --batch 1 \
    --max-seconds "$CAP_SECONDS" || true
  j1=$(cpu_ticks "$SERVER_PID")
  rec delayd "$cfg" tput1_client_cpu "$(jget "$out" client_cpu_s)" s
  end_single delayd "$cfg" "delayd $cfg load batch 1" "$out" "$j0" "$j1" "$d"
}

# end_single SYSTEM CONFIG TAG OUT J0 J1 DIR: records a load of one job per
# call (its JSON line OUT, kept in the raw log as TAG; J0 and J1 the
# server's cpu_ticks around it): jobs/s, the round trip's p50 and p99, and
# the server's and the client's CPU per job. Then stops the server and
# removes DIR.
end_single() {
  local out=$4 done_jobs
  raw "$3" "$out"
  rec "$1" "$2" tput1 "$(jget "$out" jobs_per_s)" jobs/s "$(step_note "$out" "$SERVER_PID")"
  done_jobs=$(jget "$out" jobs_done)
  [[ -z $done_jobs || $done_jobs == 0 ]] && done_jobs=null
  rec "$1" "$2" tput1_p50 "$(calc "$(jget "$out" rtt_us_p50) / 1000")" ms
  rec "$1" "$2" tput1_p99 "$(calc "$(jget "$out" rtt_us_p99) / 1000")" ms
  rec "$1" "$2" tput1_server_cpu "$(calc "($6 - $5) / $HZ * 1e6 / $done_jobs")" us
  # The peers' dqbench does not report its CPU.
  if [[ -n $(jget "$out" client_cpu_s) ]]; then
    rec "$1" "$2" tput1_client_cpu_per_job "$(calc "$(jget "$out" client_cpu_s) * 1e6 / $done_jobs")" us
  fi
  stop_server "$SERVER_PID"
  rm -rf "$7"
}

# single_run SERVER CONFIG SYNC MODE THREADS LINGER_US (issue 18): one load
# of one job per call against a fresh SERVER, floor (floor_server --discard
# under jemalloc, as delayd links it: parses, answers, keeps nothing) or
# delayd (--sync=SYNC). MODE unary: delayd-bench load, CONNS connections,
# one Schedule per round trip. MODE library: delayd-bench library, THREADS
# threads sharing one Client, each calling Client::Schedule one job at a
# time, with the library's linger at LINGER_US.
single_run() {
  local server=$1 cfg=$2 sync=$3 mode=$4 threads=$5 linger=$6 d port out j0 j1
  mkdata "$server"
  d=$D
  port=$(free_port)
  out=$d/out.json
  if [[ $server == floor ]]; then
    start_floor "$d" "$port" --discard
  else
    start_delayd "$d" "$port" "$sync"
  fi
  wait_up delayd "$port" 0 "$out" || true
  j0=$(cpu_ticks "$SERVER_PID")
  if [[ $mode == unary ]]; then
    tool $((CAP_SECONDS + 120)) "$out" "$BENCH" load --target "127.0.0.1:$port" \
      --topic single --jobs "$JOBS" --conns $CONNS --batch 1 \
      --max-seconds "$CAP_SECONDS" || true
  else
    tool $((CAP_SECONDS + 120)) "$out" "$BENCH" library \
      --target "127.0.0.1:$port" --topic single --jobs "$JOBS" \
      --threads "$threads" --linger-us "$linger" \
      --max-seconds "$CAP_SECONDS" || true
  fi
  j1=$(cpu_ticks "$SERVER_PID")
  end_single "$server" "$cfg" "$server $cfg" "$out" "$j0" "$j1" "$d"
}

# delayd_big: BIG_JOBS pending (sync=none, ScheduleBatch of 1000: how they
# got there does not change the memory they take), RSS, then a restart.
delayd_big() {
  local cfg="sync=none" d port out pid rss0 rss1 done_jobs
  mkdata delayd
  d=$D
  port=$(free_port)
  out=$d/out.json
  start_delayd "$d" "$port" none
  pid=$SERVER_PID
  wait_up delayd "$port" 0 "$out" || true
  rss0=$(rss_kb "$pid")
  tool 900 "$out" "$BENCH" load --target "127.0.0.1:$port" --topic big \
    --jobs "$BIG_JOBS" --conns $CONNS --batch 1000 --max-seconds "$BIG_CAP_SECONDS" || true
  raw "delayd big load" "$out"
  done_jobs=$(jget "$out" server_jobs)
  rec delayd "$cfg" big_load_rate "$(jget "$out" jobs_per_s)" jobs/s "$(step_note "$out" "$pid")"
  if [[ -n $done_jobs && $done_jobs -gt 0 ]]; then
    sleep 1.5
    alive "$pid" || { stop_server "$pid"; return; }
    rss1=$(rss_kb "$pid")
    rec delayd "$cfg" big_rss_mib "$(calc "$rss1 / 1024")" MiB "$done_jobs jobs pending"
    rec delayd "$cfg" big_rss_per_job "$(calc "($rss1 - $rss0) * 1024 / $done_jobs")" B/job "$done_jobs jobs pending"
    kill9 "$pid"
    start_delayd "$d" "$port" none
    pid=$SERVER_PID
    if wait_up delayd "$port" "$done_jobs" "$out"; then
      rec delayd "$cfg" big_restart "$(since_t0 "$out" t_answer_ms)" s
      rec delayd "$cfg" big_rss_per_job_restart "$(calc "($(rss_kb "$pid") - $rss0) * 1024 / $done_jobs")" B/job
    fi
    raw "delayd big restart" "$out"
  fi
  stop_server "$pid"
  rm -rf "$d"
}

# burst_run SERVER FIG JOBS LEAD_MS [delayd-bench options]: lateness on a
# fresh SERVER: delayd (sync=always, the default) or floor (floor_server under
# jemalloc, as delayd links it: keeps the jobs in memory and delivers each at
# its time, with nothing stored: issue 19's transport floor for the herd,
# beside delayd in the same run; its dispatch is not built for lateness, so
# it is no floor for the lateness runs). The jobs are scheduled 100 per
# ScheduleBatch (the peers use 1 per round trip): how they were scheduled
# does not enter the lateness, and this leaves the lead idle, as for the
# peers. Besides the lateness it records the server's CPU from 0.7 s before
# the window can open (LEAD_MS after the start, or after the background load
# with --background, rounded up to the second by delayd-bench) to the end.
burst_run() {
  local server=$1 fig=$2 jobs=$3 lead_ms=$4 d port out cmd name cfg sampler
  shift 4
  mkdata "$server"
  d=$D
  port=$(free_port)
  out=$d/out.json
  if [[ $server == floor ]]; then
    name=floor cfg=floor_server
    start_floor "$d" "$port"
  else
    name=delayd cfg=sync=always
    start_delayd "$d" "$port" always
  fi
  wait_up delayd "$port" 0 "$out" || true
  cmd=burst
  [[ $fig == herd ]] && cmd=herd
  # With --background, the window's lead starts once the background load is
  # in (delayd-bench logs "background: N jobs in S s" to $LOG then).
  local log_lines=0 background=0
  [[ " $* " == *" --background "* ]] && background=1
  log_lines=$(wc -l <"$LOG")
  (
    if ((background)); then
      until tail -n +"$((log_lines + 1))" "$LOG" | grep -q '^background: '; do sleep 0.05; done
    fi
    sleep "$(calc "($lead_ms - 700) / 1000")"
    cpu_ticks "$SERVER_PID" >"$d/ticks0"
  ) 2>/dev/null &
  sampler=$!
  tool 600 "$out" "$BENCH" "$cmd" --target "127.0.0.1:$port" --topic "$fig" \
    --jobs "$jobs" --producers $CONNS --subscribers $CONSUMERS --lead-ms "$lead_ms" "$@" || true
  local ticks1
  ticks1=$(cpu_ticks "$SERVER_PID")
  # A run that ended before the window (a failure) has no delivery CPU.
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  raw "$name $fig $jobs" "$out"
  rec_burst "$name" "$cfg" "$fig" "$out"
  local dup early
  dup=$(jget "$out" duplicates) early=$(jget "$out" early)
  rec "$name" "$cfg" "${fig}_early" "$early" deliveries "must be 0"
  rec "$name" "$cfg" "${fig}_duplicates" "$dup" deliveries
  rec "$name" "$cfg" "${fig}_client_cpu" "$(jget "$out" client_cpu_s_receiving)" s
  if [[ -s $d/ticks0 && $ticks1 != null && $(cat "$d/ticks0") != null ]]; then
    rec "$name" "$cfg" "${fig}_server_cpu" "$(calc "($ticks1 - $(cat "$d/ticks0")) / $(getconf CLK_TCK)")" s
  fi
  stop_server "$SERVER_PID"
  rm -rf "$d"
}

# ------------------------------------------------------------ main

# All of it in a function, so that bash has read the whole script before it
# runs (editing a running script otherwise changes what it runs).
main() {

  setup
  build
  mkdir -p "$BUILD_DIR/compare"
  STAMP=$(date -u +%Y%m%d-%H%M%S)
  RAW=$BUILD_DIR/compare/raw-$STAMP.jsonl
  LOG=$BUILD_DIR/compare/log-$STAMP.txt
  COMMANDS=$BUILD_DIR/compare/commands-$STAMP.txt
  : >"$RAW"
  : >"$COMMANDS"
  REP=0
  log "raw results: $RAW; client stderr: $LOG"
  LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
  FSYNC_PROBE=$("$DQ" fsync-probe --dir "$DATA_ROOT" --n 2000)

  for ((REP = 1; REP <= REPS; REP++)); do
    log "===== repetition $REP/$REPS"
    # Throughput, memory and restart, interleaved by system as bench.py does.
    for cfg in always everysec; do
      if want redis tput || want redis mem; then log "redis $cfg: batched load / memory / restart"; peer_cycle redis "aof $cfg" "$cfg"; fi
      if want redis tput || want redis single; then log "redis $cfg: 1 per round trip"; peer_single redis "aof $cfg" "$cfg"; fi
    done
    for f in -f0 ""; do  # beanstalkd's default is -f50
      cfg="binlog ${f:--f50 (default)}"
      if want bean tput || want bean mem; then log "beanstalkd $cfg: batched load / memory / restart"; peer_cycle bean "$cfg" "$f"; fi
      if want bean tput || want bean single; then log "beanstalkd $cfg: 1 per round trip"; peer_single bean "$cfg" "$f"; fi
    done
    for sync in always none; do
      if want delayd tput || want delayd mem; then log "delayd --sync=$sync: batched load / memory / restart"; delayd_cycle "$sync"; fi
      if want delayd tput || want delayd single; then log "delayd --sync=$sync: 1 per round trip"; delayd_single "$sync"; fi
    done
    if want delayd single; then
      # Issue 18: the transport floor, and the client library on both.
      log "floor_server: 1 per round trip, library x8, library x64 linger"
      single_run floor "unary" "" unary "$CONNS" 0
      single_run floor "library x8" "" library 8 0
      single_run floor "library x64, linger ${LINGER_US} us" "" library 64 "$LINGER_US"
      for sync in none always; do
        log "delayd --sync=$sync: library x8"
        single_run delayd "library x8, sync=$sync" "$sync" library 8 0
      done
      log "delayd --sync=always: library x64, linger"
      single_run delayd "library x64, linger ${LINGER_US} us, sync=always" always library 64 "$LINGER_US"
    fi
    if ((BIG_JOBS > 0)) && want delayd big; then log "delayd: $BIG_JOBS pending"; delayd_big; fi
    # Lateness.
    if want redis late; then log "redis burst $BURST_JOBS"; peer_burst redis "$BURST_JOBS" late200; fi
    if want bean late; then log "beanstalkd burst $BURST_JOBS"; peer_burst bean "$BURST_JOBS" late200; fi
    if want delayd late; then log "delayd burst $BURST_JOBS"; burst_run delayd late200 "$BURST_JOBS" 10000 --batch 100; fi
    if ((LIGHT_JOBS > 0)); then
      if want redis late; then log "redis burst $LIGHT_JOBS"; peer_burst redis "$LIGHT_JOBS" late20; fi
      if want bean late; then log "beanstalkd burst $LIGHT_JOBS"; peer_burst bean "$LIGHT_JOBS" late20; fi
      if want delayd late; then log "delayd burst $LIGHT_JOBS"; burst_run delayd late20 "$LIGHT_JOBS" 10000 --batch 100; fi
    fi
    if ((BACKGROUND_JOBS > 0)) && want delayd late; then
      log "delayd burst $BURST_JOBS with $BACKGROUND_JOBS more pending"
      burst_run delayd late1m "$BURST_JOBS" 10000 --batch 100 --background "$BACKGROUND_JOBS"
    fi
    if ((HERD_JOBS > 0)) && want delayd herd; then
      log "delayd herd $HERD_JOBS"
      burst_run delayd herd "$HERD_JOBS" $((10000 + HERD_JOBS / 50)) --batch 1000
      log "floor_server herd $HERD_JOBS"
      burst_run floor herd "$HERD_JOBS" $((10000 + HERD_JOBS / 50)) --batch 1000
    fi
  done

  T_END=$(date +%s)
  {
    printf '{"env": {'
    printf '"date": "%s", ' "$(date -u '+%Y-%m-%d %H:%M UTC')"
    printf '"minutes": %s, ' "$(calc "($T_END - $T_START) / 60")"
    printf '"nproc": "%s", ' "$(nproc)"
    printf '"cpu": "%s", ' "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    printf '"memory": "%s", ' "$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
    printf '"kernel": "%s", ' "$(uname -sr)"
    printf '"os": "%s", ' "$(. /etc/os-release && echo "$PRETTY_NAME")"
    printf '"data_fs": "%s", ' "$(df -T "$DATA_ROOT" | tail -1 | awk '{print $1, $2}')"
    printf '"load_start": "%s", ' "$LOAD_START"
    printf '"load_end": "%s", ' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf '"redis": "%s", ' "$(redis-server --version | sed 's/Redis server v=/Redis /; s/ sha=.*//')"
    printf '"beanstalkd": "%s", ' "$(beanstalkd -v)"
    printf '"gxx": "%s", ' "$(g++ --version | head -1)"
    printf '"commit": "%s", ' "$(git -C "$REPO" log -1 --format='%h %s' | tr -d '"\\')"
    printf '"build": "%s", ' "$BUILD_TYPE"
    printf '"knobs": "REPS=%s JOBS=%s CAP_SECONDS=%s BURST_JOBS=%s LIGHT_JOBS=%s BACKGROUND_JOBS=%s HERD_JOBS=%s BIG_JOBS=%s BIG_CAP_SECONDS=%s LINGER_US=%s ONLY=%s", ' \
      "$REPS" "$JOBS" "$CAP_SECONDS" "$BURST_JOBS" "$LIGHT_JOBS" "$BACKGROUND_JOBS" "$HERD_JOBS" "$BIG_JOBS" "$BIG_CAP_SECONDS" "$LINGER_US" "$ONLY"
    printf '"fsync_probe": %s' "$FSYNC_PROBE"
    printf '}}\n'
  } >>"$RAW"
  if [[ $WRITE == 1 ]]; then
    $PY "$REPO/bench/delayd-bench/report.py" --raw "$RAW" --commands "$COMMANDS" \
      --jobs "$JOBS" --burst "$BURST_JOBS" --light "$LIGHT_JOBS" \
      --background "$BACKGROUND_JOBS" --herd "$HERD_JOBS" --big "$BIG_JOBS" \
      --cap "$CAP_SECONDS" --reps "$REPS" --write "$REPO/BENCHMARKS.md"
    log "wrote the table into $REPO/BENCHMARKS.md"
  else
    $PY "$REPO/bench/delayd-bench/report.py" --raw "$RAW" --commands "$COMMANDS" \
      --jobs "$JOBS" --burst "$BURST_JOBS" --light "$LIGHT_JOBS" \
      --background "$BACKGROUND_JOBS" --herd "$HERD_JOBS" --big "$BIG_JOBS" \
      --cap "$CAP_SECONDS" --reps "$REPS"
  fi
  log "done in $(calc "($(date +%s) - $T_START) / 60") min"
}

main "$@"
exit
