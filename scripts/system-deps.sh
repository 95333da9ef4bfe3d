#!/usr/bin/env bash
# Installs the system packages lakesdk's demo and tests need, when they are missing.
# Debian/Ubuntu with root (or passwordless sudo); elsewhere it only reports what is missing.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
# ZooKeeper server jars for the ZooKeeper lock provider tests (tests/concurrency/test_locks_zookeeper.py).
[[ -f /usr/share/java/zookeeper.jar ]] || need+=(zookeeper)
# The test suite's own system needs (a browser, ZooKeeper, ...) are added here as tests use them.
command -v chromium >/dev/null 2>&1 || need+=(chromium)   # tests/widgets/test_browser_timeline.py (Playwright drives it)
[[ ${#need[@]} -eq 0 ]] && exit 0
SUDO=""
[[ $(id -u) -ne 0 ]] && command -v sudo >/dev/null 2>&1 && SUDO="sudo -n"
if command -v apt-get >/dev/null 2>&1 && { [[ $(id -u) -eq 0 ]] || [[ -n $SUDO ]]; }; then
  echo "Installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "Missing system packages: ${need[*]} (install them with your package manager; Java 17 is required by Spark, zookeeper by the ZooKeeper lock tests)" >&2
  exit 1
fi
