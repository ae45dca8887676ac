#!/usr/bin/env bash
# The long fuzz run: each TARGET until it has used CPU_SECONDS of CPU
# (default 3600), measured from /proc, not the wall clock, so that a run
# sharing the machine with builds still fuzzes its full hour. The target
# runs at the lowest priority (nice 19) and is stopped gracefully (SIGUSR1,
# libFuzzer's -handle_usr1) when its CPU time is reached; libFuzzer then
# prints its final stats.
#
# Like run.sh it starts from a scratch copy of the seeds and never writes to
# corpus/. What each run grew stays in build-fuzz/long/<target>/corpus. One
# line per target goes to stdout and to build-fuzz/long/results.txt: CPU
# and wall seconds, runs, executions per second, corpus before and after,
# result. Exits 1 when a target found a crash, leak, timeout or
# out-of-memory. Builds nothing: run tests/fuzz/run.sh 1 first.
#
# Never pause a run (kill -STOP) to quiet the machine, e.g. for a benchmark:
# libFuzzer's -timeout is wall-clock time, so a pause of over 10 s reports
# the input under way as a timeout (a false finding; it reruns in
# milliseconds). At nice 19 a run yields the cores to anything else anyway.
# Nor edit this file in place while it runs: bash reads a script as it goes,
# so the running copy would go on from its old offset in the new text. Run
# it from a worktree of its own, or replace the file (mv), never overwrite.
#
# RSS_LIMIT_MB (default 2048) is libFuzzer's -rss_limit_mb, the whole
# process's resident size; a single allocation stays capped at 2048 MB
# (-malloc_limit_mb) whatever it is. ASan's own bookkeeping can grow a
# process without a leak: request_parser_fuzz grew about 100 MB a CPU
# minute with ASan's allocation stacks on (it would have passed 4 GB in
# its hour), and stayed flat at 480 MB with ASAN_OPTIONS=
# malloc_context_size=0 over the same 600,000 inputs. Such a target runs
# with that option: errors are still detected and the input kept; only the
# allocation and free stacks are missing from a report (rerun the input
# without the option to see them).
#
# usage: [ASAN_OPTIONS=...] [RSS_LIMIT_MB=N] tests/fuzz/long_run.sh CPU_SECONDS TARGET...
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/fuzz/summary.sh
source tests/fuzz/summary.sh

if [[ $# -lt 2 || ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 CPU_SECONDS TARGET..." >&2
  exit 2
fi
cpu_seconds=$1
shift
build_dir=${BUILD_DIR:-build-fuzz}
ticks=$(getconf CLK_TCK)
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# utime + stime of process $1, in seconds; empty once it is gone.
cpu_of() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  # Fields after the ")" that closes the command name: utime is the 12th,
  # stime the 13th.
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  echo $(((f[11] + f[12]) / ticks))
}

failed=0
for target in "$@"; do
  name=${target%_fuzz}
  binary="$build_dir/$target"
  [[ -x $binary ]] || { echo "$binary: not built (tests/fuzz/run.sh 1 $target)" >&2; exit 2; }
  work="$build_dir/long/$target"
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp -R "tests/fuzz/corpus/$name/." "$work/corpus/"
  seeds=$(find "$work/corpus" -type f | wc -l)
  start=$SECONDS
  nice -n 19 "$binary" "$work/corpus" -max_total_time=0 -timeout=10 \
    -rss_limit_mb="${RSS_LIMIT_MB:-2048}" -malloc_limit_mb=2048 \
    -print_final_stats=1 -close_fd_mask=2 \
    -artifact_prefix="$work/" </dev/null >"$work/log" 2>&1 &
  pid=$!
  used=0
  while kill -0 "$pid" 2>/dev/null; do
    now=$(cpu_of "$pid")
    [[ -n $now ]] && used=$now
    if ((used >= cpu_seconds)); then
      kill -USR1 "$pid" 2>/dev/null || true
      break
    fi
    sleep 5
  done
  rc=0
  wait "$pid" || rc=$?
  wall=$((SECONDS - start))
  fuzz_summary "$work"
  if [[ $rc -eq 0 && ${#artifacts[@]} -eq 0 && $used -ge $cpu_seconds ]]; then
    result=ok
  elif [[ $rc -eq 0 && ${#artifacts[@]} -eq 0 ]]; then
    # Stopped from outside (SIGUSR1) before its CPU time: nothing found,
    # and not a full run either.
    result="stopped early, nothing found"
    failed=1
  else
    result="FAILED (exit $rc)"
    failed=1
  fi
  line=$(printf '%s %-20s cpu=%ss wall=%ss runs=%s exec/s=%s rss=%sMB corpus=%s->%s %s' \
    "$(date -u +%FT%TZ)" "$target" "$used" "$wall" "${runs:-?}" \
    "${speed:-?}" "${rss:-?}" "$seeds" "$corpus" "$result")
  echo "$line" | tee -a "$build_dir/long/results.txt"
  for a in "${artifacts[@]}"; do
    echo "  input: $a  (reproduce: $binary $a)"
  done
done
exit $failed
