"""Module payloads built once, not once per run, and sent with their bytecode.

Ansible sends each module to a host as a zip of its Python sources
(AnsiballZ), which the host's Python imports with zipimport. zipimport never
caches bytecode, so every module run on every host compiles
``ansible.module_utils.basic`` and its imports from source again: about 40% of
a module run's CPU on the node (bench/RESULTS.md). And ansible-playbook builds
each payload anew in every run, in a cache directory that lives as long as the
run: a few seconds of every deploy.

Two changes, both in the controller before the run forks its workers:

- ``add_bytecode``: each payload gets, beside every ``.py`` file, a checked
  hash-based ``.pyc`` compiled by the controller's Python. A host whose Python
  has the same minor version loads it (zipimport checks the source's hash, so
  it can never run other code than the source beside it); any other Python
  sees a foreign magic number and compiles the source as before.
- ``use_persistent_cache``: Ansible's per-run payload cache directory becomes a
  link to a directory that outlives the run, named by a fingerprint of every
  input a payload is built from (ansible-core, Python, and the module code of
  every collection), so a changed module never meets a stale payload.

Both hook into ansible-core internals (the cache directory's place and
``_CachedModule``). Where those are not as expected, nothing is changed and
Ansible works as it always does.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import io
import marshal
import zipfile
from collections.abc import Iterable
from pathlib import Path

from ansible_collections.deepops.cluster.plugins.plugin_utils import kept_caches

__all__ = ["add_bytecode", "fingerprint", "use_persistent_cache", "send_bytecode", "DEFAULT_CACHE_DIR"]

# Ansible's own name for the payload cache inside its per-run temporary directory.
_RUN_CACHE_NAME = "ansiballz_cache"
# Checked hash-based pyc (PEP 552): zipimport compares the source's hash before using it.
_CHECKED_HASH_FLAGS = 0b11

DEFAULT_CACHE_DIR = kept_caches.CACHE_ROOT / "ansiballz"


def _bytecode(source: bytes, name: str) -> bytes:
    code = compile(source, name, "exec", dont_inherit=True)
    return (importlib.util.MAGIC_NUMBER + _CHECKED_HASH_FLAGS.to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def add_bytecode(zip_data: bytes) -> bytes:
    """A payload (base64 of a zip) with a .pyc beside each .py file that has none.

    A file that does not compile here (newer syntax than this Python's) is left
    as source only; the host compiles it as before.
    """
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data))) as original:
        members = [(info, original.read(info)) for info in original.infolist()]
    names = {info.filename for info, _data in members}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as rebuilt:
        for info, data in members:
            rebuilt.writestr(info, data)
            compiled_name = info.filename + "c"
            if not info.filename.endswith(".py") or compiled_name in names:
                continue
            try:
                bytecode = _bytecode(data, info.filename)
            except (SyntaxError, ValueError):
                continue
            compiled = zipfile.ZipInfo(compiled_name, info.date_time)
            compiled.compress_type = zipfile.ZIP_DEFLATED
            rebuilt.writestr(compiled, bytecode)
    return base64.b64encode(out.getvalue())


def fingerprint(collection_paths: Iterable[str], ansible_version: str) -> str:
    """A name for everything a payload is built from: ansible-core, Python and every collection's module code."""
    return kept_caches.fingerprint(collection_paths, [ansible_version], ("modules", "module_utils"))


def use_persistent_cache(run_tmp: str, cache_dir: Path, key: str) -> Path | None:
    """Link the run's payload cache to CACHE_DIR/KEY; the directory used, or None if left alone."""
    run_cache = Path(run_tmp) / _RUN_CACHE_NAME
    if run_cache.exists() or run_cache.is_symlink():
        return None  # payloads are already being built for this run
    target = kept_caches.kept_directory(cache_dir, key)
    run_cache.symlink_to(target, target_is_directory=True)
    return target


def send_bytecode(module_common) -> bool:
    """Make ansible-core add bytecode to every payload it caches; whether the hook is in place."""
    cached_module = getattr(module_common, "_CachedModule", None)
    dump = getattr(cached_module, "dump", None)
    if dump is None:
        return False
    if getattr(dump, "adds_bytecode", False):
        return True

    # The payload that builds it is sent as built (the object is frozen); every later
    # use, in this run or another, reads the file with bytecode.
    def dump_with_bytecode(self, path: str) -> None:
        try:
            dump(dataclasses.replace(self, zip_data=add_bytecode(self.zip_data)), path)
        except (zipfile.BadZipFile, ValueError, TypeError):
            dump(self, path)  # kept as Ansible built it

    dump_with_bytecode.adds_bytecode = True
    cached_module.dump = dump_with_bytecode
    return True
