"""Module payloads: bytecode that zipimport really uses (and only when it may), and a payload cache
kept between runs under a fingerprint that changes with the module code.

The last test runs ansible-playbook itself, with the repository's callback, twice.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib.util
import io
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

from ansible_collections.deepops.cluster.plugins.plugin_utils import module_payloads as payloads

REPO = Path(__file__).resolve().parents[2]


def _payload(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return base64.b64encode(out.getvalue())


def _members(payload: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(payload))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _import_from(tmp_path: Path, members: dict[str, bytes], module: str) -> dict:
    """Import MODULE from a zip of MEMBERS in a fresh Python, as the AnsiballZ wrapper does."""
    archive = tmp_path / "payload.zip"
    archive.write_bytes(base64.b64decode(_payload(members)))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(archive)!r})
        import {module} as imported
        print(json.dumps(dict(value=imported.VALUE, code_file=imported.where.__code__.co_filename)))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


SOURCE = b"VALUE = 'from the source'\n\ndef where():\n    pass\n"


def test_each_python_file_gets_bytecode_and_the_rest_is_unchanged():
    payload = payloads.add_bytecode(_payload({"pkg/__init__.py": b"", "pkg/mod.py": SOURCE, "pkg/data.txt": b"x"}))

    members = _members(payload)
    assert sorted(members) == ["pkg/__init__.py", "pkg/__init__.pyc", "pkg/data.txt", "pkg/mod.py", "pkg/mod.pyc"]
    assert members["pkg/mod.py"] == SOURCE and members["pkg/data.txt"] == b"x"
    assert members["pkg/mod.pyc"][:4] == importlib.util.MAGIC_NUMBER


def test_zipimport_loads_the_bytecode(tmp_path):
    members = _members(payloads.add_bytecode(_payload({"pkg/__init__.py": b"", "pkg/mod.py": SOURCE})))

    imported = _import_from(tmp_path, members, "pkg.mod")

    # Compiled here under the member's name; zipimport would name the archive's path.
    assert imported == {"value": "from the source", "code_file": "pkg/mod.py"}


def test_bytecode_whose_source_changed_is_not_used(tmp_path):
    members = _members(payloads.add_bytecode(_payload({"pkg/__init__.py": b"", "pkg/mod.py": SOURCE})))
    members["pkg/mod.py"] = SOURCE.replace(b"from the source", b"edited")

    imported = _import_from(tmp_path, members, "pkg.mod")

    assert imported["value"] == "edited"
    assert imported["code_file"].endswith("payload.zip/pkg/mod.py")


def test_bytecode_of_another_python_version_is_not_used(tmp_path):
    members = _members(payloads.add_bytecode(_payload({"pkg/__init__.py": b"", "pkg/mod.py": SOURCE})))
    foreign_magic = bytes([members["pkg/mod.pyc"][0] ^ 0xFF]) + members["pkg/mod.pyc"][1:4]
    members["pkg/mod.pyc"] = foreign_magic + members["pkg/mod.pyc"][4:]

    imported = _import_from(tmp_path, members, "pkg.mod")

    assert imported["value"] == "from the source"
    assert imported["code_file"].endswith("payload.zip/pkg/mod.py")


def test_a_file_this_python_cannot_compile_stays_source_only():
    payload = payloads.add_bytecode(_payload({"new.py": b"match = (\n", "old.py": b"x = 1\n"}))

    assert sorted(_members(payload)) == ["new.py", "old.py", "old.pyc"]


def test_a_file_that_already_has_bytecode_keeps_it():
    payload = payloads.add_bytecode(_payload({"m.py": b"x = 1\n", "m.pyc": b"theirs"}))

    assert _members(payload)["m.pyc"] == b"theirs"


def _collection(root: Path, name: str, files: dict[str, str]) -> Path:
    collection = root / "ansible_collections" / "ns" / name
    for relative, text in files.items():
        (collection / relative).parent.mkdir(parents=True, exist_ok=True)
        (collection / relative).write_text(text)
    return collection


def test_the_fingerprint_follows_module_code_and_installed_collections(tmp_path):
    checkout = _collection(tmp_path, "checkout", {"plugins/modules/m.py": "x = 1\n", "plugins/filter/f.py": "",
                                                  "plugins/module_utils/u.py": "y = 1\n"})
    installed = _collection(tmp_path, "installed", {"MANIFEST.json": "{}", "plugins/modules/i.py": ""})
    paths = [str(tmp_path)]
    first = payloads.fingerprint(paths, "2.19.0")

    assert payloads.fingerprint(paths, "2.19.0") == first
    (checkout / "plugins/filter/f.py").write_text("changed = True\n")  # not module code
    assert payloads.fingerprint(paths, "2.19.0") == first
    assert payloads.fingerprint(paths, "2.19.1") != first

    (checkout / "plugins/module_utils/u.py").write_text("y = 22\n")
    second = payloads.fingerprint(paths, "2.19.0")
    assert second != first

    (installed / "plugins/modules/i.py").write_text("ignored = True\n")  # an install rewrites the manifest
    assert payloads.fingerprint(paths, "2.19.0") == second
    (installed / "MANIFEST.json").write_text('{"version": "2"}')
    assert payloads.fingerprint(paths, "2.19.0") != second


def test_the_run_cache_links_to_the_kept_one_and_old_fingerprints_are_pruned(tmp_path):
    cache_dir = tmp_path / "cache"
    for age, key in enumerate(["old1", "old2", "old3", "old4"]):
        (cache_dir / key).mkdir(parents=True)
        (cache_dir / key / "payload").write_text("x")
        os.utime(cache_dir / key, (1000 + age, 1000 + age))
    # Beyond the kept number but used within the day: a run may still be using it.
    (cache_dir / "recent").mkdir()
    os.utime(cache_dir / "recent", (time.time() - 3600, time.time() - 3600))
    run_tmp = tmp_path / "run"
    run_tmp.mkdir()

    used = payloads.use_persistent_cache(str(run_tmp), cache_dir, "new")

    assert used == cache_dir / "new"
    assert (run_tmp / "ansiballz_cache").resolve() == used
    assert stat.S_IMODE(used.stat().st_mode) == 0o700
    # The newest three others stay beside the one in use, and what was used in the last day.
    assert sorted(path.name for path in cache_dir.iterdir()) == ["new", "old3", "old4", "recent"]
    # A run that already has its cache is left alone.
    assert payloads.use_persistent_cache(str(run_tmp), cache_dir, "other") is None


@dataclasses.dataclass(frozen=True)
class _FrozenCachedModule:
    zip_data: bytes

    def dump(self, path: str) -> None:
        Path(path).write_bytes(self.zip_data)


def test_the_hook_adds_bytecode_to_what_ansible_caches(tmp_path):
    module_common = SimpleNamespace(_CachedModule=type("CachedModule", (_FrozenCachedModule,), {}))

    assert payloads.send_bytecode(module_common)
    assert payloads.send_bytecode(module_common)  # once only
    module_common._CachedModule(zip_data=_payload({"m.py": b"x = 1\n"})).dump(str(tmp_path / "cached"))

    assert sorted(_members((tmp_path / "cached").read_bytes())) == ["m.py", "m.pyc"]


def test_without_the_expected_internals_the_hook_changes_nothing():
    assert not payloads.send_bytecode(SimpleNamespace())


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.ping:
"""


def test_ansible_playbook_reuses_payloads_with_bytecode_between_runs(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    cache_dir = tmp_path / "payloads"
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "DEEPOPS_PAYLOAD_CACHE_DIR": str(cache_dir),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local")}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml")]

    subprocess.run(command, env=env, check=True, capture_output=True, cwd=tmp_path)
    [kept] = cache_dir.iterdir()
    [payload] = kept.glob("ansible.modules.ping-*[!k]")
    built = payload.stat().st_mtime_ns
    subprocess.run(command, env=env, check=True, capture_output=True, cwd=tmp_path)

    assert kept.name.endswith("-bytecode")
    assert payload.stat().st_mtime_ns == built  # the second run built nothing
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(_zip_data(payload)))) as archive:
        assert "ansible/module_utils/basic.pyc" in archive.namelist()


def _zip_data(payload: Path) -> bytes:
    """The base64 zip inside Ansible's pickled cache entry, read with Ansible's own class."""
    from ansible.executor.module_common import _CachedModule

    return _CachedModule.load(str(payload)).zip_data
