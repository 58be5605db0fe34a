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
