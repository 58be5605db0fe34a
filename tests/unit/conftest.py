"""Shared fixtures: test role specs, and a writer for inventories with vars files.

Tests never depend on the shipped roles' argument specs: ``test_specs``
points deepops' schema at a small set of role specs written here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from ansible_collections.deepops.cluster.plugins.plugin_utils import schema

TEST_ROLE_SPECS = {
    "slurm": {
        "argument_specs": {
            "main": {
                "short_description": "Slurm (test specs)",
                "options": {
                    "slurm_partitions": {
                        "type": "list",
                        "elements": "dict",
                        "default": [{"name": "gpu", "nodes": "ALL"}],
                        "description": "Partitions.",
                        "options": {
                            "name": {"type": "str", "required": True},
                            "nodes": {"type": "str"},
                            "default": {"type": "bool"},
                        },
                    },
                    "slurm_version": {"type": "str", "default": "23.11", "description": "Slurm version."},
                    "slurm_port": {"type": "int", "default": 6817, "description": "slurmctld port."},
                    "slurm_accounting_enabled": {"type": "bool", "default": True},
                    "slurm_select_type": {"type": "str", "choices": ["cons_tres", "linear"], "default": "cons_tres"},
                    "slurm_gres_types": {"type": "list", "elements": "str", "choices": ["gpu", "mps", "shard"], "default": ["gpu"]},
                },
            },
            "upgrade": {
                "short_description": "Second entry point: its options count too.",
                "options": {"slurm_upgrade_drain_timeout": {"type": "int", "default": 600}},
            },
        }
    },
    "testbase": {
        "argument_specs": {
            "main": {
                "options": {
                    "testbase_apt_proxy": {"type": "str", "default": "", "description": "An apt proxy URL."},
                    "testbase_packages": {"type": "list", "elements": "str", "default": ["curl", "jq"]},
                    "testbase_sysctl": {"type": "dict", "default": {}},
                    "testbase_ratio": {"type": "float", "default": 0.5},
                    "testbase_anything": {"type": "raw"},
                    "testbase_key_file": {"type": "path"},
                }
            }
        }
    },
}

BASE_INVENTORY = """\
all:
  children:
    slurm_controller:
      hosts:
        ctl01:
    slurm_compute:
      hosts:
        gpu01:
        gpu02:
"""


@pytest.fixture(scope="session")
def specs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A roles/ directory holding only the test roles' meta/argument_specs.yml."""
    roles = tmp_path_factory.mktemp("specs") / "roles"
    for role, specs in TEST_ROLE_SPECS.items():
        meta = roles / role / "meta"
        meta.mkdir(parents=True)
        (meta / "argument_specs.yml").write_text(yaml.safe_dump(specs, sort_keys=False))
    return roles


@pytest.fixture
def test_specs(monkeypatch: pytest.MonkeyPatch, specs_dir: Path) -> Path:
    """Make every schema lookup (CLI included) use the test role specs."""
    monkeypatch.setattr(schema, "default_roles_dir", lambda: specs_dir)
    return specs_dir


WriteInventory = Callable[..., Path]


@pytest.fixture
def write_inventory(tmp_path: Path) -> WriteInventory:
    """Write an inventory plus extra files into tmp_path/inv; return the inventory path.

    ``files`` maps paths relative to the inventory directory to text (dedented),
    bytes, or data dumped as YAML; e.g. {"group_vars/all.yml": {"slurm_port": 1}}.
    """

    def write(inventory: str | bytes | object = BASE_INVENTORY, files: dict[str, object] | None = None) -> Path:
        directory = tmp_path / "inv"
        directory.mkdir(exist_ok=True)
        for relative, content in {"inventory.yml": inventory, **(files or {})}.items():
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            elif isinstance(content, str):
                path.write_text(textwrap.dedent(content))
            else:
                path.write_text(yaml.safe_dump(content, sort_keys=False))
        return directory / "inventory.yml"

    return write
