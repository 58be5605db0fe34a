"""What the controller keeps between runs: one directory per fingerprint of its inputs.

The module payloads (module_payloads.py) and the compiled templates
(template_cache.py) are both built from ansible-core, Python and the plugins
of every collection, and both are kept under ``~/.cache/deepops/<kind>/`` in a
directory named by a fingerprint of exactly what they are built from: a
changed input names another directory, so nothing stale is ever used. The
directories of old fingerprints are pruned.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CACHE_ROOT", "fingerprint", "host_file", "kept_directory", "write_atomically"]

CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deepops"
# How many fingerprints (checkouts, versions) keep their directory.
KEPT_FINGERPRINTS = 4
PRUNE_AFTER_S = 24 * 3600


def fingerprint(collection_paths: Iterable[str], versions: Iterable[str], plugin_kinds: Iterable[str]) -> str:
    """A name for VERSIONS, this Python and the plugins of PLUGIN_KINDS of every collection in COLLECTION_PATHS.

    PLUGIN_KINDS: directories under a collection's plugins/ ('modules',
    'filter', ...). An installed collection is named by its MANIFEST.json
    (rewritten by every install); a collection without one (a checkout, like
    this repository) by the size and modification time of each Python file
    of those kinds.
    """
    plugin_kinds = tuple(plugin_kinds)
    digest = hashlib.sha256()
    # The Python version names the bytecode's magic number and marshal's format.
    for version in (*versions, sys.version):
        digest.update(f"{version}\0".encode())
    for root in dict.fromkeys(os.path.realpath(path) for path in collection_paths):
        for collection in sorted(Path(root).glob("ansible_collections/*/*")):
            if not collection.is_dir():
                continue
            manifest = collection / "MANIFEST.json"
            files = [manifest] if manifest.is_file() else [
                path for kind in plugin_kinds for path in sorted((collection / "plugins" / kind).rglob("*.py"))]
            for path in files:
                stat = path.stat()
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:24]


def host_file(cache_dir: Path, inventory_file: str | None, host: str) -> Path:
    """The file of one host of one inventory in CACHE_DIR (what the controller remembers per host)."""
    key = hashlib.sha256(f"{inventory_file or ''}\0{host}".encode()).hexdigest()[:32]
    return cache_dir / f"{key}.json"


def write_atomically(target: Path, data: bytes) -> None:
    """Write DATA to TARGET through a file beside it, renamed: no reader sees half of it.

    The directory is made private to this user. Raises OSError as writing does."""
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, target)
    except OSError:
        Path(temporary).unlink(missing_ok=True)
        raise


def kept_directory(cache_dir: Path, key: str) -> Path:
    """CACHE_DIR/KEY, made private to this user and marked as the most recently used.

    Only this user may write there: the controller runs what it finds (payloads
    it unpickles, code objects it executes).
    """
    target = cache_dir / key
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.mkdir(mode=0o700, exist_ok=True)
    os.utime(target)
    _prune(cache_dir, keep=target)
    return target


def _prune(cache_dir: Path, keep: Path) -> None:
    """Remove the directories of fingerprints beyond the most recently used, unused for a day.

    The day protects a run still in progress that uses one.
    """
    others = sorted((path for path in cache_dir.iterdir() if path.is_dir() and path != keep),
                    key=lambda path: path.stat().st_mtime, reverse=True)
    for stale in others[KEPT_FINGERPRINTS - 1:]:
        if time.time() - stale.stat().st_mtime < PRUNE_AFTER_S:
            continue
        for entry in stale.iterdir():
            entry.unlink(missing_ok=True)
        stale.rmdir()
