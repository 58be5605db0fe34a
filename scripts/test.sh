#!/usr/bin/env bash
# README command 2 (and CI's): set up, then run every test, integration included.
#   scripts/test.sh            everything
#   scripts/test.sh unit       unit tests and linters only (no Docker)
# Integration tests never skip here: a missing Docker engine is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}

scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== unit tests and linters"
# Unit tests must not depend on a Docker engine: on a fresh CI machine none runs
# yet, so hide any engine this machine has and every run sees the same thing.
# One worker per core (pytest-xdist): the suite is CPU-bound, and CI has 2 cores.
DOCKER_HOST=unix:///nonexistent/docker.sock pytest tests/unit -q -n auto

if [[ $what == unit ]]; then
  exit 0
fi

scripts/start-docker.sh
echo "== integration tests (virtual cluster)"
# --durations: the slowest tests, for the CI time breakdown.
DEEPOPS_REQUIRE_INTEGRATION=1 pytest tests/integration -v -x --durations=25
