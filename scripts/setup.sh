#!/usr/bin/env bash
# Installs the Debian packages txbatch, its tests and CI need. Idempotent: when everything is
# present it prints nothing and returns in well under a second.
set -euo pipefail

packages=(
  build-essential g++ pkg-config meson ninja-build
  libdpdk-dev dpdk dpdk-dev
  libboost-dev libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libpcap-dev
  libibverbs-dev
  iproute2 procps ethtool iputils-ping iperf3
  libxml2-utils python3 python3-matplotlib help2man man-db jq tshark
  clang libclang-rt-14-dev
  qemu-system-x86 ipxe-qemu busybox-static cpio rdma-core ibverbs-providers ibverbs-utils
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "setup: missing packages (${missing[*]}); run as root or install them with apt-get." >&2
  exit 2
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
