"""The repository as the Ansible collection deepops.cluster.

Plugins stand on their own (no import of the CLI's package, no loading by
path), are called by their fully qualified names, and the built collection
passes ansible-test sanity, Ansible's own checks for collections.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PLUGINS = REPO / "plugins"
NAMESPACE, NAME = "deepops", "cluster"
FQCN_PREFIX = f"{NAMESPACE}.{NAME}."
BIN = Path(sys.executable).parent


def _python_files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*.py") if "__pycache__" not in path.parts)


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_galaxy_metadata_names_the_collection():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert (galaxy["namespace"], galaxy["name"]) == (NAMESPACE, NAME)
    link = REPO / "collections" / "ansible_collections" / NAMESPACE / NAME
    assert link.is_symlink() and link.resolve() == REPO  # found from the checkout with no install step


@pytest.mark.parametrize("path", _python_files(PLUGINS), ids=lambda path: str(path.relative_to(REPO)))
def test_no_plugin_imports_the_cli_package(path):
    imported = _imported_modules(path)
    assert not {name for name in imported if name == "deepops_py" or name.startswith("deepops_py.")}, (
        f"{path.relative_to(REPO)} imports deepops_py: shared code belongs in plugins/module_utils or plugin_utils"
    )


@pytest.mark.parametrize("root", ["plugins", "deepops_py", "roles"])
def test_nothing_is_loaded_by_path_or_steers_sys_path(root):
    offenders = []
    for path in _python_files(REPO / root):
        text = path.read_text()
        if re.search(r"spec_from_file_location|sys\.path\.(insert|append)|SourceFileLoader", text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def _project_filter_names() -> set[str]:
    names = set()
    for path in (PLUGINS / "filter").glob("*.py"):
        module = __import__(f"ansible_collections.{NAMESPACE}.{NAME}.plugins.filter.{path.stem}", fromlist=["FilterModule"])
        names.update(module.FilterModule().filters())
    return names


def _project_task_names() -> set[str]:
    return {path.stem for path in (PLUGINS / "modules").glob("*.py")}


def _ansible_text_files() -> list[Path]:
    files = []
    for top in ("roles", "playbooks", "molecule"):
        files += [path for path in (REPO / top).rglob("*") if path.suffix in (".yml", ".yaml", ".j2") and path.is_file()]
    return sorted(files)


def test_project_plugins_are_called_by_fully_qualified_name():
    filters, tasks = _project_filter_names(), _project_task_names()
    assert {"hostlist_compress", "slurm_gres_lines", "nvidia_compat_cuda"} <= filters
    assert {"nvidia_gpu_facts", "inventory_check"} <= tasks
    bare_filter = re.compile(r"\|\s*(?!" + re.escape(FQCN_PREFIX) + r")(" + "|".join(sorted(filters)) + r")\b")
    bare_task = re.compile(r"^\s*-?\s*(" + "|".join(sorted(tasks)) + r"):", re.MULTILINE)
    offenders = []
    for path in _ansible_text_files():
        text = path.read_text()
        for match in [*bare_filter.finditer(text), *bare_task.finditer(text)]:
            line = text.count("\n", 0, match.start()) + 1
            offenders.append(f"{path.relative_to(REPO)}:{line}: {match.group(1)}")
    assert offenders == [], "call project plugins as deepops.cluster.<name>"


# --------------------------------------------------------------------------
# ansible-test sanity on the collection as `ansible-galaxy collection build` makes it


def _provide_pip_bootstrap(home: Path, python: str) -> None:
    """ansible-test bootstraps pip in its test environments with a script it downloads from a
    host that is not reachable here; put the stand-in (tests/support) in its cache instead."""
    from ansible_test._internal.python_requirements import get_venv_packages

    pip_version = get_venv_packages(SimpleNamespace(version=python))["pip"]
    cache = home / ".ansible" / "test" / "cache" / f"get_pip_{pip_version.replace('.', '_')}.py"
    source = (REPO / "tests" / "support" / "ansible_test_get_pip.py").read_bytes()
    if not cache.is_file() or cache.read_bytes() != source:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(source)


@pytest.fixture(scope="module")
def built_collection(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("collection-build")
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(output), str(REPO)],
        check=True, capture_output=True, text=True, timeout=120,
    )
    (archive,) = output.glob(f"{NAMESPACE}-{NAME}-*.tar.gz")
    root = tmp_path_factory.mktemp("collection") / "ansible_collections" / NAMESPACE / NAME
    root.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root


def test_built_collection_holds_the_collection_and_not_the_cli(built_collection):
    for wanted in ("MANIFEST.json", "plugins/modules/nvidia_gpu_facts.py", "roles/slurm/tasks/main.yml",
                   "playbooks/site.yml", "meta/runtime.yml"):
        assert (built_collection / wanted).exists(), wanted
    for unwanted in ("deepops_py", "tests/unit", "collections", ".venv", "molecule"):
        assert not (built_collection / unwanted).exists(), unwanted


def test_ansible_test_sanity_passes(built_collection):
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    _provide_pip_bootstrap(Path.home(), python)
    result = subprocess.run(
        [str(BIN / "ansible-test"), "sanity", "--python", python, "--color", "no"],
        cwd=built_collection, capture_output=True, text=True, timeout=1500, check=False,
    )
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith(("ERROR:", "FATAL:"))]
    assert result.returncode == 0, "\n".join(errors) or result.stdout[-4000:] + result.stderr[-4000:]
