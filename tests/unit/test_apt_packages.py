"""The check-mode-safe apt install lives in one role (roles/apt_packages) that
the roles installing distribution packages import, instead of each keeping
its own copy of the dpkg query, the install and the check-mode report."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from local_playbook import run_local_playbook

REPO = Path(__file__).resolve().parents[2]
CALLERS = {"common": "tasks/packages.yml", "munge": "tasks/install.yml", "slurm": "tasks/common.yml",
           "slurm_exporter": "tasks/install.yml"}


def _imports_of_apt_packages(path: Path) -> list[dict]:
    tasks = yaml.safe_load(path.read_text()) or []
    return [task for task in tasks if (task.get("ansible.builtin.import_role") or {}).get("name") == "apt_packages"]


@pytest.mark.parametrize(("role", "tasks_file"), sorted(CALLERS.items()))
def test_callers_import_the_role_with_their_packages(role, tasks_file):
    [task] = _imports_of_apt_packages(REPO / "roles" / role / tasks_file)
    assert f"_{role}_packages" in task["vars"]["apt_packages_names"]


def _every_import() -> list[tuple[str, dict]]:
    return [(str(path.relative_to(REPO)), task)
            for path in sorted((REPO / "roles").glob("*/tasks/*.yml"))
            for task in _imports_of_apt_packages(path)]


def test_every_import_passes_options_of_the_role_spec():
    """The imports skip Ansible's per-import argument check (a task each time,
    rolespec_validate: false), so this test checks what it would: only the
    spec's options, a package list, a label, literal values of the right type."""
    options = yaml.safe_load((REPO / "roles" / "apt_packages" / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"]["options"]
    types = {"list": list, "int": int, "bool": bool, "str": str}
    imports = _every_import()
    assert len(imports) >= 6
    for where, task in imports:
        assert task["ansible.builtin.import_role"].get("rolespec_validate") is False, where
        variables = task["vars"]
        assert set(variables) <= set(options), where
        if task["ansible.builtin.import_role"].get("tasks_from") == "refresh":
            # The lists only, before the caller's own apt call: no packages.
            assert set(variables) == {"apt_packages_label", "apt_packages_cache_valid_time"}, where
        else:
            assert "tasks_from" not in task["ansible.builtin.import_role"], where
            assert {"apt_packages_names", "apt_packages_label"} <= set(variables), where
        for name, value in variables.items():
            if isinstance(value, str) and "{{" in value:
                continue  # the caller's own variable, rendered at run time
            assert isinstance(value, types[options[name]["type"]]), (where, name, value)
            if options[name]["type"] == "list":
                assert all(isinstance(item, str) for item in value), (where, name)


def test_the_idiom_is_written_once():
    """The dpkg query with python3-apt (what makes check mode work on a fresh host) is only in apt_packages."""
    holders = sorted(
        path.relative_to(REPO).parts[1]
        for path in (REPO / "roles").glob("*/**/*.yml")
        if any(query in path.read_text() for query in ("dpkg-query", "dpkg_query_argv")) and "python3-apt" in path.read_text()
    )
    assert set(holders) == {"apt_packages"}


def test_no_role_refreshes_the_lists_through_apts_module():
    """apt's module refreshes with no time limit (refresh_lists.sh says why the
    lists are refreshed bounded): every role that installs through the module
    itself imports apt_packages' refresh first, and no apt call sets update_cache."""
    def apt_calls(node):
        if isinstance(node, dict):
            if isinstance(node.get("ansible.builtin.apt"), dict):
                yield node["ansible.builtin.apt"]
            for value in node.values():
                yield from apt_calls(value)
        elif isinstance(node, list):
            for item in node:
                yield from apt_calls(item)

    refreshing = sorted(str(path.relative_to(REPO)) for path in REPO.glob("roles/*/tasks/*.yml")
                        for call in apt_calls(yaml.safe_load(path.read_text())) if "update_cache" in call)
    assert refreshing == []
    importers = {where.split("/")[1] for where, task in _every_import()
                 if task["ansible.builtin.import_role"].get("tasks_from") == "refresh"}
    assert importers == {"alertmanager", "dcgm_exporter", "grafana", "node_exporter", "nvidia_driver", "prometheus"}


def test_the_lists_are_refreshed_once_per_host_and_run(tmp_path):
    """refresh.yml runs its script at the first import in a run that its caller
    does not skip; a later import with lists valid for an hour skips it, one
    after a repository change (0) runs it again, and a caller's skipped import
    in between (which registers a skip over the script's result) does not make
    the next one run it again."""
    stamp = tmp_path / "update-success-stamp"
    stamp.touch()  # fresh: the script reports so and calls no apt-get

    def refresh(label: str, valid: int, when: str = "true") -> str:
        return ("    - ansible.builtin.import_role: {name: apt_packages, tasks_from: refresh}\n"
                f"      vars: {{apt_packages_label: {label}, apt_packages_cache_valid_time: {valid},"
                f" _apt_packages_update_stamp: {stamp}}}\n"
                f"      when: {when}\n")

    results = _run_locally(tmp_path, _PLAY + refresh("caller skips first", 3600, when="false")
                           + refresh("first", 3600) + refresh("again", 3600)
                           + refresh("repository", 0) + refresh("caller skips", 3600, when="false")
                           + refresh("after a skip", 3600))
    ran = {label: "skipped" not in results[f"Apt packages | Refresh the package lists ({label})"]
           for label in ("caller skips first", "first", "again", "repository", "caller skips", "after a skip")}
    assert ran == {"caller skips first": False, "first": True, "again": False, "repository": True, "caller skips": False, "after a skip": False}
    assert results["Apt packages | Refresh the package lists (first)"]["stdout"].startswith("fresh")


def test_role_inputs_and_allow_duplicates():
    role = REPO / "roles" / "apt_packages"
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text())
    assert meta["allow_duplicates"] is True  # one import per package set, several in a play
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert options["apt_packages_names"]["type"] == "list" and options["apt_packages_names"]["elements"] == "str"
    tasks = (role / "tasks" / "converge.yml").read_text()
    assert "check_mode: false" in tasks and "apt_packages_pending" in tasks


_PLAY = "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"


def _import(names: list[str], label: str) -> str:
    return ("    - ansible.builtin.import_role: {name: apt_packages}\n"
            f"      vars: {{apt_packages_names: [{', '.join(names)}], apt_packages_label: {label}}}\n")


def _run_locally(tmp_path: Path, playbook_text: str) -> dict[str, dict]:
    """Run the playbook on this machine; each task's result by its name (the role's prefix dropped)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(playbook_text)
    return {task["task"]["name"].split(" : ")[-1]: task["hosts"]["localhost"] for task in run_local_playbook(playbook)}


def test_nothing_missing_skips_the_apt_module(tmp_path):
    """A package set that is already installed costs one dpkg query and no apt
    call: apt's module would only confirm it, at about a second per call."""
    results = _run_locally(tmp_path, _PLAY + _import(["dpkg"], "installed"))
    # The install (apt's module) is behind an include that nothing missing skips.
    assert results["Apt packages | Install the missing ones (installed)"].get("skipped") is True
    assert "Apt packages | Install (installed)" not in results
    assert not any(result.get("changed") for result in results.values())


def test_a_second_import_of_installed_packages_asks_dpkg_nothing(tmp_path):
    """One dpkg query per host and run: the first import lists every installed
    package; a later one whose packages are all in the list makes no query, and
    one that names a package outside it (here: set aside) queries again.
    The later import costs one skipped include, not the query's four tasks."""
    results = _run_locally(
        tmp_path,
        _PLAY + _import(["dpkg"], "first")
        + _PLAY + _import(["dpkg", "coreutils"], "known")
        + "    - ansible.builtin.set_fact: {apt_packages_installed: [dpkg]}\n"
        + _import(["dpkg", "coreutils"], "unknown"),
    )
    assert "skipped" not in results["Apt packages | Query installed packages (first)"]
    assert results["Apt packages | Query, install and record (known)"].get("skipped") is True
    assert "Apt packages | Query installed packages (known)" not in results
    assert "skipped" not in results["Apt packages | Query installed packages (unknown)"]
    # The query found coreutils installed after all: nothing to install, nothing pending.
    assert results["Apt packages | Install the missing ones (unknown)"].get("skipped") is True
    assert not any(result.get("changed") for result in results.values())


REFRESH = REPO / "roles" / "apt_packages" / "files" / "refresh_lists.sh"


def _refresh(tmp_path: Path, fake_apt_get: str, valid: int, stamp_age: int | None, limit: int = 1,
             stall: int = 60) -> subprocess.CompletedProcess:
    """Run refresh_lists.sh as tasks/refresh.yml does (sh -c), with an apt-get stand-in that logs its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    apt_get = bin_dir / "apt-get"
    apt_get.write_text(f"#!/bin/sh\necho call >> {tmp_path}/calls\n{fake_apt_get}\n")
    apt_get.chmod(0o755)
    stamp, lists = tmp_path / "periodic" / "update-success-stamp", tmp_path / "lists"
    lists.mkdir(exist_ok=True)
    os.utime(lists, (time.time() - 86400, time.time() - 86400))
    if stamp_age is not None:
        stamp.parent.mkdir(exist_ok=True)
        stamp.touch()
        os.utime(stamp, (time.time() - stamp_age, time.time() - stamp_age))
    return subprocess.run(
        ["sh", "-c", REFRESH.read_text(), "refresh_lists", str(valid), str(limit), str(stall), "3", str(stamp),
         str(lists)],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, capture_output=True, text=True, timeout=60,
    )


def _calls(tmp_path: Path) -> int:
    calls = tmp_path / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_fresh_lists_are_not_refreshed(tmp_path):
    result = _refresh(tmp_path, "exit 0", valid=3600, stamp_age=60)
    assert (result.returncode, _calls(tmp_path)) == (0, 0), result.stderr
    assert result.stdout.startswith("fresh")


def test_stale_lists_are_refreshed_and_the_stamp_touched(tmp_path):
    result = _refresh(tmp_path, "exit 0", valid=3600, stamp_age=None)  # no stamp: the lists directory is a day old
    assert (result.returncode, _calls(tmp_path)) == (0, 1), result.stderr
    assert time.time() - (tmp_path / "periodic" / "update-success-stamp").stat().st_mtime < 60
    # cache_valid_time 0 (a repository changed): refreshed whatever the stamp says
    assert _refresh(tmp_path, "exit 0", valid=0, stamp_age=0).returncode == 0 and _calls(tmp_path) == 2


def test_a_hung_update_is_stopped_and_tried_again(tmp_path):
    # The first call hangs (as apt-get update did behind apt-cacher-ng), the second succeeds.
    hangs_once = f'[ "$(wc -l < {tmp_path}/calls)" -gt 1 ] || exec sleep 30'
    result = _refresh(tmp_path, hangs_once, valid=3600, stamp_age=None)
    assert (result.returncode, _calls(tmp_path)) == (0, 2), result.stderr
    assert "try 1 of 3: ran past 1 s; trying again" in result.stderr


def test_an_update_without_progress_is_stopped_before_its_limit(tmp_path):
    # The first call writes nothing and hangs (as apt-get update did behind
    # apt-cacher-ng, 3 of 17 hosts refreshing at once); the second succeeds.
    hangs_once = f'[ "$(wc -l < {tmp_path}/calls)" -gt 1 ] || exec sleep 60'
    started = time.monotonic()
    result = _refresh(tmp_path, hangs_once, valid=3600, stamp_age=None, limit=50, stall=2)
    assert (result.returncode, _calls(tmp_path)) == (0, 2), result.stderr
    assert "try 1 of 3: no progress for 2 s; trying again" in result.stderr
    assert time.monotonic() - started < 30


def test_a_slow_update_that_makes_progress_is_left_to_finish(tmp_path):
    # Writes a partial list a little at a time for 4 s, longer than the stall
    # window (2 s) but never 2 s without a byte: one call, not stopped.
    (tmp_path / "lists" / "partial").mkdir(parents=True)
    slow = (f'for i in 1 2 3 4 5 6 7 8; do printf x >> {tmp_path}/lists/partial/Packages; sleep 0.5; done')
    result = _refresh(tmp_path, slow, valid=3600, stamp_age=None, limit=50, stall=2)
    assert (result.returncode, _calls(tmp_path)) == (0, 1), result.stderr
    assert result.stdout.strip().endswith("refreshed")


def test_an_update_that_keeps_failing_fails_after_its_tries(tmp_path):
    result = _refresh(tmp_path, "exit 100", valid=3600, stamp_age=None)
    assert (result.returncode, _calls(tmp_path)) == (1, 3)
    assert "apt-get update failed 3 times, the last: exit code 100" in result.stderr
    assert not (tmp_path / "periodic" / "update-success-stamp").exists()
