"""The slurm role's _slurm_version, from what each kind of host reads: slurmctld -V
on a controller (host_reads), the package's version on a login node, nothing
before Slurm is installed. It picks sackd for login nodes from 23.11 and
CgroupPlugin=disabled, so a wrong parse quietly changes Debian 13 clusters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("registered", "version", "sackd"), [
    ({"__slurm_controller_reads": {"commands": {"version": {"rc": 0, "stdout": "slurm 24.11.5"}}}}, "24.11.5", True),
    ({"__slurm_controller_reads": {"commands": {"version": {"rc": 0, "stdout": "slurm-wlm 22.05.8"}}}}, "22.05.8", False),
    ({"__slurm_version": {"stdout": "24.11.5-4+deb13u1"}}, "24.11.5", True),
    ({"__slurm_controller_reads": {"commands": {"version": {"rc": 127, "stdout": ""}}}}, "0", False),
    ({}, "0", False),
], ids=["controller 24.11", "controller 22.05", "login node package", "not installed", "nothing read"])
def test_the_version_comes_from_what_the_host_read(tmp_path: Path, registered: dict, version: str, sackd: bool) -> None:
    play = [{
        "hosts": "localhost", "gather_facts": False,
        "vars_files": [str(REPO / "roles" / "slurm" / "vars" / "main.yml")],
        "vars": registered,
        "tasks": [{"name": "version", "ansible.builtin.debug": {
            "msg": "{{ {'version': _slurm_version, 'sackd': _slurm_version is version('23.11', '>=')} }}"}}],
    }]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(playbook)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert result == {"version": version, "sackd": sackd}
