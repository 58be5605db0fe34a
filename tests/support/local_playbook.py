"""Run a small playbook on this machine with the repository's ansible.cfg and
read its tasks' results from the json callback, for unit tests that check a
role's tasks or a plugin against Ansible itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_local_playbook(playbook: Path, env: dict[str, str] | None = None) -> list[dict]:
    """Runs PLAYBOOK against localhost; every task's json record, in order. Fails on a non-zero exit.
    ENV adds to (or overrides) the environment."""
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
           **(env or {})}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(playbook),
         "-e", f"ansible_python_interpreter={sys.executable}"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [task for play in json.loads(proc.stdout)["plays"] for task in play["tasks"]]
