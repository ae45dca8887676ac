#!/usr/bin/env bash
# Set-up, then configure and build delayd into BUILD_DIR (default build/),
# warnings as errors (DELAYD_WERROR). Extra arguments go to cmake's configure
# step.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDELAYD_WERROR=ON "$@" >/dev/null
cmake --build "$build_dir" -j2
