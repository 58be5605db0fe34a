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

# Unit tests must not depend on a Docker engine: on a fresh CI machine none runs
# yet, so hide any engine this machine has and every run sees the same thing.
# One worker per core (pytest-xdist): the suite is CPU-bound, and CI has 2 cores.
unit_tests=(env DOCKER_HOST=unix:///nonexistent/docker.sock pytest tests/unit -q -n auto)

if [[ $what == unit ]]; then
  echo "== unit tests and linters"
  exec "${unit_tests[@]}"
fi

scripts/start-docker.sh
# The unit tests run beside the integration tests, niced, as the molecule runs
# do (tests/support/molecule_runs.py): the integration tests leave the cores
# partly idle, and the unit tests (several core-minutes) fill that instead of
# running first. Nice 5, above the molecule runs' 10: they are over in
# minutes, and their socket timeouts must not starve. Their output waits in
# a log and is printed at the end.
mkdir -p .deepops
unit_log=.deepops/unit-tests.log
echo "== unit tests and linters: started beside the integration tests (log: $unit_log)"
(
  rc=0
  nice -n 5 "${unit_tests[@]}" </dev/null >"$unit_log" 2>&1 || rc=$?
  echo "== unit tests and linters finished: exit $rc"
  exit "$rc"
) &
unit_pid=$!

echo "== integration tests (virtual cluster)"
# --durations: the slowest tests, for the CI time breakdown.
integration_rc=0
DEEPOPS_REQUIRE_INTEGRATION=1 pytest tests/integration -v -x --durations=25 || integration_rc=$?

unit_rc=0
wait "$unit_pid" || unit_rc=$?
echo "== unit tests and linters (exit $unit_rc)"
cat "$unit_log"
echo "== unit tests: exit $unit_rc; integration tests: exit $integration_rc"
((unit_rc == 0 && integration_rc == 0))
