"""Entry playbooks: their shape (kubespray style) and an Ansible syntax check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from task_files import tasks_in

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "playbooks"
VALIDATION = "validate_inventory.yml"
# Groups that default to others, resolved once (imported right after VALIDATION).
GROUPS = "groups.yml"
BOILERPLATE = (VALIDATION, GROUPS)
# Entry points are the top-level playbooks (less the boilerplate every one of
# them imports first); playbooks/components/ holds the plays they import.
ENTRY_PLAYBOOKS = sorted(path.name for path in PLAYBOOKS.glob("*.yml"))
LIFECYCLE_PLAYBOOKS = [name for name in ENTRY_PLAYBOOKS if name not in BOILERPLATE]
IMPORT_KEYS = ("ansible.builtin.import_playbook", "import_playbook")

TINY_INVENTORY = """\
all:
  children:
    slurm_controller:
      hosts:
        ctl01: {ansible_host: 127.0.0.1}
    slurm_compute:
      hosts:
        gpu01: {ansible_host: 127.0.0.2}
"""


def _load(name: str) -> list:
    return yaml.safe_load((PLAYBOOKS / name).read_text())


def _import_target(item: dict) -> str | None:
    return next((item[key] for key in IMPORT_KEYS if key in item), None)


def test_site_is_an_entry_playbook():
    assert {"site.yml", "add_node.yml", "validate.yml"} <= set(LIFECYCLE_PLAYBOOKS)
    assert VALIDATION in ENTRY_PLAYBOOKS and GROUPS in ENTRY_PLAYBOOKS


@pytest.mark.parametrize("name", ENTRY_PLAYBOOKS)
def test_entry_playbook_holds_only_plays_and_imports(name):
    items = _load(name)
    assert isinstance(items, list) and items, f"{name}: not a list of plays"
    for item in items:
        assert isinstance(item, dict) and item.get("name"), f"{name}: every play and import is named: {item!r}"
        assert (_import_target(item) is None) != ("hosts" not in item), f"{name}: neither a play nor an import: {item}"
        if _import_target(item) is not None:
            assert set(item) <= {"name", "when", "tags", "vars", *IMPORT_KEYS}, f"{name}: logic around an import: {item}"


@pytest.mark.parametrize("name", LIFECYCLE_PLAYBOOKS)
def test_entry_playbook_validates_the_inventory_first_then_resolves_the_groups(name):
    first, second = _load(name)[:2]
    assert _import_target(first) == VALIDATION, f"{name}: the first item must import {VALIDATION}"
    assert _import_target(second) == GROUPS, f"{name}: the second item must import {GROUPS}"


def test_groups_play_always_runs_and_changes_nothing():
    (play,) = _load(GROUPS)
    assert play["gather_facts"] is False and "always" in play["tags"]
    # localhost first; with a --limit that leaves it out, the first host of the limit
    assert play["hosts"] == "localhost:all"
    for task in play["tasks"]:
        assert "ansible.builtin.add_host" in task and task["changed_when"] is False and task["run_once"] is True


def test_validation_play_runs_first_and_always():
    (play,) = _load(VALIDATION)
    # localhost:all with run_once: localhost when in the run, else the first host of
    # a --limit, so no limit skips it; its failure fails every host of the run.
    assert play["hosts"] == "localhost:all" and play["gather_facts"] is False
    assert "always" in play["tags"]
    assert [next(iter(k for k in task if k not in ("name", "run_once"))) for task in play["tasks"]] == [
        "deepops.cluster.inventory_check"]
    assert all(task["run_once"] is True for task in play["tasks"])


@pytest.mark.parametrize("name", ENTRY_PLAYBOOKS)
def test_imports_resolve(name):
    for item in _load(name):
        target = _import_target(item)
        if target is not None:
            assert (PLAYBOOKS / target).is_file(), f"{name}: imports missing {target}"


@pytest.mark.parametrize("name", LIFECYCLE_PLAYBOOKS)
def test_syntax_check(tmp_path, name):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(TINY_INVENTORY)
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i", str(inventory),
         str(PLAYBOOKS / name)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


COMPONENTS = sorted(path.name for path in (PLAYBOOKS / "components").glob("*.yml"))


@pytest.mark.parametrize("name", COMPONENTS)
def test_fact_gathering_plays_carry_no_play_tags(name):
    """A play's tags also tag its fact gathering: `deploy --tags X` would then run
    the roles' always-tagged preflights without facts. Tags go on roles and tasks."""
    plays = yaml.safe_load((PLAYBOOKS / "components" / name).read_text()) or []
    for play in plays:
        if play.get("gather_facts", True):
            assert "tags" not in play, f"{name}: play {play.get('name')!r} gathers facts and has play tags"


DYNAMIC_INCLUDES = ("ansible.builtin.include_tasks", "ansible.builtin.include_role")


def _dynamic_includes() -> list[tuple[str, dict]]:
    files = sorted((REPO / "roles").glob("*/tasks/*.yml")) + sorted(PLAYBOOKS.rglob("*.yml"))
    return [
        (f"{path.relative_to(REPO)}: {task.get('name')}", task)
        for path in files
        for task in tasks_in(yaml.safe_load(path.read_text()))
        if any(key in task for key in DYNAMIC_INCLUDES)
    ]


def test_a_tagged_dynamic_include_applies_its_tags_to_what_it_includes():
    # Tags on include_tasks/include_role tag the include only: without
    # apply, `--tags slurm_install` runs the include and none of its tasks.
    # `always` is the exception: the included tasks keep their own tags.
    wrong = []
    for where, task in _dynamic_includes():
        tags = task.get("tags") or []
        tags = [tags] if isinstance(tags, str) else tags
        if not tags or "always" in tags:
            continue
        arguments = next(task[key] for key in DYNAMIC_INCLUDES if key in task)
        applied = ((arguments.get("apply") or {}) if isinstance(arguments, dict) else {}).get("tags") or []
        if sorted(applied) != sorted(tags):
            wrong.append(f"{where}: tags {tags}, apply tags {applied}")
    assert not wrong, wrong


# --------------------------------------------------------------------------
# role imports: validated once, by the validation play, not per role and host

ROLE_IMPORTS = ("ansible.builtin.import_role", "ansible.builtin.include_role")
PLAYBOOK_FILES = sorted(PLAYBOOKS.rglob("*.yml"))


def _role_imports(path: Path) -> list[tuple[str, dict, dict]]:
    """(where, the import's arguments, the task) for every import_role/include_role in ``path``."""
    return [
        (f"{path.relative_to(REPO)}: {task.get('name')}", task[key], task)
        for task in tasks_in(yaml.safe_load(path.read_text()))
        for key in ROLE_IMPORTS if key in task
    ]


@pytest.mark.parametrize("path", PLAYBOOK_FILES, ids=lambda path: str(path.relative_to(PLAYBOOKS)))
def test_plays_import_their_roles_without_the_per_role_check(path):
    """Ansible checks a play's roles: entries always, with a task per role and host; the
    validation play (which every entry playbook imports first) checks every role's
    variables once instead, so roles are imported with rolespec_validate: false."""
    plays = yaml.safe_load(path.read_text()) or []
    assert not [play.get("name") for play in plays if "roles" in play], f"{path.name}: plays with roles:"
    unchecked = [where for where, arguments, _task in _role_imports(path) if arguments.get("rolespec_validate") is not False]
    assert not unchecked, f"role imports without rolespec_validate: false: {unchecked}"


# Roles importing another role (or a part of themselves), run from deepops' playbooks.
def test_roles_import_roles_without_the_per_role_check():
    unchecked = [
        where
        for path in sorted((REPO / "roles").glob("*/tasks/*.yml"))
        for where, arguments, _task in _role_imports(path)
        if arguments.get("rolespec_validate") is not False
    ]
    assert not unchecked, f"role imports without rolespec_validate: false: {unchecked}"


def _role_options(role: str) -> dict[str, list[dict]]:
    """Every option of every entry point of ``role``'s argument specs, by name."""
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    found: dict[str, list[dict]] = {}
    for entry in specs.values():
        for name, option in (entry.get("options") or {}).items():
            found.setdefault(name, []).append(option)
    return found


def test_the_vars_passed_to_role_imports_are_options_of_the_role():
    """What Ansible's per-role check would catch in our own playbooks: a public
    variable passed to an import is one of the role's options, and a literal value
    fits it (internal _<role>_* variables are the role's own business)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    # (where, the options it may set, what they belong to, its vars): each role import's
    # vars, less internal _<role>_* ones; each import_playbook's vars, which reach every
    # role of the imported plays, less the playbooks' own deepops_* ones.
    passed = [
        (where, _role_options(arguments["name"]), f"role {arguments['name']}",
         {name: value for name, value in (task.get("vars") or {}).items() if not name.startswith("_")})
        for path in PLAYBOOK_FILES for where, arguments, task in _role_imports(path)
    ] + [
        (f"{name}: {item['name']}", _all_options(), "any role",
         {variable: value for variable, value in item["vars"].items() if not variable.startswith("deepops_")})
        for name in ENTRY_PLAYBOOKS for item in _load(name) if _import_target(item) and item.get("vars")
    ]
    problems = []
    for where, options, owner, variables in passed:
        for name, value in variables.items():
            if name not in options:
                problems.append(f"{where}: {name} is not an option of {owner}")
            elif not (isinstance(value, str) and "{{" in value):  # else the caller's own variable, rendered at run time
                problems += [f"{where}: {message}" for option in options[name]
                             for message in ArgumentSpecValidator({name: option}).validate({name: value}).error_messages]
    assert sum(len(variables) for *_, variables in passed) >= 5 and not problems, problems


def _all_options() -> dict[str, list[dict]]:
    roles = sorted(path.parent.parent.name for path in (REPO / "roles").glob("*/meta/argument_specs.yml"))
    found: dict[str, list[dict]] = {}
    for role in roles:
        for name, options in _role_options(role).items():
            found.setdefault(name, []).extend(options)
    return found
