"""Every role's public interface: defaults/main.yml and meta/argument_specs.yml
agree, and the whole repository is lint clean.

Roles are discovered under roles/, so a role added later is covered without
touching this file. The lint tests are the slow part; run them alone
with ``pytest -k lint``, or skip them with ``-k 'not lint'``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if (path / "tasks" / "main.yml").is_file())
BIN = Path(sys.executable).parent


def _load(path: Path) -> dict:
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def _defaults(role: str) -> dict:
    return _load(REPO / "roles" / role / "defaults" / "main.yml")


def _options(role: str) -> dict:
    specs = _load(REPO / "roles" / role / "meta" / "argument_specs.yml")
    return ((specs.get("argument_specs") or {}).get("main") or {}).get("options") or {}


def test_roles_are_found():
    assert "common" in ROLES


@pytest.mark.parametrize("role", ROLES)
def test_specs_exist(role):
    assert (REPO / "roles" / role / "meta" / "argument_specs.yml").is_file(), f"{role}: meta/argument_specs.yml missing"


@pytest.mark.parametrize("role", ROLES)
def test_specs_and_defaults_name_the_same_variables(role):
    defaults, options = set(_defaults(role)), set(_options(role))
    assert defaults - options == set(), f"{role}: in defaults/main.yml but not documented in argument_specs"
    assert options - defaults == set(), f"{role}: documented in argument_specs but missing from defaults/main.yml"


@pytest.mark.parametrize("role", ROLES)
def test_spec_defaults_match(role):
    defaults, options = _defaults(role), _options(role)
    wrong = {
        name: (spec.get("default"), defaults[name])
        for name, spec in options.items()
        if name in defaults and spec.get("default") != defaults[name]
    }
    assert wrong == {}, f"{role}: argument_specs default differs from defaults/main.yml (spec, defaults)"


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_typed_and_described(role):
    problems = []
    for name, spec in _options(role).items():
        if "type" not in spec:
            problems.append(f"{name}: no type")
        if spec.get("type") == "list" and "elements" not in spec:
            problems.append(f"{name}: list without elements")
        if not spec.get("description"):
            problems.append(f"{name}: no description")
        # The role's one list may carry the role's own name (cluster_users).
        if not name.startswith(f"{role}_") and name != role:
            problems.append(f"{name}: not prefixed {role}_")
    assert problems == [], f"{role}: {problems}"


@pytest.mark.parametrize("role", ROLES)
def test_default_values_have_their_declared_type(role):
    types = {"str": str, "bool": bool, "int": int, "list": list, "dict": dict, "float": (int, float), "path": str}
    defaults = _defaults(role)
    wrong = {
        name: spec["type"]
        for name, spec in _options(role).items()
        if name in defaults and spec.get("type") in types and not isinstance(defaults[name], types[spec["type"]])
    }
    assert wrong == {}, f"{role}: defaults not of their declared type"


def _every_option(role: str) -> list[tuple[str, str, dict]]:
    specs = _load(REPO / "roles" / role / "meta" / "argument_specs.yml").get("argument_specs") or {}
    return [(entry_name, name, option) for entry_name, entry in specs.items()
            for name, option in ((entry or {}).get("options") or {}).items()]


@pytest.mark.parametrize("role", ROLES)
def test_default_values_pass_every_entry_points_spec(role):
    """What Ansible's per-role check did on every run for the roles' own defaults
    (choices, elements, sub-options too): deepops' playbooks no longer run it, and the
    run-start check resolves only the values users give."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    defaults = _defaults(role)
    problems = [
        f"{entry_name}: {message}"
        for entry_name, name, option in _every_option(role)
        if name in defaults and not (isinstance(defaults[name], str) and "{{" in defaults[name])
        for message in ArgumentSpecValidator({name: option}).validate({name: defaults[name]}).error_messages
    ]
    assert problems == [], f"{role}: defaults/main.yml values the argument specs refuse"


def _lint_env() -> dict[str, str]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, env=_lint_env(), capture_output=True, text=True, timeout=900)


@pytest.mark.lint
def test_lint_yamllint():
    result = _run([str(BIN / "yamllint"), "--strict", "."])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.lint
def test_lint_ansible_lint():
    result = _run([str(BIN / "ansible-lint"), "--offline", "--nocolor"])
    assert result.returncode == 0, result.stdout + result.stderr
