#!/usr/bin/env bash
# Make sure a Docker engine answers. Installs docker.io when root on Debian and
# starts dockerd when nothing else will (no systemd as PID 1 on CI machines).
# Exits non-zero, loudly, when no engine can be had: integration tests must
# fail then, never be skipped.
set -euo pipefail

log() { printf '[docker] %s\n' "$*" >&2; }

docker info >/dev/null 2>&1 && exit 0

if ! command -v dockerd >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    log "installing docker.io"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  else
    log "FATAL: no Docker engine (dockerd) here, and not root on Debian to install docker.io"
    exit 1
  fi
fi

if [[ -d /run/systemd/system ]]; then
  log "starting docker through systemd"
  systemctl start docker || true
else
  log "starting dockerd (no systemd here); log in /var/log/dockerd.log"
  setsid dockerd >/var/log/dockerd.log 2>&1 < /dev/null &
fi

for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then
    log "engine ready: $(docker version --format '{{.Server.Version}}')"
    exit 0
  fi
  sleep 1
done
log "FATAL: the Docker engine did not answer within 60 s; last lines of its log:"
tail -n 20 /var/log/dockerd.log >&2 2>/dev/null || true
exit 1
