#!/usr/bin/env bash
# README command 1: set up, bring up the virtual cluster, check it, deploy it,
# then validate it (GPU jobs, accounting, preemption).
#   scripts/virtual-deploy.sh [deepops virtual up options...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/start-docker.sh
.venv/bin/deepops virtual up "$@"
.venv/bin/deepops check
.venv/bin/deepops deploy
.venv/bin/deepops validate
