#!/usr/bin/env bash
# What the VS Code real-client test (tests/test_vscode_client.py) needs besides Node/npm:
#   * Debian's chromium (driven headless by playwright-core) and the headers/tools code-server's
#     native modules build against (apt, only as root, only what is missing);
#   * code-server 4.100.3 (a real VS Code on Node 20; newer releases need Node 24), installed from
#     npm into a cache folder outside the repository.
# Idempotent: a stamp file skips the npm install when code-server is already there. Never fails
# hard: when something cannot be installed it says so on stderr and exits 0, and the test skips
# itself naming the missing piece. The last stdout line is `CODE_SERVER=<path to the binary>`
# (empty when it is not installed).
set -uo pipefail

version=4.100.3
cache=${COPY_AS_DECODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/copy-as-decode}
dest="$cache/code-server-$version"
bin="$dest/node_modules/.bin/code-server"

# --- system packages -------------------------------------------------------------------------
apt_pkgs=(chromium ripgrep libkrb5-dev libsecret-1-dev libx11-dev libxkbfile-dev build-essential pkg-config python3)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "vscode-deps: installing system packages: ${missing[*]}" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") >/dev/null 2>&1 \
      || echo "vscode-deps: warning: could not install ${missing[*]}" >&2
  else
    echo "vscode-deps: missing system packages ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  fi
fi

# --- code-server -----------------------------------------------------------------------------
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "vscode-deps: node/npm not found; install Node 20 (https://nodejs.org) to run the VS Code test" >&2
  echo "CODE_SERVER="
  exit 0
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" != 20 ]; then
  echo "vscode-deps: warning: code-server $version wants Node 20, found $(node --version)" >&2
fi

stamp="$dest/.installed"
if [ ! -x "$bin" ] || [ ! -f "$stamp" ]; then
  # @vscode/ripgrep's postinstall downloads rg from GitHub; hand it Debian's rg in the cache it
  # looks in first, so nothing outside the npm registry is fetched.
  rg_bin=$(command -v rg || true)
  if [ -n "$rg_bin" ]; then
    rg_cache="${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11"
    rg_tar="$rg_cache/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
    if [ ! -s "$rg_tar" ]; then
      mkdir -p "$rg_cache"
      tmp=$(mktemp -d)
      cp "$rg_bin" "$tmp/rg"
      tar -czf "$rg_tar" -C "$tmp" rg
      rm -rf "$tmp"
    fi
  else
    echo "vscode-deps: warning: ripgrep (rg) missing; code-server's install may try to download it" >&2
  fi
  echo "vscode-deps: installing code-server $version into $dest (about a minute)..." >&2
  mkdir -p "$dest"
  echo '{"name":"copy-as-decode-code-server","private":true}' > "$dest/package.json"
  # code-server's postinstall runs `npm install` in lib/vscode (native modules, built against
  # the local Node headers). As root it insists on unsafe-perm; npm >= 11.19 skips dependency
  # install scripts unless allowed. The nested installs inherit these variables; npm versions
  # that do not know one of them ignore it.
  if (cd "$dest" && npm_config_yes=true npm_config_unsafe_perm=true npm_config_dangerously_allow_all_scripts=true \
        npm install --no-audit --no-fund "code-server@$version") >"$dest/install.log" 2>&1 \
      && [ -x "$bin" ]; then
    echo "$version" > "$stamp"
  else
    echo "vscode-deps: warning: code-server install failed; see $dest/install.log" >&2
    tail -20 "$dest/install.log" >&2
    echo "CODE_SERVER="
    exit 0
  fi
fi
echo "CODE_SERVER=$bin"
exit 0
