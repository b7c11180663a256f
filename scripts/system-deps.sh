#!/usr/bin/env bash
# Debian packages the test suite runs for real (part of `make setup`; a no-op when they are present):
#   postgresql            initdb/pg_ctl: the tests start their own PostgreSQL server in a temp dir
#   chromium, chromium-driver  headless browser for the Airflow UI test (Playwright drives /usr/bin/chromium)
#   prometheus            a real Prometheus server scrapes `housekeeping serve-metrics` in tests/e2e/test_prometheus.py
# Java 17 is checked by the Makefile (Spark needs it; installing a JDK is left to the machine's owner).
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/bin/chromedriver ] || missing+=(chromium-driver)
command -v prometheus >/dev/null || missing+=(prometheus)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "system packages missing: ${missing[*]} (installing from Debian)"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "cannot install them without root: run  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
ls /usr/lib/postgresql/*/bin/initdb >/dev/null
[ -x /usr/bin/chromium ]
command -v prometheus >/dev/null
echo "installed: ${missing[*]}"
