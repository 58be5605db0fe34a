"""Shared file systems (``shared_mounts``): what each cluster node mounts, what the
``nfs_server`` hosts export, and who writes the files that live on them.

One list declares every shared mount; each entry is one of three kinds:

- served by deepops: ``managed`` (the default) and the server is a host of the
  inventory group ``nfs_server`` (an entry without ``server`` is served by the
  first one). The ``nfs_server`` role exports it; the ``nfs_client`` role
  mounts it (a systemd mount unit) on every other cluster member.
- mounted by deepops from a site's NFS server: ``managed`` with a ``server``
  outside the inventory. deepops writes the mount units and never touches the
  server.
- site-managed (``managed: false``): a file system the site mounts itself
  (Lustre, GPFS, WEKA, an NFS mount it already manages). deepops only checks,
  before Slurm starts, that it is mounted on every member.

Slurm's daemons are ordered after all of them (``RequiresMountsFor=``).

Pure functions, standard library only: ``entry_problems`` for the inventory
check and the roles' preflight, ``plan`` (a host's mounts, resolved),
``mount_unit`` (a systemd mount unit), ``exports`` (an /etc/exports.d file),
``mount_problems`` (what ``findmnt`` shows against the plan) and
``writes_path`` (which host creates files under a shared path, so that home
directories on a shared /home are made once, not fought over).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NFS_SERVER_GROUP = "nfs_server"
KEYS = ("path", "server", "export", "fstype", "options", "managed", "export_options", "modulefiles")
# File system types deepops mounts itself; anything else is the site's (managed: false).
NFS_TYPES = ("nfs", "nfs4")
# HPC mount options for NFS: hard (a server outage stalls I/O instead of
# corrupting it), no atime writes, 1 MiB transfers, NFS 4.2, TCP timeouts as
# the kernel's defaults for TCP, and _netdev (a network file system: mounted
# once the network is up, unmounted before it goes down).
DEFAULT_NFS_OPTIONS = ("rw", "hard", "noatime", "vers=4.2", "rsize=1048576", "wsize=1048576", "timeo=600",
                       "retrans=2", "_netdev")
# exports(5): synchronous writes, no subtree checks (files renamed while open
# stay reachable), root on the clients mapped to nobody.
DEFAULT_EXPORT_OPTIONS = ("rw", "sync", "no_subtree_check", "root_squash")

# A mount point or export: an absolute, normalised path of these characters
# (what mount units, exports(5) and shells take without quoting).
_PATH = re.compile(r"/[A-Za-z0-9._+@-]+(/[A-Za-z0-9._+@-]+)*")
_RELATIVE = re.compile(r"[A-Za-z0-9._+@-]+(/[A-Za-z0-9._+@-]+)*")
_OPTION = re.compile(r"[A-Za-z0-9_.=:/+@-]+")
_FSTYPE = re.compile(r"[a-z0-9_.]{1,32}")
# The operating system's own trees: no shared file system goes on or under them.
_SYSTEM_TREES = ("/proc", "/sys", "/dev", "/run", "/boot", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32",
                 "/lib64", "/libx32")
# ... nor exactly on these (under them is fine: /var/scratch, /opt/apps).
_SYSTEM_DIRS = ("/", "/var", "/tmp", "/opt", "/root", "/srv", "/mnt", "/media")


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _path_problem(value: Any, what: str) -> str | None:
    if not isinstance(value, str):
        return None  # the type check names it
    if not _PATH.fullmatch(value) or any(part in (".", "..") for part in value.split("/")):
        return (f"{what} {value!r} is not an absolute path of letters, digits and . _ + @ - "
                "(no trailing /, no . or .. parts)")
    return None


def entry_problems(entries: Any) -> list[str]:
    """What is wrong with the list and each entry, beyond the types argument_specs checks."""
    if not isinstance(entries, list):
        return []
    problems: list[str] = []
    first_at: dict[str, str] = {}
    for index, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping):
            continue
        path = entry.get("path")
        where = f"item {index} ({path})" if isinstance(path, str) and path else f"item {index}"
        for key in entry:
            if key not in KEYS:
                problems.append(f"{where}: unknown key {key!r} (keys: {', '.join(KEYS)})")
        if not path:
            problems.append(f"{where}: needs a path (the mount point)")
        problem = _path_problem(path, "path")
        if isinstance(path, str) and (path in _SYSTEM_DIRS
                                      or any(path == tree or path.startswith(tree + "/") for tree in _SYSTEM_TREES)):
            problems.append(f"{where}: {path} is a system directory: mount shared file systems elsewhere "
                            "(/home, /sw, /scratch, /opt/apps)")
        elif problem:
            problems.append(f"{where}: {problem}")
        elif isinstance(path, str) and path:
            first = first_at.setdefault(path, where)
            if first != where:
                problems.append(f"{where}: path {path} is already {first}'s")
        problem = _path_problem(entry.get("export"), "export")
        if problem:
            problems.append(f"{where}: {problem}")
        fstype = entry.get("fstype")
        if isinstance(fstype, str) and not _FSTYPE.fullmatch(fstype):
            problems.append(f"{where}: fstype {fstype!r} is not a file system type such as nfs, lustre or gpfs")
        managed = entry.get("managed", True)
        if _is_bool(managed) and managed and isinstance(fstype, str) and fstype not in NFS_TYPES:
            problems.append(f"{where}: fstype {fstype}: deepops mounts NFS only; set managed: false "
                            "and mount it with the site's tools (deepops then checks it is mounted)")
        for key in ("options", "export_options"):
            for number, option in enumerate(entry.get(key) or [], 1):
                if isinstance(option, str) and not _OPTION.fullmatch(option):
                    problems.append(f"{where}: {key} item {number} {option!r} is not one mount option "
                                    "(no spaces or commas: one option per item)")
        modulefiles = entry.get("modulefiles")
        if isinstance(modulefiles, str) and modulefiles and (
            not _RELATIVE.fullmatch(modulefiles) or any(part in (".", "..") for part in modulefiles.split("/"))
        ):
            problems.append(f"{where}: modulefiles {modulefiles!r} is not a directory relative to the mount point "
                            "(like modulefiles or modules/all)")
    return problems


def inventory_problems(entries: Any, nfs_servers: Sequence[str], inventory_hosts: Iterable[str]) -> list[str]:
    """What the inventory's groups say about the entries (a value the inventory sets, not the default)."""
    if not isinstance(entries, list):
        return []
    hosts = set(inventory_hosts)
    problems = []
    for index, entry in enumerate(entries, 1):
        if not isinstance(entry, Mapping) or entry.get("managed", True) is not True:
            continue
        where = f"item {index} ({entry.get('path')})"
        server = entry.get("server")
        if not server and not nfs_servers:
            problems.append(f"{where}: no server, and the group {NFS_SERVER_GROUP} has no host: name the server, "
                            f"put a host in {NFS_SERVER_GROUP}, or set managed: false for a file system the site mounts")
        elif isinstance(server, str) and server in hosts and server not in nfs_servers:
            problems.append(f"{where}: server {server} is a host of this inventory but not in {NFS_SERVER_GROUP}: "
                            f"add it to {NFS_SERVER_GROUP} so deepops exports {entry.get('export') or entry.get('path')}")
    return problems


def _options_text(options: Iterable[str]) -> str:
    return ",".join(dict.fromkeys(str(option) for option in options))


def _source(server: str, export: str) -> str:
    host = f"[{server}]" if ":" in server else server
    return f"{host}:{export}"


def plan(entries: Any, nfs_servers: Sequence[str], hostname: str) -> list[dict[str, Any]]:
    """HOSTNAME's shared mounts, every key filled in, sorted by path (parents first).

    Each: path, managed, fstype, options (text), server, export, source
    (``server:/export``), served (exported by an ``nfs_server`` host),
    export_options (text, where served),
    writer (the host that creates files on it: the serving host, else None,
    meaning the first host of the run), mount (this host mounts it: managed
    and not served from this very host), unit (the mount unit's name) and
    modulefiles (the Lmod directory, or "").
    Entries without a server are left out when ``nfs_server`` has no host:
    the default list then declares nothing.
    """
    result = []
    for entry in entries or []:
        managed = entry.get("managed", True)
        path = entry["path"]
        server = entry.get("server") or (nfs_servers[0] if nfs_servers else "")
        if managed and not server:
            continue
        export = entry.get("export") or path
        served = bool(managed) and server in nfs_servers
        fstype = entry.get("fstype") or ("nfs" if managed else "")
        options = entry.get("options")
        export_options = entry.get("export_options")
        modulefiles = entry.get("modulefiles") or ""
        result.append({
            "path": path,
            "managed": bool(managed),
            "fstype": fstype,
            "options": _options_text(DEFAULT_NFS_OPTIONS if options is None and managed else options or []),
            "server": server if managed else "",
            "export": export if managed else "",
            "source": _source(server, export) if managed else "",
            "served": served,
            "export_options": _options_text(DEFAULT_EXPORT_OPTIONS if export_options is None else export_options)
            if served else "",
            "writer": server if served else None,
            # The serving host has the files where they are exported: nothing to mount there.
            "mount": bool(managed) and not (served and server == hostname and export == path),
            "unit": mount_unit_name(path),
            "modulefiles": posixpath.join(path, modulefiles) if modulefiles else "",
        })
    for mount in result:
        if mount["managed"] and mount["served"] and mount["server"] == hostname and mount["export"] != mount["path"]:
            # Served from here under another path: a bind mount shows the same files at the mount point.
            mount.update(fstype="none", options="bind", source=mount["export"])
    return sorted(result, key=lambda mount: mount["path"])


def mount_unit_name(path: str) -> str:
    """systemd's name for the mount unit of PATH (``systemd-escape --path --suffix=mount``)."""
    trimmed = "/".join(part for part in path.split("/") if part)
    if not trimmed:
        return "-.mount"
    escaped = []
    for position, char in enumerate(trimmed):
        if char == "/":
            escaped.append("-")
        elif (char.isascii() and char.isalnum()) or char in ":_" or (char == "." and position > 0):
            escaped.append(char)
        else:
            escaped.append("".join(f"\\x{byte:02x}" for byte in char.encode()))
    return "".join(escaped) + ".mount"


def mount_unit(mount: Mapping[str, Any]) -> str:
    """The text of MOUNT's systemd mount unit (a ``plan`` item with ``mount`` true)."""
    network = mount["fstype"] in NFS_TYPES
    lines = [
        "# Managed by deepops (shared_mounts): edits are overwritten.",
        "[Unit]",
        f"Description=Shared file system {mount['path']} ({mount['source']})",
        "Documentation=man:systemd.mount(5)",
    ]
    if network:
        lines += ["Wants=network-online.target", "After=network-online.target"]
    lines += [
        "",
        "[Mount]",
        f"What={mount['source']}",
        f"Where={mount['path']}",
        f"Type={mount['fstype']}",
        f"Options={mount['options']}",
        # A server that does not answer fails the mount after this long instead of holding the boot.
        "TimeoutSec=90",
        "",
        "[Install]",
        f"WantedBy={'remote-fs.target' if network else 'local-fs.target'}",
        "",
    ]
    return "\n".join(lines)


UNIT_DIR = "/etc/systemd/system"
DROPIN_NAME = "deepops-shared-mounts.conf"


def unit_files(mounts: Iterable[Mapping[str, Any]], directory: str = UNIT_DIR) -> list[dict[str, str]]:
    """``managed_files`` entries of the mount units this host needs (the mounts it mounts)."""
    return [{"path": f"{directory}/{mount['unit']}", "content": mount_unit(mount)} for mount in mounts if mount["mount"]]


def dropin_files(mounts: Iterable[Mapping[str, Any]], services: Iterable[str], directory: str = UNIT_DIR) -> list[dict[str, str]]:
    """``managed_files`` entries of the drop-ins that start SERVICES (slurmd, sackd) only once
    every shared mount is there: each needs them (RequiresMountsFor= orders it after them
    too). No shared mount: the drop-ins are removed."""
    paths = ordering_paths(mounts)
    entries: list[dict[str, str]] = []
    for service in services:
        dropin = f"{directory}/{service}.d/{DROPIN_NAME}"
        if not paths:
            entries.append({"path": dropin, "state": "absent"})
            continue
        entries.append({"path": f"{directory}/{service}.d", "state": "directory"})
        entries.append({"path": dropin, "content": (
            "# Managed by deepops (shared_mounts): users' files and software live on the shared\n"
            f"# mounts, so {service} starts only once they are mounted.\n"
            "[Unit]\n"
            f"RequiresMountsFor={' '.join(paths)}\n"
        )})
    return entries


def unit_states(mounts: Iterable[Mapping[str, Any]], units: Mapping[str, Mapping[str, str]]) -> dict[str, list[str]]:
    """From UNITS (``systemctl show`` properties by unit): ``start``, the mount units of this
    host not both mounted and enabled, and ``active``, those mounted now."""
    start, active = [], []
    for mount in mounts:
        if not mount["mount"]:
            continue
        state = units.get(mount["unit"]) or {}
        if state.get("ActiveState") == "active":
            active.append(mount["unit"])
        if (state.get("ActiveState"), state.get("SubState"), state.get("UnitFileState")) != ("active", "mounted", "enabled"):
            start.append(mount["unit"])
    return {"start": start, "active": active}


def exports(mounts: Iterable[Mapping[str, Any]], hostname: str, clients: Sequence[str]) -> str:
    """The /etc/exports.d file of HOSTNAME: each export it serves, to every client in CLIENTS."""
    if not clients:
        raise ValueError("no NFS clients to export to")
    lines = ["# Managed by deepops (shared_mounts, nfs_server): edits are overwritten."]
    for mount in sorted(served_here(mounts, hostname), key=lambda item: item["export"]):
        lines.append(f"{mount['export']} " + " ".join(f"{client}({mount['export_options']})" for client in clients))
    return "\n".join(lines) + "\n"


def served_here(mounts: Iterable[Mapping[str, Any]], hostname: str) -> list[Mapping[str, Any]]:
    """The mounts HOSTNAME exports."""
    return [mount for mount in mounts if mount["served"] and mount["server"] == hostname]


def export_directories(mounts: Iterable[Mapping[str, Any]], hostname: str) -> list[dict[str, str]]:
    """``managed_files`` entries for the directories HOSTNAME exports, and the module directory
    in each that has one, parents first."""
    found = []
    for mount in served_here(mounts, hostname):
        found.append(mount["export"])
        if mount.get("modulefiles"):
            found.append(mount["export"] + mount["modulefiles"][len(mount["path"]):])
    return [{"path": path, "state": "directory"} for path in sorted(dict.fromkeys(found))]


def mount_problems(hostname: str, mounts: Iterable[Mapping[str, Any]], findmnt_json: str) -> list[str]:
    """Each mount of the plan that ``findmnt --json --list --output TARGET,SOURCE,FSTYPE`` does not show
    mounted as declared. Mounts served from HOSTNAME itself (nothing to mount) are not checked."""
    try:
        table = json.loads(findmnt_json or "{}").get("filesystems") or []
    except (ValueError, AttributeError):
        return [f"{hostname}: cannot read the mounted file systems (findmnt's output is not JSON)"]
    mounted: dict[str, dict[str, Any]] = {}
    for row in table:
        if isinstance(row, Mapping) and isinstance(row.get("target"), str):
            mounted[row["target"]] = dict(row)  # the last mount on a path is the one in use
    problems = []
    for mount in mounts:
        if mount["managed"] and not mount["mount"]:
            continue
        found = mounted.get(mount["path"])
        kind = ("mounted by deepops" if mount["managed"]
                else "site-managed: deepops does not mount it; mount it on the node, or remove it from shared_mounts")
        if found is None:
            problems.append(f"{hostname}: {mount['path']} is not mounted ({kind})")
            continue
        fstype = str(found.get("fstype") or "")
        wanted = mount["fstype"]
        if wanted and wanted != "none" and not (fstype == wanted or (wanted in NFS_TYPES and fstype in NFS_TYPES)):
            problems.append(f"{hostname}: {mount['path']} is mounted as {fstype or '?'} from "
                            f"{found.get('source') or '?'}, expected {wanted} ({kind})")
    return problems


def _covering(mounts: Iterable[Mapping[str, Any]], path: str) -> Mapping[str, Any] | None:
    best = None
    for mount in mounts:
        if path == mount["path"] or path.startswith(mount["path"].rstrip("/") + "/"):
            if best is None or len(mount["path"]) > len(best["path"]):
                best = mount
    return best


def writes_path(mounts: Iterable[Mapping[str, Any]], path: str, play_hosts: Sequence[str], hostname: str) -> bool:
    """Whether HOSTNAME creates files at PATH: yes where PATH is on no shared mount
    (every host has its own); on a shared one, only its writer (the serving
    host, whose local files they are: clients' root is squashed), else the
    first host of the run."""
    mount = _covering(mounts, path)
    if mount is None:
        return True
    writer = mount.get("writer")
    if writer:
        return writer == hostname
    return bool(play_hosts) and play_hosts[0] == hostname


def ordering_paths(mounts: Iterable[Mapping[str, Any]]) -> list[str]:
    """The mount points the Slurm daemons need before they start (RequiresMountsFor=)."""
    return [mount["path"] for mount in mounts]


def modulefiles_dirs(mounts: Iterable[Mapping[str, Any]]) -> list[str]:
    """The Lmod module directories on the shared mounts, for Lmod's module path."""
    return [mount["modulefiles"] for mount in mounts if mount.get("modulefiles")]
