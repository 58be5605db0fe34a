"""Ordinary users declared in the inventory (``cluster_users``), created alike on every node.

Pure functions, used three ways: ``entry_problems`` by the inventory check
(before any host is touched), ``host_problems`` by the role's preflight (the
declared users against a node's ``getent passwd``/``getent group``, before any
change), and ``record`` by the role, which keeps the names it manages in a
file on each node and reports those no longer declared (it never deletes one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import shared_mounts

# POSIX-portable user and group names, as useradd accepts them by default
# (Debian's NAME_REGEX): lower-case letter or _, then letters, digits, _ -.
NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# Below 1000: the distribution's system accounts; 65534: nobody; 2**32-1: (uid_t)-1.
ID_MIN, ID_MAX, NOBODY = 1000, 2**32 - 2, 65534
# The key types OpenSSH reads in authorized_keys (options before the type are not supported).
_KEY = re.compile(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
                  r" [A-Za-z0-9+/]+={0,3}( [^\n\r]*)?")
KEYS = ("name", "uid", "gid", "groups", "ssh_keys", "shell", "home")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def gid_of(entry: Mapping[str, Any]) -> Any:
    """The primary group's gid: ``gid``, else the uid."""
    return entry.get("gid", entry.get("uid"))


def entry_problems(entries: Any) -> list[str]:
    """What is wrong with the list as a whole and with each entry (the types are the schema's)."""
    if not isinstance(entries, list):
        return []
    problems: list[str] = []
    seen: dict[str, dict[Any, str]] = {"name": {}, "uid": {}, "gid": {}}
    for index, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping):
            continue
        where = f"item {index}"
        name = entry.get("name")
        if not name:
            problems.append(f"{where}: needs a name")
        elif isinstance(name, str):
            where = f"item {index} ({name})"
            if not NAME.fullmatch(name):
                problems.append(f"{where}: name {name!r} is not a user name: a lower-case letter or _, "
                                "then lower-case letters, digits, _ or -, at most 32")
        if "uid" not in entry:
            problems.append(f"{where}: needs a uid")
        for key, value in (("uid", entry.get("uid")), ("gid", gid_of(entry))):
            if _is_int(value) and (not ID_MIN <= value <= ID_MAX or value == NOBODY):
                problems.append(f"{where}: {key} {value} is reserved: use {ID_MIN} to {ID_MAX}, not {NOBODY}")
        for key, value in (("name", name), ("uid", entry.get("uid")), ("gid", gid_of(entry))):
            if value is None or isinstance(value, (list, dict)):
                continue
            first = seen[key].setdefault(value, where)
            if first != where:
                problems.append(f"{where}: {key} {value} is already {first}'s")
        for group in entry.get("groups") or []:
            if isinstance(group, str) and not NAME.fullmatch(group):
                problems.append(f"{where}: group {group!r} is not a group name")
        for number, key in enumerate(entry.get("ssh_keys") or [], 1):
            if isinstance(key, str) and not _KEY.fullmatch(key.strip()):
                problems.append(f"{where}: ssh_keys item {number} is not an OpenSSH public key line "
                                "('ssh-ed25519 AAAA... comment')")
        for key in ("shell", "home"):
            value = entry.get(key)
            if isinstance(value, str) and not re.fullmatch(r"/[^\s:]*", value):
                problems.append(f"{where}: {key} {value!r} is not an absolute path without spaces or ':'")
    return problems


def _table(text: str) -> list[list[str]]:
    return [line.split(":") for line in (text or "").splitlines() if line.count(":") >= 2]


def host_problems(host: str, entries: Sequence[Mapping[str, Any]], passwd: str, group: str) -> list[str]:
    """Where the declared users clash with the node's own users and groups (``getent`` output).

    A user or group that already exists with the declared name and id is
    taken over as it is; one with the declared name and another id, or the
    declared id under another name, would need renumbering or would merge two
    people's files, so it stops the deploy instead.
    """
    users = {fields[0]: fields[2] for fields in _table(passwd)}
    users_by_id = {fields[2]: fields[0] for fields in _table(passwd)}
    groups = {fields[0]: fields[2] for fields in _table(group)}
    groups_by_id = {fields[2]: fields[0] for fields in _table(group)}
    declared_groups = {str(entry.get("name")) for entry in entries}
    problems = []
    for entry in entries:
        name, uid, gid = str(entry.get("name")), str(entry.get("uid")), str(gid_of(entry))
        if name in users and users[name] != uid:
            problems.append(f"{host}: user {name} exists with uid {users[name]}, the inventory says {uid}")
        if users_by_id.get(uid, name) != name:
            problems.append(f"{host}: uid {uid} of {name} belongs to the local user {users_by_id[uid]}")
        if name in groups and groups[name] != gid:
            problems.append(f"{host}: group {name} exists with gid {groups[name]}, the inventory says {gid}")
        if groups_by_id.get(gid, name) != name:
            problems.append(f"{host}: gid {gid} of {name} belongs to the local group {groups_by_id[gid]}")
        missing = [str(g) for g in entry.get("groups") or [] if str(g) not in groups and str(g) not in declared_groups]
        if missing:
            problems.append(f"{host}: {name}'s groups {', '.join(missing)} do not exist")
    return problems


def record(entries: Sequence[Mapping[str, Any]], saved: str, passwd: str) -> dict[str, list[str]]:
    """The names to record (declared, plus earlier ones still on the node) and those no longer declared.

    SAVED is the record file's text ("" when there is none yet).
    """
    try:
        earlier = json.loads(saved or "{}").get("users", [])
    except (ValueError, AttributeError):
        earlier = []
    declared = sorted({str(entry.get("name")) for entry in entries})
    present = {fields[0] for fields in _table(passwd)}
    undeclared = sorted(({str(name) for name in earlier if isinstance(name, str)} - set(declared)) & present)
    return {"users": sorted(set(declared) | set(undeclared)), "undeclared": undeclared}


AUTHORIZED_KEYS_HEADER = "# Managed by deepops (cluster_users): edits are replaced on the next deploy.\n"


def home_of(entry: Mapping[str, Any], base: str = "/home") -> str:
    return str(entry.get("home") or f"{base.rstrip('/')}/{entry.get('name')}")


def homes_written_here(entries: Sequence[Mapping[str, Any]], base: str, mounts: Sequence[Mapping[str, Any]],
                       play_hosts: Sequence[str], hostname: str) -> list[str]:
    """The users whose home directory (and ~/.ssh) HOSTNAME creates: every user whose home is on
    no shared mount; of those on a shared mount (MOUNTS, this host's shared_mounts plan),
    those this host writes there (shared_mounts.writes_path), so a shared /home gets each
    home once."""
    return [str(entry.get("name")) for entry in entries
            if shared_mounts.writes_path(mounts, home_of(entry, base), play_hosts, hostname)]


def home_paths(entries: Sequence[Mapping[str, Any]], base: str = "/home") -> dict[str, str]:
    """{name: home}: the homes the preflight looks for (host_reads paths)."""
    return {str(entry.get("name")): home_of(entry, base) for entry in entries}


def unsettled(entries: Sequence[Mapping[str, Any]], passwd: str | None, group: str | None, base: str,
              default_shell: str, homes_here: Sequence[str], homes_found: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """The names whose primary group (``groups``) or user (``users``) the role's group and
    user modules would change, from the node's ``getent`` output and, for the users whose
    home this host creates, whether the home exists (host_reads ``paths`` by name).

    As ansible.builtin.group and ansible.builtin.user decide: a group is settled with
    its name and gid; a user with its uid, the primary group's gid, home, shell, exactly
    its supplementary groups (they run with ``append: false``) and, where this host
    creates the home, the home there. Any doubt (no read, a missing field) is unsettled,
    so the task runs as before.
    """
    names = [str(entry.get("name")) for entry in entries]
    if passwd is None or group is None:
        return {"groups": names, "users": names}
    users = {fields[0]: fields for fields in _table(passwd) if len(fields) >= 7}
    groups = {fields[0]: fields for fields in _table(group) if len(fields) >= 4}
    members: dict[str, set[str]] = {}
    for name, fields in groups.items():
        for member in fields[3].split(","):
            members.setdefault(member, set()).add(name)
    found = homes_found or {}
    unsettled_groups, unsettled_users = [], []
    for entry in entries:
        name, gid = str(entry.get("name")), str(gid_of(entry))
        group_fields = groups.get(name)
        if group_fields is None or group_fields[2] != gid:
            unsettled_groups.append(name)
        user = users.get(name)
        primary = {group_name for group_name, fields in groups.items() if fields[2] == gid}
        home_missing = name in homes_here and not (found.get(name) or {}).get("exists", False)
        if (user is None or user[2] != str(entry.get("uid")) or user[3] != gid or user[5] != home_of(entry, base)
                or user[6] != str(entry.get("shell") or default_shell)
                or members.get(name, set()) - primary != {str(g) for g in entry.get("groups") or []}
                or home_missing or name in unsettled_groups):
            unsettled_users.append(name)
    return {"groups": unsettled_groups, "users": unsettled_users}


def key_files(entries: Sequence[Mapping[str, Any]], base: str = "/home", existing: Sequence[str] | None = None) -> list[dict]:
    """deepops.cluster.managed_files entries: ~/.ssh and ~/.ssh/authorized_keys of each user with keys.

    EXISTING, when given, limits them to those users (check mode: a user the
    run would create cannot own files yet).
    """
    files: list[dict] = []
    for entry in entries:
        keys = [str(key).strip() for key in entry.get("ssh_keys") or []]
        name = str(entry.get("name"))
        if not keys or (existing is not None and name not in existing):
            continue
        home = home_of(entry, base)
        owner = {"owner": name, "group": name}
        files.append({"path": f"{home}/.ssh", "state": "directory", "mode": "0700", **owner})
        files.append({"path": f"{home}/.ssh/authorized_keys", "mode": "0600", **owner,
                      "content": AUTHORIZED_KEYS_HEADER + "".join(f"{key}\n" for key in keys)})
    return files
