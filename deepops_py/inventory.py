"""The cluster inventory for the CLI: which file to use, loaded and validated.

The model and the validation live in the collection
(``plugins/plugin_utils/inventory.py``), which the playbooks' inventory check
uses too; this module finds the file and turns findings into ``InputError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.deepops.cluster.plugins.plugin_utils.inventory import (  # noqa: F401 - re-exported for the CLI
    COMPUTE,
    CONTROLLER,
    DBD,
    KNOWN_GROUPS,
    LOGIN,
    MONITORING,
    Cluster,
    Host,
    is_valid_hostname,
)
from ansible_collections.deepops.cluster.plugins.plugin_utils import inventory as _model
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import BrokenContent, InvalidInventory
from deepops_py import paths
from deepops_py.errors import DeepopsError, InputError

# File names tried inside a directory given as the inventory.
INVENTORY_FILE_NAMES = ("inventory.yml", "inventory.yaml", "hosts.yml", "hosts.yaml")

_NEXT_STEP = "create one with 'deepops init', or start a virtual cluster with 'deepops virtual up'"


@dataclass(frozen=True)
class InventorySource:
    """The inventory file to use, and why it was chosen (shown to the user)."""

    path: Path
    origin: str  # "-i", "$DEEPOPS_INVENTORY", "config/inventory.yml" or "virtual cluster"


# --------------------------------------------------------------------------
# finding the inventory


def resolve_inventory(option: str | None) -> InventorySource:
    """-i, else $DEEPOPS_INVENTORY, else config/inventory.yml, else the virtual cluster's."""
    if option:
        return InventorySource(_existing_inventory(Path(option), "-i"), "-i")
    from_env = os.environ.get("DEEPOPS_INVENTORY")
    if from_env:
        return InventorySource(_existing_inventory(Path(from_env), "$DEEPOPS_INVENTORY"), "$DEEPOPS_INVENTORY")
    config_inventory = paths.default_config_dir() / "inventory.yml"
    if config_inventory.is_file():
        return InventorySource(config_inventory, "config/inventory.yml")
    virtual_inventory = paths.virtual_dir() / "inventory.yml"
    if virtual_inventory.is_file():
        return InventorySource(virtual_inventory, "virtual cluster")
    raise InputError(
        "No inventory found. Tried: -i (not given), $DEEPOPS_INVENTORY (not set), "
        f"{config_inventory} (missing), {virtual_inventory} (no virtual cluster). "
        f"{_NEXT_STEP[0].upper()}{_NEXT_STEP[1:]}."
    )


def _existing_inventory(path: Path, origin: str | None) -> Path:
    """The inventory file at ``path``; a directory stands for the inventory.yml in it."""
    named = f"Inventory {path} (from {origin})" if origin else f"Inventory {path}"
    if path.is_dir():
        for name in INVENTORY_FILE_NAMES:
            if (path / name).is_file():
                return path / name
        raise InputError(f"{named} is a directory without {' or '.join(INVENTORY_FILE_NAMES)}; {_NEXT_STEP}.")
    if not path.exists():
        raise InputError(f"{named} does not exist; {_NEXT_STEP}.")
    if not path.is_file():
        raise InputError(f"{named} is not a regular file.")
    return path


# --------------------------------------------------------------------------
# loading and validating


def load_cluster(path: Path, *, roles_dir: Path | None = None) -> Cluster:
    """Load ``path`` with Ansible and validate it, or raise InputError listing every problem.

    ``roles_dir`` overrides where the roles' argument specs are read from.
    """
    path = _existing_inventory(Path(path), None)
    try:
        return _model.load_cluster(path, roles_dir=roles_dir)
    except InvalidInventory as invalid:
        raise InputError(invalid.message, problems=invalid.problems) from None
    except BrokenContent as broken:
        raise DeepopsError(str(broken)) from None
