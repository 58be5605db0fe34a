"""host_reads tasks answered from the run's first read instead of a module run of their own.

A no-op deploy's later reads (the NFS client's mounts, the Slurm controller's
records and accounting, the PAM files of compute nodes) each cost a module run
on their hosts, though nothing in the run has changed what they read. The
controller remembers, per inventory and host, what each host_reads task asked
for (``remember``): its commands' argv, its files and its paths. The deploy's
first read on the host (playbooks/components/common.yml, option
``include_remembered``) makes those reads too, and a later task whose every
read is among them, with an exit status it accepts, is answered from there
(``answer``), while nothing in the run has changed since
(plugins/plugin_utils/run_changes.py). A lost or stale list only costs the
saving: what is not in the first read is read by the task itself.

A read that no task asked for in STALE_AFTER_S is forgotten, so the first read
does not go on making reads no role makes any more.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import kept_caches

DEFAULT_CACHE_DIR = kept_caches.CACHE_ROOT / "host-reads"
STALE_AFTER_S = 7 * 24 * 3600
# A read asked for again within this keeps the time it was noted at (no write).
REFRESH_AFTER_S = 3600
# A host's reads beyond this start the list again.
MAX_READS = 128
# Where the deploy registers its first read on each host (playbooks/components/common.yml).
FIRST_READ = "deepops_host_reads"
# The first read returns the remembered reads' results under this key.
RESULT_KEY = "remembered"
# Names the first read gives the remembered reads among its own.
_PREFIX = "remembered:"
_KINDS = ("commands", "files", "paths")


def cache_file(inventory_file: str | None, host: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    return kept_caches.host_file(cache_dir, inventory_file, host)


def _key(kind: str, what: Any) -> str:
    return json.dumps([kind, what])


def known(inventory_file: str | None, host: str, cache_dir: Path = DEFAULT_CACHE_DIR) -> dict[str, float]:
    """HOST's remembered reads, as key -> when a task last asked for it (none when nothing is remembered)."""
    try:
        reads = json.loads(cache_file(inventory_file, host, cache_dir).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(reads, dict):
        return {}
    now = time.time()
    return {key: used for key, used in reads.items()
            if isinstance(key, str) and isinstance(used, (int, float)) and now - used < STALE_AFTER_S}


def requests_of(args: Mapping[str, Any]) -> list[str]:
    """The reads of one host_reads task's arguments, as keys: commands by argv, files and paths by path."""
    keys = [_key("commands", list(spec["argv"])) for spec in args.get("commands") or []]
    keys += [_key(kind, path) for kind in ("files", "paths") for path in (args.get(kind) or {}).values()]
    return keys


def remember(inventory_file: str | None, host: str, keys: list[str], cache_dir: Path = DEFAULT_CACHE_DIR) -> None:
    """Note that a task asked HOST for KEYS now; best effort (a cache that cannot be written only costs the saving)."""
    if not keys:
        return
    reads = known(inventory_file, host, cache_dir)
    now = time.time()
    if all(now - reads.get(key, 0) < REFRESH_AFTER_S for key in keys):
        return  # asked for lately: a no-op re-run writes nothing per task
    reads.update({key: now for key in keys})
    if len(reads) > MAX_READS:
        reads = {key: now for key in keys}
    try:
        kept_caches.write_atomically(cache_file(inventory_file, host, cache_dir),
                                     json.dumps(reads, sort_keys=True).encode())
    except OSError:
        return


def with_remembered(args: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """The first read's arguments plus the remembered reads it does not make already.

    A remembered command may fail (the first read must not); its status is
    judged by the task that asks for it."""
    args = {kind: (list(args.get(kind) or []) if kind == "commands" else dict(args.get(kind) or {})) for kind in _KINDS} | {
        name: value for name, value in args.items() if name not in _KINDS}
    own = set(requests_of(args))
    for number, key in enumerate(sorted(set(keys) - own)):
        try:
            kind, what = json.loads(key)
        except ValueError:
            continue
        name = f"{_PREFIX}{number}"
        if kind == "commands" and isinstance(what, list) and what and all(isinstance(part, str) for part in what):
            args["commands"].append({"name": name, "argv": what, "may_fail": True})
        elif kind in ("files", "paths") and isinstance(what, str) and what.startswith("/"):
            args[kind][name] = what
    return args


def first_read_answers(args: Mapping[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The remembered reads' results by key, taken out of the first read's RESULT.

    ARGS: the first read's arguments, with_remembered. Its own reads stay as
    they are; the remembered ones' names are the first read's business only."""
    answers: dict[str, Any] = {}
    for spec in args.get("commands") or []:
        if spec["name"].startswith(_PREFIX) and spec["name"] in (result.get("commands") or {}):
            answers[_key("commands", list(spec["argv"]))] = result["commands"].pop(spec["name"])
    for kind in ("files", "paths"):
        for name, path in (args.get(kind) or {}).items():
            if name.startswith(_PREFIX) and name in (result.get(kind) or {}):
                answers[_key(kind, path)] = result[kind].pop(name)
    return answers


def answer(args: Mapping[str, Any], answers: Mapping[str, Any]) -> dict[str, Any] | None:
    """The result the module would return for ARGS, from the first read's ANSWERS; None where any is missing.

    None too where a command's exit status is one the task does not accept:
    the task then runs, and fails, as it would have."""
    result: dict[str, Any] = {"commands": {}, "files": {}, "paths": {}, "file_states": {}}
    if args.get("file_states"):
        return None
    for spec in args.get("commands") or []:
        found = answers.get(_key("commands", list(spec["argv"])))
        if not isinstance(found, dict) or "rc" not in found:
            return None
        if found["rc"] not in (spec.get("ok_rc") or [0]) and not spec.get("may_fail"):
            return None
        result["commands"][spec["name"]] = found
    for kind in ("files", "paths"):
        for name, path in (args.get(kind) or {}).items():
            found = answers.get(_key(kind, path))
            if not isinstance(found, dict):
                return None
            result[kind][name] = found
    return result
