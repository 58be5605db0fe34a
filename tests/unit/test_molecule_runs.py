"""The background molecule runs of the integration suite (tests/support/molecule_runs.py)."""

from __future__ import annotations

import molecule_runs


def test_every_release_of_a_scenario_is_its_own_run_and_the_quick_one_starts_last():
    assert {"cluster", "default", "nvidia-debian12", "nvidia-debian13"} <= set(molecule_runs.RUNS)
    assert molecule_runs.RUNS["nvidia-debian13"] == ("nvidia", {"DEEPOPS_NVIDIA_RELEASE": "debian13"})
    assert molecule_runs.START_ORDER[-1] == "default"
    assert molecule_runs.command_line("nvidia-debian12") == "DEEPOPS_NVIDIA_RELEASE=debian12 molecule test -s nvidia"


def test_only_the_runs_containers_are_made_light():
    light = molecule_runs._is_molecule_container
    assert light("molecule ")  # the molecule docker driver's label owner=molecule
    assert light(f" {molecule_runs.CLUSTER_NAME}")  # the cluster scenario's virtual cluster
    assert not light(" deepops")  # the suite's own cluster, or a user's
    assert not light(" ")
