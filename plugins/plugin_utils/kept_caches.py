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
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["CACHE_ROOT", "fingerprint", "kept_directory"]

CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deepops"
# How many fingerprints (checkouts, versions) keep their directory.
KEPT_FINGERPRINTS = 4
PRUNE_AFTER_S = 24 * 3600


def fingerprint(collection_paths: Iterable[str], versions: Iterable[str],
                files_of: Callable[[Path], Iterable[Path]]) -> str:
    """A name for VERSIONS, this Python and the FILES_OF every collection in COLLECTION_PATHS.

    An installed collection is named by its MANIFEST.json (rewritten by every
    install); a collection without one (a checkout, like this repository) by
    the size and modification time of each of the files FILES_OF gives.
    """
    digest = hashlib.sha256()
    # The Python version names the bytecode's magic number and marshal's format.
    for version in (*versions, sys.version):
        digest.update(f"{version}\0".encode())
    for root in dict.fromkeys(os.path.realpath(path) for path in collection_paths):
        for collection in sorted(Path(root).glob("ansible_collections/*/*")):
            if not collection.is_dir():
                continue
            manifest = collection / "MANIFEST.json"
            files = [manifest] if manifest.is_file() else list(files_of(collection))
            for path in files:
                stat = path.stat()
                digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:24]


def plugin_files(collection: Path, kinds: Iterable[str]) -> Iterable[Path]:
    """The Python files of the collection's plugins of these kinds ('modules', 'filter', ...)."""
    for kind in kinds:
        yield from sorted((collection / "plugins" / kind).rglob("*.py"))


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
