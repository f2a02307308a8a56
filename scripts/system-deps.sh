#!/usr/bin/env bash
# System packages the real-client tests need (Neovim; later Chromium/code-server). Installs only
# what is missing, and only where apt-get can run as root; otherwise those tests skip themselves
# with a message naming the missing tool.
set -uo pipefail
need=()
command -v nvim >/dev/null 2>&1 || need+=(neovim)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${need[*]}" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null 2>&1 \
    || echo "warning: could not install ${need[*]}; tests that need them will skip" >&2
else
  echo "note: missing ${need[*]} (not root); tests that need them will skip" >&2
fi
exit 0
