#!/usr/bin/env bash
# Installs everything delayd needs to build, test and benchmark, from Debian 12
# packages. Idempotent: quiet and quick when all is present. Uses sudo when
# not root.
set -euo pipefail

packages=(
  # build
  cmake make g++ pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev librocksdb-dev prometheus-cpp-dev libjemalloc-dev
  libcivetweb-dev  # the HTTP server (also brought by prometheus-cpp-dev)
  libssl-dev  # SHA-256 of bearer tokens (OpenSSL's libcrypto, which gRPC already uses)
  # run: the IANA time zones of cron schedules (Abseil reads the system's)
  tzdata
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev clang-format
  openssl  # test certificates
  clang  # scripts/thread-safety.sh
  libclang-rt-14-dev  # libFuzzer and clang's sanitizer runtimes (tests/fuzz)
  python3 python3-grpcio python3-protobuf
  # the web console's browser test: headless Chromium driven by Selenium
  chromium chromium-driver python3-selenium fonts-liberation
  # deploy checks: promtool, systemd-analyze
  prometheus systemd
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
