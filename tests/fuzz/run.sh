#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz/, clang + libFuzzer + ASan + UBSan)
# into BUILD_DIR (default build-fuzz/) and runs each for SECONDS (default
# 30) on a scratch copy of its seed corpus, FUZZ_JOBS of them at a time
# (default: one per core; each target is one process on one core). Prints
# one line per target, in the order given: runs, executions per second,
# result. Exits 1 when a target found a crash, leak, timeout or
# out-of-memory, naming the input that shows it. The seeds in
# tests/fuzz/corpus/ are never written to.
#
# usage: tests/fuzz/run.sh [SECONDS] [TARGET...]   (e.g. run.sh 3600 cron_fuzz)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/fuzz/summary.sh
source tests/fuzz/summary.sh
./scripts/setup.sh

seconds=${1:-30}
if [[ ! $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS] [TARGET...]" >&2
  exit 2
fi
shift $(($# > 0 ? 1 : 0))
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(request_parser_fuzz job_record_fuzz ack_token_fuzz page_token_fuzz
           config_fuzz auth_file_fuzz cron_fuzz)
fi
build_dir=${BUILD_DIR:-build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc)}
if [[ ! $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "$0: FUZZ_JOBS must be a positive number" >&2
  exit 2
fi

start=$SECONDS
CC=clang CXX=clang++ cmake -S tests/fuzz -B "$build_dir" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j2 --target "${targets[@]}"
echo "== $build_dir built in $((SECONDS - start)) s; ${seconds} s per target, $jobs at a time"

# Every UBSan report is fatal (-fno-sanitize-recover), with its stack.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Runs one target on a scratch copy of its seeds; its exit code goes to
# WORK/rc.
fuzz_one() {
  local target=$1 name=${1%_fuzz} work="$build_dir/run/$1" rc=0
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp -R "tests/fuzz/corpus/$name/." "$work/corpus/"
  find "$work/corpus" -type f | wc -l >"$work/seeds"
  # -close_fd_mask=2: the code under test logs per input (protobuf's UTF-8
  # complaint, config's ignored variables); libFuzzer's and the sanitizers'
  # reports still reach the log. stdin is /dev/null: nothing under test
  # may wait on it.
  "$build_dir/$target" "$work/corpus" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -close_fd_mask=2 \
    -artifact_prefix="$work/" </dev/null >"$work/log" 2>&1 || rc=$?
  echo "$rc" >"$work/rc"
}

running=0
for target in "${targets[@]}"; do
  if ((running == jobs)); then
    wait -n || true  # a failed run is reported below, from its files
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
wait || true

failed=0
for target in "${targets[@]}"; do
  work="$build_dir/run/$target"
  rc=$(cat "$work/rc" 2>/dev/null || echo "?")
  seeds=$(cat "$work/seeds" 2>/dev/null || echo "?")
  fuzz_summary "$work"
  if [[ $rc == 0 && ${#artifacts[@]} -eq 0 ]]; then
    result=ok
  else
    result="FAILED (exit $rc)"
    failed=1
  fi
  printf '%-20s runs=%-10s exec/s=%-7s corpus=%s->%s  %s\n' "$target" \
    "${runs:-?}" "${speed:-?}" "$seeds" "$corpus" "$result"
  if [[ $result != ok ]]; then
    for a in "${artifacts[@]}"; do
      echo "  input: $a  (reproduce: $build_dir/$target $a)"
    done
    echo "  log: $work/log"
    grep -E '^(==[0-9]+== ?ERROR|SUMMARY|.*(runtime error|FUZZ_CHECK failed))' "$work/log" |
      head -5 | sed 's/^/  /'
  fi
done
exit $failed
