"""Molecule scenarios: each role converges, is idempotent and verifies in a
systemd container built from the virtual cluster's node image.

The runs start in the background when the suite starts, at a low CPU
priority, and this module (ordered last, conftest.py) waits for each:
tests/support/molecule_runs.py says how and why.
"""

from __future__ import annotations

import sys

import pytest
from molecule_runs import MOLECULE_RUNS, RUNS, command_line


@pytest.fixture(scope="module")
def scenario_runs(request):
    runs = request.config.stash.get(MOLECULE_RUNS, None)
    if runs is None:
        pytest.skip("no Docker engine: molecule needs one (scripts/start-docker.sh)")
    return runs


@pytest.mark.parametrize("run", list(RUNS))
def test_molecule_scenario(scenario_runs, run):
    returncode = scenario_runs.futures[run].result()
    output = scenario_runs.log(run).read_text(errors="replace")
    sys.stderr.write(output[-3000:])
    assert returncode == 0, f"{command_line(run)} failed (whole log: {scenario_runs.log(run)})\n" + output[-12000:]
