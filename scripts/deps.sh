#!/usr/bin/env bash
# Installs what building and testing widetp needs on a fresh Debian machine: libzmq5 (loaded at run
# time by internal/zmq), gcc (cgo), Debian's python3-zmq (the lookup wire-format tests talk to
# the Go server with pyzmq, the library vLLM itself uses), python3-packaging (the vllm planner
# imports vLLM, which needs `packaging`; the probe takes it from Debian's dist-packages when the
# interpreter lacks it) and Debian's chromium (the HTML report's browser tests and benchmark open it
# headless), and nftables (partitions between hosts). Idempotent: does nothing when all is there.
set -euo pipefail
need=()
# libzmq is loaded at run time (internal/zmq dlopens libzmq.so.5): the package, not its headers.
/sbin/ldconfig -p 2>/dev/null | grep -q 'libzmq\.so\.5 ' || need+=(libzmq5)
/usr/bin/python3 -c 'import zmq' 2>/dev/null || need+=(python3-zmq)
[ -d /usr/lib/python3/dist-packages/packaging ] || need+=(python3-packaging)
command -v gcc >/dev/null || need+=(gcc)
# nft: the fault timeline's partitions between hosts (internal/runtimes/netcut).
command -v nft >/dev/null || need+=(nftables)
# Chromium is wanted, not needed: where it cannot be installed, the browser specs skip and say why.
want=()
command -v chromium >/dev/null || want+=(chromium)
if [ ${#need[@]} -eq 0 ] && [ ${#want[@]} -eq 0 ]; then
  exit 0
fi
if [ ${#need[@]} -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
  echo "widetp: no chromium (sudo apt-get install chromium): the HTML report's browser tests will skip" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "widetp needs these Debian packages: ${need[*]} (run as root, or: sudo apt-get install ${need[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ${#want[@]} -gt 0 ]; then
  echo "installing ${want[*]}" >&2
  apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null ||
    echo "widetp: could not install ${want[*]}: the HTML report's browser tests will skip" >&2
fi
