"""managed_files without a module run where the run's first read shows its entries in place.

A no-op deploy runs about thirty managed_files tasks, each a module run on its
hosts that finds every file as it should be. Instead, the deploy's first task
on each host (playbooks/components/common.yml) reads the state of every path
managed_files wrote there in earlier runs (host_reads ``file_states``): the
paths this controller remembers per host (``remember``/``known``, a cache, so
a lost or stale one only costs the saving, never a wrong result). The action
plugin then compares each entry with that state here (``in_place``, as the
module would compare it) and skips the module run when every entry is in place
and nothing in the run has changed since the read (plugins/plugin_utils/run_changes.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import kept_caches

# Where the paths are remembered, one file per inventory and host.
DEFAULT_CACHE_DIR = kept_caches.CACHE_ROOT / "managed-paths"
# A host's list is started again beyond this (paths of files no longer managed pile up otherwise).
MAX_PATHS = 4096
# The module's default for directories (plugins/modules/managed_files.py).
DEFAULT_DIR_MODE = "0755"
# An octal mode as managed_files takes it (the action plugin checks arguments with it too).
OCTAL_MODE = re.compile(r"0?[0-7]{3,4}")


def cache_file(inventory_file: str | None, host: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    return kept_caches.host_file(cache_dir, inventory_file, host)


def known(inventory_file: str | None, host: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> list[str]:
    """The paths managed_files wrote on HOST in earlier runs (none when nothing is remembered)."""
    try:
        paths = json.loads(cache_file(inventory_file, host, cache_dir).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(paths, list):
        return []
    return [path for path in paths if isinstance(path, str) and path.startswith("/")]


def remember(inventory_file: str | None, host: str, paths: Iterable[str], cache_dir: Path = DEFAULT_CACHE_DIR) -> None:
    """Add PATHS to HOST's list; best effort (a cache that cannot be written only costs the saving)."""
    have = known(inventory_file, host, cache_dir)
    seen = set(have)
    new = [path for path in dict.fromkeys(paths) if path not in seen]
    if not new:
        return
    merged = have + new if len(have) + len(new) <= MAX_PATHS else new
    try:
        kept_caches.write_atomically(cache_file(inventory_file, host, cache_dir), json.dumps(sorted(merged)).encode())
    except OSError:
        return


def _mode_matches(wanted: str | None, found: Any) -> bool:
    if wanted is None:
        return True
    # A symbolic mode depends on the mode it changes: left to the module.
    return bool(OCTAL_MODE.fullmatch(wanted)) and isinstance(found, str) and int(wanted, 8) == int(found, 8)


def _id_matches(wanted: str | None, name: Any, number: Any) -> bool:
    if wanted is None:
        return True
    return int(wanted) == number if wanted.isdigit() else wanted == name


def _attributes_match(wanted_mode: str | None, owner: str | None, group: str | None, state: Mapping[str, Any]) -> bool:
    return (_mode_matches(wanted_mode, state.get("mode"))
            and _id_matches(owner, state.get("owner"), state.get("uid"))
            and _id_matches(group, state.get("group"), state.get("gid")))


def _content(entry: Mapping[str, Any]) -> bytes | None:
    if entry.get("content") is not None:
        return str(entry["content"]).encode("utf-8")
    if entry.get("content_base64") is not None:
        return base64.b64decode(entry["content_base64"])
    return None


def in_place(entry: Mapping[str, Any], defaults: Mapping[str, Any], state: Mapping[str, Any] | None, key: str) -> bool:
    """Whether the module would leave ENTRY as it is, given the path's STATE (host_reads
    file_states, its digests under KEY). Any doubt (no state or key, a read error, a symbolic
    mode) is False: the module decides."""
    if not key or not isinstance(state, Mapping) or state.get("error"):
        return False
    kind = entry.get("state", "file")
    if kind == "absent":
        return state.get("exists") is False
    if not state.get("exists"):
        return False
    if kind == "link":
        return bool(state.get("link")) and state.get("target") == entry.get("target")
    owner = entry.get("owner") or defaults.get("owner")
    group = entry.get("group") or defaults.get("group")
    if kind == "directory":
        mode = entry.get("mode") or defaults.get("dir_mode") or DEFAULT_DIR_MODE
        return state.get("kind") == "directory" and _attributes_match(mode, owner, group, state)
    if kind != "file" or state.get("kind") != "file":
        return False
    content = _content(entry)
    found = state.get("hmac")
    if content is None or not isinstance(found, str):
        return False
    if not hmac.compare_digest(hmac.new(key.encode(), content, hashlib.sha256).hexdigest(), found):
        return False
    return _attributes_match(entry.get("mode") or defaults.get("mode"), owner, group, state)


def all_in_place(module_args: Mapping[str, Any], states: Mapping[str, Any], key: str) -> bool:
    """Whether every entry of a managed_files call is in place (an empty call is not judged here)."""
    entries = module_args.get("files") or []
    return bool(entries) and all(in_place(entry, module_args, states.get(entry["path"]), key) for entry in entries)
