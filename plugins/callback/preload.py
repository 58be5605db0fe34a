"""Callback plugin deepops.cluster.preload: work done once, before Ansible forks its workers.

Ansible runs each task, for each host, in a worker process forked from the
controller's process, and a plugin is imported where it is first looked up.
A filter or action plugin that only the workers look up is therefore imported
again in every worker: Jinja resolves a collection filter by loading the
collection's filter files one after the other until one defines it, each
with the module_utils it imports. On a no-op deploy of the default virtual
cluster that was about a quarter of ansible-playbook's CPU time
(bench/RESULTS.md). Loaded here, at the start of the run, every worker
inherits them.

It also sets up the module payloads (plugin_utils/module_payloads.py): built
once per version of the module code instead of once per run, and sent with
their bytecode so that a host does not compile Ansible's module_utils again
for every module it runs. And it keeps compiled templates between runs
(plugin_utils/template_cache.py), which every worker would otherwise compile
again.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Loads the collection's plugins and sets up module payloads once, before Ansible forks its workers
description:
  - Imports every filter and action plugin of this collection into Ansible's plugin loaders when the run
    starts, so the worker processes that run the tasks inherit them instead of importing them again for
    each task and host.
  - Keeps the module payloads Ansible builds (AnsiballZ) in a directory that outlives the run, named by a
    fingerprint of ansible-core, Python and the module code of every collection, so a run reuses what an
    earlier run built and a changed module is built again.
  - Adds to each payload the bytecode of its Python files, compiled by the controller's Python, which a
    host with the same Python minor version loads instead of compiling the sources; any other host compiles
    them as before.
  - Looks up every builtin filter and test and every filter of this collection by name once, and answers
    later lookups of a name from that first one, so the workers do not search the plugin files again each
    time a template names a filter.
  - Keeps the code Jinja compiles from each template and expression in a directory that outlives the run,
    named by a fingerprint of ansible-core, Jinja, Python, the settings that change compilation and the
    filter and test plugins of every collection, so a worker loads it instead of compiling it again.
  - Reports nothing and changes no output. A plugin that fails to load is left alone here; the task that
    uses it reports the error as usual. Where ansible-core's internals are not as expected, payloads are
    built and sent as Ansible always does.
requirements:
  - enabled in the C(callbacks_enabled) setting of ansible.cfg, as the repository's ansible.cfg does
options:
  payload_cache_dir:
    description:
      - Where module payloads are kept between runs, one subdirectory per fingerprint; the four most
        recently used are kept, and any other used within the last day. An empty value builds them in
        each run, as Ansible does.
      - Default is C(deepops/ansiballz) in C($XDG_CACHE_HOME), or in C(~/.cache).
    type: str
    env:
      - name: DEEPOPS_PAYLOAD_CACHE_DIR
    ini:
      - section: callback_deepops_preload
        key: payload_cache_dir
  template_cache_dir:
    description:
      - Where compiled templates are kept between runs, one subdirectory per fingerprint; the four most
        recently used are kept, and any other used within the last day. An empty value compiles them
        where they are used, as Ansible does.
      - Default is C(deepops/templates) in C($XDG_CACHE_HOME), or in C(~/.cache).
    type: str
    env:
      - name: DEEPOPS_TEMPLATE_CACHE_DIR
    ini:
      - section: callback_deepops_preload
        key: template_cache_dir
  payload_bytecode:
    description:
      - Whether module payloads carry the bytecode of their Python files.
    type: bool
    default: true
    env:
      - name: DEEPOPS_PAYLOAD_BYTECODE
    ini:
      - section: callback_deepops_preload
        key: payload_bytecode
"""

import pkgutil
from importlib import import_module
from pathlib import Path
from typing import Any

import jinja2
import jinja2.filters
import jinja2.tests
from ansible import constants as C
from ansible.executor import module_common
from ansible.module_utils.ansible_release import __version__ as ansible_version
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import Jinja2Loader, PluginLoader, action_loader, filter_loader, test_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig
from ansible.utils.display import Display
from ansible_collections.deepops.cluster.plugins.plugin_utils import module_payloads, template_cache

display = Display()

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


# Jinja filters and tests resolved by name in this process, as (type, name): Ansible's lookup.
_RESOLVED: dict[tuple[str, str], Any] = {}


def remember_lookups() -> bool:
    """Answer a filter or test lookup by a name looked up before from that lookup; whether the hook is in place.

    Ansible resolves a filter by reading every filter file of its collection
    until one defines it, each time a template names it, and keeps nothing
    (its loader says so); Jinja's own filters (``length``, ``map``) are looked
    for among ansible.builtin's files first, found nowhere, every time. That
    was about a tenth of a worker's CPU on a no-op deploy. Within a run a name
    always resolves to the same plugin, or to none.
    """
    original = getattr(Jinja2Loader, "get_with_context", None)
    if original is None:
        return False
    if getattr(original, "remembers", False):
        return True

    def get_with_context(self, name, *args, **kwargs):
        if args or kwargs:
            return original(self, name, *args, **kwargs)
        key = (self.type, name)
        found = _RESOLVED.get(key)
        if found is None:
            found = _RESOLVED[key] = original(self, name)
        return found

    get_with_context.remembers = True
    Jinja2Loader.get_with_context = get_with_context
    return True


def resolve_jinja_plugins(collection: str) -> list[str]:
    """Look up every filter of the collection and every builtin filter and test once, here; the names looked up.

    The forks inherit the answers (remember_lookups). Builtin: Jinja's own and
    ansible.builtin's, by the names templates use.
    """
    names = {"filter": set(jinja2.filters.FILTERS), "test": set(jinja2.tests.TESTS)}
    for plugin_type, loader in (("filter", filter_loader), ("test", test_loader)):
        try:
            names[plugin_type].update(plugin.ansible_name for plugin in loader.all())
            names[plugin_type].update(name.removeprefix("ansible.builtin.") for name in list(names[plugin_type]))
        except Exception:  # pylint: disable=broad-exception-caught
            pass  # looked up where used instead
    namespace, name = collection.split(".")
    try:
        package = import_module(f"ansible_collections.{namespace}.{name}.plugins.filter")
        modules = [module.name for module in pkgutil.iter_modules(package.__path__)]
    except ImportError:
        modules = []
    for module in modules:
        try:
            functions = import_module(f"{package.__name__}.{module}").FilterModule().filters()
        except Exception:  # pylint: disable=broad-exception-caught
            continue  # the task that uses it reports why it does not load
        names["filter"].update(f"{collection}.{function}" for function in functions)
    looked_up = []
    for plugin_type, loader in (("filter", filter_loader), ("test", test_loader)):
        for plugin_name in sorted(names[plugin_type]):
            try:
                loader.get(plugin_name)
            except Exception:  # pylint: disable=broad-exception-caught
                continue  # the template that uses it reports why
            looked_up.append(f"{plugin_type}:{plugin_name}")
    return looked_up


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "deepops.cluster.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.preloaded = preload(collection_of(__name__))
        self.resolved = resolve_jinja_plugins(collection_of(__name__)) if remember_lookups() else []

    def set_options(self, *args: Any, **kwargs: Any) -> None:
        super().set_options(*args, **kwargs)
        set_up_payloads(self.get_option("payload_cache_dir"), self.get_option("payload_bytecode"))
        set_up_template_cache(self.get_option("template_cache_dir"))


def set_up_payloads(cache_dir: str | None, bytecode: bool) -> None:
    """Module payloads with bytecode and kept between runs, as asked (an empty CACHE_DIR: per run)."""
    bytecode = bytecode and module_payloads.send_bytecode(module_common)
    kept = None
    if cache_dir != "":
        key = module_payloads.fingerprint(AnsibleCollectionConfig.collection_paths, ansible_version)
        key += "-bytecode" if bytecode else "-source"
        try:
            kept = module_payloads.use_persistent_cache(
                C.DEFAULT_LOCAL_TMP, Path(cache_dir).expanduser() if cache_dir else module_payloads.DEFAULT_CACHE_DIR,
                key)
        except OSError as error:
            display.vvv(f"deepops.cluster.preload: cannot keep module payloads between runs: {error}")
    display.vvv(f"deepops.cluster.preload: module payloads {f'kept in {kept}' if kept else 'built in this run'}"
                f"{', with bytecode' if bytecode else ''}")


# Settings that change how Ansible parses or compiles a template (its _TemplateConfig).
_COMPILE_SETTINGS = ("DEFAULT_JINJA2_EXTENSIONS", "ALLOW_EMBEDDED_TEMPLATES", "ALLOW_BROKEN_CONDITIONALS",
                     "_TEMPLAR_SANDBOX_MODE")


def set_up_template_cache(cache_dir: str | None) -> None:
    """Compiled templates kept between runs, unless CACHE_DIR is empty."""
    if cache_dir == "":
        return
    settings = [ansible_version, jinja2.__version__]
    settings += [f"{name}={C.config.get_config_value(name)!r}" for name in _COMPILE_SETTINGS]
    key = template_cache.fingerprint(AnsibleCollectionConfig.collection_paths, settings)
    try:
        kept = template_cache.install(Path(cache_dir).expanduser() if cache_dir else template_cache.DEFAULT_CACHE_DIR,
                                      key)
    except OSError as error:
        kept = None
        display.vvv(f"deepops.cluster.preload: cannot keep compiled templates between runs: {error}")
    display.vvv(f"deepops.cluster.preload: compiled templates {f'kept in {kept}' if kept else 'not kept'}")
