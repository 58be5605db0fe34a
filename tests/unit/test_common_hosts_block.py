"""The common role's /etc/hosts block when some members have no address in the run
(unreachable, no common_hosts_address): each host keeps the address its block gave
them before, and leaves out, with a warning, only a member its block did not list.

The role's own vars and warning task, rendered by Ansible on localhost.
"""

from __future__ import annotations

import base64
from pathlib import Path

import yaml
from local_playbook import run_local_playbook

REPO = Path(__file__).resolve().parents[2]
WARN_TASK = "Common | Warn about members without an address"

# What this host's /etc/hosts held before the run: gpu01 has moved since, gpu03 was never listed.
BEFORE = """\
127.0.0.1 localhost
# BEGIN deepops cluster hosts
10.0.0.1 ctl01
10.0.0.91 gpu01
10.0.0.12 gpu02
# END deepops cluster hosts
"""
# ctl01 and gpu01 are reached in this run (pinned here, as the facts would give it); gpu02 and gpu03 are not.
MEMBERS = {"ctl01": "10.0.0.1", "gpu01": "10.0.0.11", "gpu02": "", "gpu03": ""}


def render(tmp_path, host_vars: dict, members: dict[str, str] = MEMBERS) -> dict:
    """The block, the members left out and the warning (None where skipped) for localhost with HOST_VARS."""
    hosts_tasks = yaml.safe_load((REPO / "roles/common/tasks/hosts.yml").read_text())
    warn = next(task for task in hosts_tasks if task["name"] == WARN_TASK)
    grouping = {"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
        {"ansible.builtin.add_host": {"name": name, "groups": ["deepops_members"], "common_hosts_address": address}}
        for name, address in members.items()]}
    play = {
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(REPO / "roles/common/vars/main.yml")],
        "vars": host_vars,
        "tasks": [
            {"name": "block", "ansible.builtin.debug": {"msg": "{{ _common_hosts_block }}"}},
            {"name": "left out", "ansible.builtin.debug": {"msg": "{{ _common_hosts_left_out }}"}},
            {**warn, "name": "warn"},
        ],
    }
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([grouping, play]))
    results = {task["task"]["name"]: task["hosts"]["localhost"] for task in run_local_playbook(playbook)}
    return {name: None if results[name].get("skipped") else results[name]["msg"] for name in ("block", "left out", "warn")}


def test_a_member_unreachable_keeps_the_address_this_hosts_block_gave_it(tmp_path):
    """Read at the deploy's start: gpu02 keeps 10.0.0.12, gpu01 gets its new address, gpu03 is left out."""
    shown = render(tmp_path, {"deepops_host_reads": {"files": {"hosts": {"content": BEFORE}}}})
    assert shown["block"] == "10.0.0.1 ctl01\n10.0.0.11 gpu01\n10.0.0.12 gpu02\n"
    assert shown["left out"] == ["gpu03"]
    assert shown["warn"] == ("gpu03: left out of this host's /etc/hosts (not reachable in this run,"
                             " no common_hosts_address, and not in its block before)")


def test_without_the_deploys_first_read_the_block_comes_from_the_roles_own_read(tmp_path):
    """The last play of a node add or removal: hosts.yml's slurp of /etc/hosts."""
    read = {"content": base64.b64encode(BEFORE.encode()).decode()}
    shown = render(tmp_path, {"__common_hosts_file_read": read},
                   members={**MEMBERS, "gpu03": "10.0.0.13"})
    assert shown["block"] == "10.0.0.1 ctl01\n10.0.0.11 gpu01\n10.0.0.12 gpu02\n10.0.0.13 gpu03\n"
    assert shown["left out"] == []
    assert shown["warn"] == ("gpu02: not reachable in this run and no common_hosts_address;"
                             " /etc/hosts keeps the address its block gave them")


def test_every_member_reached_lists_each_at_its_address_and_warns_of_nothing(tmp_path):
    members = {"ctl01": "10.0.0.1", "gpu01": "10.0.0.11", "gpu02": "10.0.0.2"}
    shown = render(tmp_path, {"deepops_host_reads": {"files": {"hosts": {"content": "127.0.0.1 localhost\n"}}}}, members)
    assert shown == {"block": "10.0.0.1 ctl01\n10.0.0.11 gpu01\n10.0.0.2 gpu02\n", "left out": [], "warn": None}
