"""The check-mode-safe apt install lives in one role (roles/apt_packages) that
the roles installing distribution packages import, instead of each keeping
its own copy of the dpkg query, the install and the check-mode report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CALLERS = {"common": "tasks/packages.yml", "munge": "tasks/install.yml", "slurm": "tasks/common.yml"}


def _imports_of_apt_packages(path: Path) -> list[dict]:
    tasks = yaml.safe_load(path.read_text()) or []
    return [task for task in tasks if (task.get("ansible.builtin.import_role") or {}).get("name") == "apt_packages"]


@pytest.mark.parametrize(("role", "tasks_file"), sorted(CALLERS.items()))
def test_callers_import_the_role_with_their_packages(role, tasks_file):
    [task] = _imports_of_apt_packages(REPO / "roles" / role / tasks_file)
    assert set(task["vars"]) <= {"apt_packages_names", "apt_packages_cache_valid_time", "apt_packages_label"}
    assert f"_{role}_packages" in task["vars"]["apt_packages_names"]


def test_the_idiom_is_written_once():
    """The dpkg query with python3-apt (what makes check mode work on a fresh host) is only in apt_packages."""
    holders = sorted(
        path.relative_to(REPO).parts[1]
        for path in (REPO / "roles").glob("*/**/*.yml")
        if "dpkg-query" in path.read_text() and "python3-apt" in path.read_text()
    )
    assert set(holders) == {"apt_packages"}


def test_role_inputs_and_allow_duplicates():
    role = REPO / "roles" / "apt_packages"
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
    assert meta["allow_duplicates"] is True  # one import per package set, several in a play
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert options["apt_packages_names"]["type"] == "list" and options["apt_packages_names"]["elements"] == "str"
    tasks = (role / "tasks" / "main.yml").read_text()
    assert "check_mode: false" in tasks and "apt_packages_pending" in tasks
