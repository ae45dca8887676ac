#!/usr/bin/env bash
# Set-up, build, then run delayd in the foreground on its defaults: RocksDB
# under ./data, gRPC on 127.0.0.1:7400, metrics on 127.0.0.1:9400. Arguments
# are passed to delayd (see `delayd --help`). Ctrl-C stops it cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
exec ./build/server/delayd "$@"
