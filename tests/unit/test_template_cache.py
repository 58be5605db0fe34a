"""Compiled templates kept between runs (plugins/plugin_utils/template_cache.py).

What matters: a template renders to the same value with the cache as without,
cold and warm, whatever Ansible compiles differently (backslash escaping,
``#jinja2:`` overrides, expressions and templates); a warm cache compiles
nothing; a bad entry is compiled again. The hook patches Ansible's Jinja
environment for the whole process, so each case runs in a fresh Python, as a
run of ansible-playbook would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ansible_collections.deepops.cluster.plugins.plugin_utils import template_cache

REPO = Path(__file__).resolve().parents[2]

# (how, source): rendered as a template, with and without backslash escaping, or evaluated.
CASES = [
    ("template", "{{ greeting }}, {{ names | join(', ') }}"),
    ("template", "{{ 'a\\nb' }}"),
    ("template_raw_backslashes", "{{ 'a\\nb' }}"),
    ("template", "#jinja2:variable_start_string:'[%', variable_end_string:'%]'\n[% greeting %] {{ greeting }}"),
    ("template", "{% for name in names %}{{ name | upper }};{% endfor %}"),
    ("template", "{{ {'path': '/etc/hosts'} | deepops.cluster.cluster_address | default('none') }}"),
    ("expression", "names | length > 1 and greeting is match('^h')"),
    ("conditional", "'a\\nb' | length == 4"),
    ("conditional", "greeting == 'hello'"),
]

_RENDER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from ansible.plugins.loader import init_plugin_loader
    init_plugin_loader([{collections!r}])
    from ansible._internal._templating._jinja_bits import AnsibleEnvironment
    from ansible.template import Templar, trust_as_template
    from ansible_collections.deepops.cluster.plugins.plugin_utils import template_cache

    compiled = []
    original = AnsibleEnvironment.compile
    def counting(self, source, *args, **kwargs):
        compiled.append(1)
        return original(self, source, *args, **kwargs)
    AnsibleEnvironment.compile = counting
    kept = template_cache.install(Path({cache_dir!r}), "key") if {cache_dir!r} else None

    templar = Templar(variables=dict(greeting="hello", names=["ann", "bo"]))
    results = []
    for how, source in {cases!r}:
        source = trust_as_template(source)
        if how == "template":
            value = templar.template(source)
        elif how == "template_raw_backslashes":
            value = templar.template(source, escape_backslashes=False)
        elif how == "expression":
            value = templar.evaluate_expression(source)
        else:
            value = templar.evaluate_conditional(source)
        results.append(value)
    print(json.dumps(dict(results=results, compiled=len(compiled), kept=str(kept) if kept else None)))
    """
)


def _render(cache_dir: Path | None, cases=CASES) -> dict:
    code = _RENDER.format(collections=str(REPO / "collections"), cache_dir=str(cache_dir) if cache_dir else "",
                          cases=cases)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_templates_render_alike_with_a_cold_and_a_warm_cache_and_a_warm_one_compiles_nothing(tmp_path):
    without = _render(None)
    cold = _render(tmp_path)
    warm = _render(tmp_path)

    assert cold["results"] == without["results"] == warm["results"]
    assert without["results"][1] != without["results"][2]  # backslash escaping changes the result, and is kept apart
    assert cold["compiled"] == without["compiled"] > 0
    assert warm["compiled"] == 0
    assert cold["kept"] == str(tmp_path / "key")
    assert len(list((tmp_path / "key").glob("*.code"))) == cold["compiled"]


def test_an_unreadable_entry_is_compiled_again_and_written_anew(tmp_path):
    cold = _render(tmp_path)
    entries = sorted((tmp_path / "key").glob("*.code"))
    entries[0].write_bytes(b"not marshal data")

    again = _render(tmp_path)

    assert again["results"] == cold["results"]
    assert again["compiled"] == 1
    assert _render(tmp_path)["compiled"] == 0


def test_a_template_that_does_not_compile_still_fails_as_without_the_cache(tmp_path):
    broken = [("template", "{{ greeting | no_such_filter_here }}")]
    code = _RENDER.format(collections=str(REPO / "collections"), cache_dir=str(tmp_path), cases=broken)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)

    assert done.returncode != 0
    assert "no_such_filter_here" in done.stderr
    assert not list((tmp_path / "key").glob("*.code"))


def test_without_the_expected_internals_nothing_is_patched(tmp_path, monkeypatch):
    monkeypatch.setattr(template_cache, "_internals", lambda: None)

    assert template_cache.install(tmp_path, "key") is None
    assert not (tmp_path / "key").exists()


def test_a_full_directory_is_started_again(tmp_path, monkeypatch):
    monkeypatch.setattr(template_cache, "MAX_ENTRIES", 3)
    for number in range(4):
        (tmp_path / f"{number}.code").write_bytes(b"x")
    template_cache._start_again_if_full(tmp_path)
    assert not list(tmp_path.iterdir())

    (tmp_path / "kept.code").write_bytes(b"x")
    template_cache._start_again_if_full(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["kept.code"]


def test_the_fingerprint_follows_filter_and_test_plugins_and_the_settings(tmp_path):
    collection = tmp_path / "ansible_collections" / "ns" / "checkout"
    for relative in ("plugins/filter/f.py", "plugins/test/t.py", "plugins/modules/m.py"):
        (collection / relative).parent.mkdir(parents=True, exist_ok=True)
        (collection / relative).write_text("x = 1\n")
    paths = [str(tmp_path)]
    first = template_cache.fingerprint(paths, ["2.19.0", "3.1.6"])

    assert template_cache.fingerprint(paths, ["2.19.0", "3.1.6"]) == first
    assert template_cache.fingerprint(paths, ["2.19.0", "3.1.7"]) != first
    (collection / "plugins/modules/m.py").write_text("changed = True\n")  # no filter or test
    assert template_cache.fingerprint(paths, ["2.19.0", "3.1.6"]) == first
    (collection / "plugins/test/t.py").write_text("changed = True\n")
    second = template_cache.fingerprint(paths, ["2.19.0", "3.1.6"])
    assert second != first
    (collection / "plugins/filter/f.py").write_text("changed = True\n")
    assert template_cache.fingerprint(paths, ["2.19.0", "3.1.6"]) not in (first, second)


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars:
    items: [1, 2, 3]
    total: "{{ items | sum }}"
  tasks:
    - ansible.builtin.debug:
        msg: "total {{ total }} of {{ items | length }}"
      when: total | int == 6 and items is iterable
"""


def test_ansible_playbook_keeps_compiled_templates_between_runs(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    cache_dir = tmp_path / "templates"
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "DEEPOPS_TEMPLATE_CACHE_DIR": str(cache_dir),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"), "DEEPOPS_PAYLOAD_CACHE_DIR": str(tmp_path / "payloads")}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
               "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml")]

    first = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=tmp_path)
    [kept] = cache_dir.iterdir()
    entries = {path.name: path.stat().st_mtime_ns for path in kept.iterdir()}
    second = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=tmp_path)

    assert '"msg": "total 6 of 3"' in first.stdout or "msg: total 6 of 3" in first.stdout
    assert second.stdout == first.stdout
    assert entries  # the task's condition and message, and the variable
    assert {path.name: path.stat().st_mtime_ns for path in kept.iterdir()} == entries  # nothing compiled again
