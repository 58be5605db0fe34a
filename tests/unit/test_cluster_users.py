"""cluster_users: the inventory rules, the clash check against a node's users and
groups, and the record of the users deepops created (cluster users issue)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.deepops.cluster.plugins.module_utils import cluster_users

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk alice@laptop"
PASSWD = "root:x:0:0:root:/root:/bin/bash\nbob:x:1000:1000::/home/bob:/bin/bash\nalice:x:2001:2001::/home/alice:/bin/bash\n"
GROUP = "root:x:0:\nvideo:x:44:\nbob:x:1000:\nalice:x:2001:\n"


def test_good_entries_pass():
    entries = [{"name": "alice", "uid": 2001, "gid": 2001, "groups": ["video"], "ssh_keys": [KEY]},
               {"name": "carol", "uid": 2002, "shell": "/bin/zsh", "home": "/srv/home/carol"}]
    assert cluster_users.entry_problems(entries) == []


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([{"uid": 2001}], "item 1: needs a name"),
        ([{"name": "alice"}], "item 1 (alice): needs a uid"),
        ([{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2001}], "item 2 (bob): uid 2001 is already item 1 (alice)'s"),
        ([{"name": "alice", "uid": 2001}, {"name": "alice", "uid": 2002}], "item 2 (alice): name alice is already item 1 (alice)'s"),
        ([{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "gid": 2001}], "item 2 (bob): gid 2001 is already"),
        ([{"name": "alice", "uid": 0}], "uid 0 is reserved"),
        ([{"name": "alice", "uid": 2001, "gid": 65534}], "gid 65534 is reserved"),
        ([{"name": "Alice;x", "uid": 2001}], "name 'Alice;x' is not a user name"),
        ([{"name": "alice", "uid": 2001, "groups": ["vid eo"]}], "group 'vid eo' is not a group name"),
        ([{"name": "alice", "uid": 2001, "ssh_keys": ["not a key"]}], "ssh_keys item 1 is not an OpenSSH public key"),
        ([{"name": "alice", "uid": 2001, "shell": "bash"}], "shell 'bash' is not an absolute path"),
    ],
)
def test_bad_entries_are_named(entries, expected):
    problems = cluster_users.entry_problems(entries)
    assert any(expected in problem for problem in problems), problems


def test_existing_identical_user_is_taken_over():
    assert cluster_users.host_problems("gpu01", [{"name": "alice", "uid": 2001}], PASSWD, GROUP) == []


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"name": "alice", "uid": 2005, "gid": 2001}, "gpu01: user alice exists with uid 2001, the inventory says 2005"),
        ({"name": "dave", "uid": 1000, "gid": 3000}, "gpu01: uid 1000 of dave belongs to the local user bob"),
        ({"name": "dave", "uid": 3000, "gid": 44}, "gpu01: gid 44 of dave belongs to the local group video"),
        ({"name": "video", "uid": 3000}, "gpu01: group video exists with gid 44, the inventory says 3000"),
        ({"name": "dave", "uid": 3000, "groups": ["video", "cuda"]}, "gpu01: dave's groups cuda do not exist"),
    ],
)
def test_clashes_with_local_users_and_groups(entry, expected):
    assert expected in cluster_users.host_problems("gpu01", [entry], PASSWD, GROUP)


def test_another_declared_users_group_may_be_a_supplementary_group():
    entries = [{"name": "dave", "uid": 3000, "groups": ["erin"]}, {"name": "erin", "uid": 3001}]
    assert cluster_users.host_problems("gpu01", entries, PASSWD, GROUP) == []


def test_record_keeps_undeclared_users_while_they_exist():
    saved = json.dumps({"users": ["alice", "bob", "gone"]})
    result = cluster_users.record([{"name": "carol", "uid": 2002}], saved, PASSWD)
    # gone was deleted by hand: forgotten; alice and bob are still there: reported
    assert result == {"users": ["alice", "bob", "carol"], "undeclared": ["alice", "bob"]}
    assert cluster_users.record([{"name": "alice", "uid": 2001}], "", PASSWD) == {"users": ["alice"], "undeclared": []}
    assert cluster_users.record([], "not json", PASSWD) == {"users": [], "undeclared": []}


def test_key_files_for_users_with_keys():
    entries = [{"name": "alice", "uid": 2001, "ssh_keys": [KEY + "  "]}, {"name": "carol", "uid": 2002},
               {"name": "dave", "uid": 2003, "home": "/srv/dave", "ssh_keys": [KEY]}]
    files = cluster_users.key_files(entries)
    assert [entry["path"] for entry in files] == [
        "/home/alice/.ssh", "/home/alice/.ssh/authorized_keys", "/srv/dave/.ssh", "/srv/dave/.ssh/authorized_keys"]
    assert files[1]["content"] == cluster_users.AUTHORIZED_KEYS_HEADER + KEY + "\n"
    assert (files[1]["owner"], files[1]["mode"], files[0]["mode"]) == ("alice", "0600", "0700")
    # check mode: only users that exist already
    assert [entry["path"] for entry in cluster_users.key_files(entries, existing=["dave"])][0] == "/srv/dave/.ssh"


# --------------------------------------------------------------------------
# unsettled: the groups and users the role's modules would change

HOST_PASSWD = "root:x:0:0:root:/root:/bin/bash\nalice:x:2001:2001::/home/alice:/bin/bash\nbob:x:2002:2002::/shared/bob:/bin/zsh\n"
HOST_GROUP = "root:x:0:\nalice:x:2001:\nbob:x:2002:\nvideo:x:44:alice\nbob-team:x:3000:bob,alice\n"
ALICE = {"name": "alice", "uid": 2001, "groups": ["video", "bob-team"]}
BOB = {"name": "bob", "uid": 2002, "gid": 2002, "groups": ["bob-team"], "shell": "/bin/zsh", "home": "/shared/bob"}
HOMES = {"alice": {"exists": True, "isdir": True}, "bob": {"exists": True, "isdir": True}}


def _unsettled(entries, passwd=HOST_PASSWD, group=HOST_GROUP, homes_here=("alice", "bob"), homes=HOMES):
    return cluster_users.unsettled(entries, passwd, group, "/home", "/bin/bash", list(homes_here), homes)


def test_users_as_declared_are_settled():
    assert _unsettled([ALICE, BOB]) == {"groups": [], "users": []}


@pytest.mark.parametrize(
    ("change", "groups", "users"),
    [
        ({"uid": 2009, "gid": 2001}, [], ["alice"]),
        ({"gid": 2009}, ["alice"], ["alice"]),
        ({"shell": "/bin/sh"}, [], ["alice"]),
        ({"home": "/elsewhere/alice"}, [], ["alice"]),
        ({"groups": ["video"]}, [], ["alice"]),
        ({"groups": ["video", "bob-team", "audio"]}, [], ["alice"]),
        ({"name": "carol", "uid": 2003}, ["carol"], ["carol"]),
    ],
)
def test_what_the_modules_would_change_is_unsettled(change, groups, users):
    assert _unsettled([{**ALICE, **change}]) == {"groups": groups, "users": users}


def test_a_home_made_here_must_exist_one_made_elsewhere_need_not():
    missing = {**HOMES, "alice": {"exists": False, "isdir": False}}
    assert _unsettled([ALICE], homes=missing) == {"groups": [], "users": ["alice"]}
    assert _unsettled([ALICE], homes=missing, homes_here=()) == {"groups": [], "users": []}
    assert _unsettled([ALICE], homes=None) == {"groups": [], "users": ["alice"]}


def test_without_a_read_everything_is_unsettled():
    assert _unsettled([ALICE, BOB], passwd=None) == {"groups": ["alice", "bob"], "users": ["alice", "bob"]}


def test_the_modules_agree_in_check_mode(tmp_path):
    """ansible.builtin.group and ansible.builtin.user in check mode against this machine's own
    root account: what they would change is what unsettled says."""
    import subprocess

    from local_playbook import run_local_playbook

    passwd = subprocess.run(["getent", "passwd"], capture_output=True, text=True, check=True).stdout
    group = subprocess.run(["getent", "group"], capture_output=True, text=True, check=True).stdout
    root = next(line.split(":") for line in passwd.splitlines() if line.startswith("root:"))
    supplementary = sorted(line.split(":")[0] for line in group.splitlines()
                           if "root" in line.split(":")[3].split(",") and line.split(":")[2] != root[3])
    as_is = {"name": "root", "uid": int(root[2]), "gid": int(root[3]), "groups": supplementary,
             "shell": root[6], "home": root[5]}
    cases = [as_is, {**as_is, "shell": "/bin/false"}, {**as_is, "home": "/nonexistent-home"},
             {**as_is, "groups": supplementary + ["daemon"]}, {**as_is, "gid": int(root[3]) + 4242}]
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  check_mode: true\n  tasks:\n"
        "    - ansible.builtin.group: {name: '{{ item.name }}', gid: '{{ item.gid }}'}\n"
        f"      loop: {json.dumps(cases)}\n"
        "    - ansible.builtin.user:\n"
        "        name: '{{ item.name }}'\n        uid: '{{ item.uid }}'\n        group: '{{ item.name }}'\n"
        "        groups: '{{ item.groups }}'\n        append: false\n        shell: '{{ item.shell }}'\n"
        "        home: '{{ item.home }}'\n        create_home: false\n"
        f"      loop: {json.dumps(cases[:4])}\n"
    )
    group_task, user_task = run_local_playbook(playbook)
    group_changed = [result["changed"] for result in group_task["hosts"]["localhost"]["results"]]
    user_changed = [result["changed"] for result in user_task["hosts"]["localhost"]["results"]]
    found = [cluster_users.unsettled([case], passwd, group, "/home", "/bin/bash", [], None) for case in cases]
    assert group_changed == [bool(result["groups"]) for result in found]
    assert user_changed == [bool(result["users"]) for result in found[:4]]
    assert user_changed == [False, True, True, True]
