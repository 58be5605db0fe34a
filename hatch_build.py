"""Wheel build hook: ship the Ansible collection as ``ansible_collections/deepops/cluster``.

A regular wheel gets the collection's files under that name in site-packages,
where both Python (``import ansible_collections.deepops.cluster...``) and
Ansible (it scans sys.path for ``ansible_collections``) find them. An editable
install copies nothing: ``dev-mode-dirs`` puts the checkout's ``collections/``
directory, whose ``ansible_collections/deepops/cluster`` is a symlink to the
checkout, on sys.path instead, so edits take effect without a reinstall.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COLLECTION_DIR = "ansible_collections/deepops/cluster"
# What the collection is made of (galaxy.yml's build_ignore leaves the rest out of `ansible-galaxy collection build`).
COLLECTION_CONTENT = ("galaxy.yml", "meta", "plugins", "playbooks", "roles", "inventory", "ansible.cfg", "README.md")


class CollectionBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        for name in COLLECTION_CONTENT:
            build_data["force_include"][name] = f"{COLLECTION_DIR}/{name}"
