"""The preload callback: the collection's filter and action plugins are loaded before Ansible forks.

A worker process inherits its parent's loaders, so what matters is that after
the preload a lookup by name loads no plugin file; without it, it does. Each
case runs in a fresh Python with Ansible's collection loader set up from the
checkout, as ansible-playbook has it, so no other test's imports count.
"""

from __future__ import annotations

import configparser
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.deepops.cluster.plugins.callback import preload as callback

REPO = Path(__file__).resolve().parents[2]
# In the last filter file in name order: Jinja's loader tries every file before it.
LAST_FILTER = "deepops.cluster.validate_selected_checks"

_FRESH_ANSIBLE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from ansible.plugins.loader import PluginLoader, action_loader, filter_loader, init_plugin_loader
    init_plugin_loader([{collections!r}])
    from ansible_collections.deepops.cluster.plugins.callback import preload as callback

    loaded = []
    original = PluginLoader._load_module_source
    def recording(self, *, python_module_name, path):
        loaded.append(Path(path).stem)
        return original(self, python_module_name=python_module_name, path=path)
    PluginLoader._load_module_source = recording
    if {fail_on!r}:
        original_get = PluginLoader.get_with_context
        def failing(self, name, *args, **kwargs):
            if name == {fail_on!r}:
                raise ImportError("a missing dependency")
            return original_get(self, name, *args, **kwargs)
        PluginLoader.get_with_context = failing

    preloaded = callback.preload("deepops.cluster") if {preload!r} else []
    loaded_by_preload = list(loaded)
    loaded.clear()
    found = filter_loader.get({last_filter!r}) is not None
    found = found and action_loader.get("deepops.cluster.managed_files", class_only=True) is not None
    print(json.dumps(dict(preloaded=preloaded, loaded_by_preload=loaded_by_preload,
                          loaded_by_lookup=loaded, found=found)))
    """
)


def _fresh_ansible(preload: bool, fail_on: str = "") -> dict:
    code = _FRESH_ANSIBLE.format(collections=str(REPO / "collections"), preload=preload, fail_on=fail_on,
                                 last_filter=LAST_FILTER)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _plugin_files(plugin_type: str) -> list[str]:
    return sorted(path.stem for path in (REPO / "plugins" / plugin_type).glob("*.py") if path.stem != "__init__")


def test_preload_loads_every_filter_and_action_plugin_of_the_collection():
    run = _fresh_ansible(preload=True)

    expected = [f"filter:deepops.cluster.{stem}" for stem in _plugin_files("filter")]
    expected += [f"action:deepops.cluster.{stem}" for stem in _plugin_files("action")]
    assert run["preloaded"] == expected
    assert sorted(run["loaded_by_preload"]) == sorted(_plugin_files("filter") + _plugin_files("action"))


def _ours(loaded: list[str]) -> list[str]:
    """The collection's plugin files among those loaded (Ansible's own builtin filters aside)."""
    return sorted(set(loaded) & set(_plugin_files("filter") + _plugin_files("action")))


def test_after_the_preload_a_lookup_by_name_loads_none_of_the_collection_files():
    run = _fresh_ansible(preload=True)

    assert run["found"]
    assert _ours(run["loaded_by_lookup"]) == []


def test_without_the_preload_the_same_lookup_loads_every_filter_file():
    # The control: what each forked worker does on its own.
    run = _fresh_ansible(preload=False)

    assert run["found"]
    assert _ours(run["loaded_by_lookup"]) == sorted(_plugin_files("filter") + ["managed_files"])


def test_a_plugin_that_fails_to_load_is_left_to_the_task_that_uses_it():
    run = _fresh_ansible(preload=True, fail_on="deepops.cluster.hostlist")

    assert "filter:deepops.cluster.hostlist" not in run["preloaded"]
    assert "filter:deepops.cluster.validate" in run["preloaded"]


def test_the_callback_names_its_own_collection():
    assert callback.collection_of(callback.__name__) == "deepops.cluster"
    with pytest.raises(ValueError, match="not a module of a collection"):
        callback.collection_of("deepops_py.cli")


def test_the_repository_ansible_cfg_enables_it():
    config = configparser.ConfigParser()
    config.read(REPO / "ansible.cfg")
    enabled = [name.strip() for name in config["defaults"]["callbacks_enabled"].split(",")]
    assert "deepops.cluster.preload" in enabled



_LOOKUPS = textwrap.dedent(
    """
    import json
    from ansible.plugins.loader import Jinja2Loader, filter_loader, test_loader, init_plugin_loader
    init_plugin_loader([{collections!r}])
    from ansible_collections.deepops.cluster.plugins.callback import preload as callback

    def answers():
        found = [filter_loader.get(name) for name in {filters!r}] + [test_loader.get(name) for name in {tests!r}]
        return [None if plugin is None else plugin.ansible_name for plugin in found]

    by_ansible = answers()
    # Count what reaches Ansible's own lookup once the callback's hook is in front of it.
    calls = []
    ansible_lookup = Jinja2Loader.get_with_context
    def counting(self, name, *args, **kwargs):
        calls.append(name)
        return ansible_lookup(self, name, *args, **kwargs)
    Jinja2Loader.get_with_context = counting
    installed = callback.remember_lookups() and callback.remember_lookups()  # a second call adds nothing
    looked_up = callback.resolve_jinja_plugins("deepops.cluster")
    calls.clear()
    remembered = answers()
    print(json.dumps(dict(installed=installed, looked_up=looked_up, by_ansible=by_ansible, remembered=remembered,
                          calls=calls)))
    """
)

# Jinja's own (found in no plugin file), ansible.builtin's, the collection's, and a name nobody defines.
FILTERS = ["length", "bool", "ansible.builtin.to_json", "deepops.cluster.shared_mounts_plan", "no_such_filter"]
TESTS = ["defined", "ansible.builtin.match", "skipped"]


def test_after_the_preload_filter_and_test_lookups_are_answered_as_ansible_answers_them_without_asking_it():
    code = _LOOKUPS.format(collections=str(REPO / "collections"), filters=FILTERS, tests=TESTS)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    run = json.loads(done.stdout.strip().splitlines()[-1])

    assert run["installed"]
    assert run["remembered"] == run["by_ansible"]
    assert run["by_ansible"][0] is None and run["by_ansible"][3] == "deepops.cluster.shared_mounts_plan"
    # Every name but the one nobody defines was looked up at the preload; that one, once, now.
    assert run["calls"] == ["no_such_filter"]
    assert {"filter:length", "filter:deepops.cluster.shared_mounts_plan", "test:ansible.builtin.match"} <= set(
        run["looked_up"])
