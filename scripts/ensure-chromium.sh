#!/usr/bin/env bash
# Make sure /usr/bin/chromium exists for the browser tests (tests/test_web.py).
# Installs Debian's `chromium` package when it is missing and apt-get is available.
# Idempotent and quiet: prints nothing when Chromium is already there.
# When it cannot install, it warns and exits 0 (the web tests then skip) - except under
# CI (CI set), where a missing browser is an error.
set -euo pipefail
CHROMIUM=/usr/bin/chromium

have_cjk_font() {
  command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh 2>/dev/null | head -n 1)" ]
}

# Chromium present: only a Chinese font may be missing. Best effort - without one the
# tests still pass, but their screenshots (build/web-screenshots) show boxes for Chinese.
if [ -x "$CHROMIUM" ]; then
  if ! have_cjk_font && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 fonts-wqy-microhei >/dev/null 2>&1 ||
      echo "ensure-chromium: could not install fonts-wqy-microhei; screenshots will lack Chinese glyphs" >&2
  fi
  exit 0
fi

give_up() {
  if [ -n "${CI:-}" ]; then
    echo "ensure-chromium: $1 (CI is set: the browser tests must run)" >&2
    exit 1
  fi
  echo "ensure-chromium: $1; tests/test_web.py will be skipped" >&2
  exit 0
}

command -v apt-get >/dev/null 2>&1 || give_up "$CHROMIUM is missing and apt-get is not available"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    give_up "$CHROMIUM is missing; install it as root: apt-get install -y chromium"
  fi
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
install() {
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q -o Dpkg::Use-Pty=0 chromium fonts-wqy-microhei >>"$log" 2>&1
}
echo "ensure-chromium: installing Debian's chromium package and a Chinese font (once) ..." >&2
# a stale package index is the usual reason the first try fails
if ! install && ! { "${SUDO[@]}" apt-get update -q >>"$log" 2>&1 && install; }; then
  tail -n 20 "$log" >&2
  give_up "apt-get install chromium failed"
fi
[ -x "$CHROMIUM" ] || give_up "the chromium package did not provide $CHROMIUM"
