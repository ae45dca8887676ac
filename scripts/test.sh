#!/usr/bin/env bash
# Set-up, build, then run every test with ctest. Extra arguments go to ctest
# (e.g. -R Timer). BUILD_DIR and CMAKE_ARGS select another build, e.g. the
# sanitizer one of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086
./scripts/build.sh ${CMAKE_ARGS:-}
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j2 "$@"
