"""Callback plugin deepops.cluster.preload: the collection's plugins loaded before Ansible forks.

Ansible runs each task, for each host, in a worker process forked from the
controller's process, and a plugin is imported where it is first looked up.
A filter or action plugin that only the workers look up is therefore imported
again in every worker: Jinja resolves a collection filter by loading the
collection's filter files one after the other until one defines it, each
with the module_utils it imports. On a no-op deploy of the default virtual
cluster that was about a quarter of ansible-playbook's CPU time
(bench/RESULTS.md). Loaded here, at the start of the run, every worker
inherits them.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Loads the collection's filter and action plugins once, before Ansible forks its workers
description:
  - Imports every filter and action plugin of this collection into Ansible's plugin loaders when the run
    starts, so the worker processes that run the tasks inherit them instead of importing them again for
    each task and host.
  - Reports nothing and changes no output. A plugin that fails to load is left alone here; the task that
    uses it reports the error as usual.
requirements:
  - enabled in the C(callbacks_enabled) setting of ansible.cfg, as the repository's ansible.cfg does
"""

import pkgutil
from importlib import import_module
from typing import Any

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import PluginLoader, action_loader, filter_loader

# The plugin types a task's worker looks up by name, with their loaders.
PRELOADED_TYPES = {"filter": filter_loader, "action": action_loader}


def collection_of(module_name: str) -> str:
    """'ansible_collections.ns.name.plugins.callback.x' -> 'ns.name'."""
    parts = module_name.split(".")
    if len(parts) < 3 or parts[0] != "ansible_collections":
        raise ValueError(f"{module_name} is not a module of a collection")
    return f"{parts[1]}.{parts[2]}"


def preload(collection: str) -> list[str]:
    """Load every filter and action plugin of the collection; their fully qualified names, as type:name."""
    namespace, name = collection.split(".")
    loaded = []
    for plugin_type, loader in PRELOADED_TYPES.items():
        try:
            package = import_module(f"ansible_collections.{namespace}.{name}.plugins.{plugin_type}")
        except ImportError:
            continue  # the collection has no plugins of this type
        for module in pkgutil.iter_modules(package.__path__):
            if module.ispkg:
                continue
            fqcn = f"{collection}.{module.name}"
            try:
                # PluginLoader's own lookup, which is what Jinja's filter loader runs for each file
                # of the collection: it fills the loader's module cache that the forks inherit.
                PluginLoader.get_with_context(loader, fqcn, class_only=True)
            except Exception:  # pylint: disable=broad-exception-caught
                continue  # the task that uses it reports why it does not load
            loaded.append(f"{plugin_type}:{fqcn}")
    return loaded


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "deepops.cluster.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.preloaded = preload(collection_of(__name__))
