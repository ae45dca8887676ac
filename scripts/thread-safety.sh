#!/usr/bin/env bash
# Builds the server and the clients with clang and -Wthread-safety -Werror
# into BUILD_DIR (default build-clang/): clang checks the ABSL_GUARDED_BY and
# ABSL_*_LOCKS_* annotations, which GCC ignores. The binaries are built to be
# analysed, not run: -O0 without debug info keeps the build short.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir=${BUILD_DIR:-build-clang}
CC=clang CXX=clang++ cmake -S . -B "$build_dir" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DDELAYD_THREAD_SAFETY=ON -DDELAYD_WERROR=ON -DDELAYD_BUILD_TESTS=OFF \
  -DDELAYD_BUILD_BENCHMARKS=OFF -DDELAYD_JEMALLOC=OFF -DDELAYD_STAGE_CPU=ON \
  >/dev/null
cmake --build "$build_dir" -j2 --target \
  delayd delayd_client delayctl delayd_timer_testing delayd_storage_testing
