# Sourced by run.sh and long_run.sh: what one libFuzzer run in WORK left.
# fuzz_summary WORK sets runs, speed and rss (peak MB) from the final stats
# in WORK/log, corpus (files in WORK/corpus) and the array artifacts (the
# crash-, leak-, timeout- and oom- inputs libFuzzer wrote into WORK,
# sorted).
fuzz_summary() {
  local work=$1
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$work/log")
  corpus=$(find "$work/corpus" -type f | wc -l)
  mapfile -t artifacts < <(find "$work" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
       -o -name 'oom-*' \) | sort)
}
