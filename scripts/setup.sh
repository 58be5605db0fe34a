#!/usr/bin/env bash
# Idempotent set-up: system packages (when root on Debian/Ubuntu) and .venv/
# with deepops and its test tools. Safe to re-run; does nothing already done.
#   scripts/setup.sh            runtime + test tools
#   DEEPOPS_SETUP_SYSTEM=0 ...  skip apt (no root, or packages already there)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

system_packages=(docker.io debootstrap openssh-client python3-venv rsync prometheus prometheus-alertmanager chromium)

if [[ "${DEEPOPS_SETUP_SYSTEM:-1}" == 1 && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  missing=()
  for pkg in "${system_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  log "creating .venv"
  "$python" -m venv .venv
fi

# Reinstall only when the dependency list changed.
stamp=.venv/.deepops-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -x .venv/bin/deepops || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  log "installing deepops and test tools into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test]'
  echo "$want" >"$stamp"
fi
log "ready: .venv/bin/deepops $(.venv/bin/deepops --version | awk '{print $NF}')"
