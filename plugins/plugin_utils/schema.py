"""The variables deepops knows, and type checks for values users give them.

The single source of truth is each role's ``meta/argument_specs.yml`` (all
entry points), plus a small built-in table of Ansible connection variables and
deepops-wide switches that no role owns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import suggest, value_rules, yaml_files
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import BrokenContent

# argument_specs types that deepops checks; anything else is accepted as is.
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "path": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
}


@dataclass(frozen=True)
class VarSpec:
    """What one variable (or sub-option) accepts, as argument_specs declares it."""

    name: str
    type: str = "raw"
    elements: str | None = None
    choices: tuple[Any, ...] = ()
    options: Mapping[str, VarSpec] = field(default_factory=dict)
    required: bool = False
    default: Any = None
    description: str = ""
    owner: str = ""  # role name, or "ansible"/"deepops" for the built-ins


def _builtin(owner: str, table: dict[str, str]) -> dict[str, VarSpec]:
    return {name: VarSpec(name=name, type=type_, owner=owner) for name, type_ in table.items()}


# Connection and behaviour variables Ansible reads from the inventory. Listed in
# full so that e.g. ansible_ssh_user is not "corrected" to ansible_user.
ANSIBLE_VARIABLES = _builtin(
    "ansible",
    {
        "ansible_host": "str",
        "ansible_port": "int",
        "ansible_user": "str",
        "ansible_password": "str",
        "ansible_connection": "str",
        "ansible_ssh_host": "str",
        "ansible_ssh_port": "int",
        "ansible_ssh_user": "str",
        "ansible_ssh_pass": "str",
        "ansible_ssh_password": "str",
        "ansible_ssh_private_key_file": "path",
        "ansible_private_key_file": "path",
        "ansible_ssh_common_args": "str",
        "ansible_ssh_extra_args": "str",
        "ansible_sftp_extra_args": "str",
        "ansible_scp_extra_args": "str",
        "ansible_ssh_executable": "str",
        "ansible_ssh_pipelining": "bool",
        "ansible_ssh_retries": "int",
        "ansible_ssh_timeout": "int",
        "ansible_ssh_transfer_method": "str",
        "ansible_pipelining": "bool",
        "ansible_timeout": "int",
        "ansible_become": "bool",
        "ansible_become_method": "str",
        "ansible_become_user": "str",
        "ansible_become_password": "str",
        "ansible_become_pass": "str",
        "ansible_become_exe": "str",
        "ansible_become_flags": "str",
        "ansible_shell_type": "str",
        "ansible_shell_executable": "str",
        "ansible_python_interpreter": "str",
        "ansible_remote_tmp": "str",
        "ansible_host_key_checking": "bool",
    },
)

DEEPOPS_VARIABLES = _builtin("deepops", {"deepops_virtual": "bool"})


def default_roles_dir() -> Path:
    """This collection's roles/ directory (tests replace this function)."""
    return Path(__file__).resolve().parents[2] / "roles"


def known_variables(roles_dir: Path | None = None) -> dict[str, VarSpec]:
    """Every variable deepops knows: built-ins, then each role's argument specs."""
    return _known_variables(Path(roles_dir) if roles_dir is not None else default_roles_dir())


@cache
def _known_variables(roles_dir: Path) -> dict[str, VarSpec]:
    known = {**ANSIBLE_VARIABLES, **DEEPOPS_VARIABLES}
    for role_name, specs in load_role_specs(roles_dir).items():
        for name, spec in specs.items():
            known.setdefault(name, spec)
    return known


def load_role_specs(roles_dir: Path) -> dict[str, dict[str, VarSpec]]:
    """role name -> its variables, merged over all entry points (main first)."""
    result: dict[str, dict[str, VarSpec]] = {}
    for role_name, _entry_name, options in _entry_points(roles_dir):
        variables = result.setdefault(role_name, {})
        for name, option in _parse_options(options, role_name).items():
            variables.setdefault(name, option)
    return result


def option_specs(roles_dir: Path | None = None) -> dict[str, tuple[dict[str, Any], ...]]:
    """variable -> its option specs as the roles' entry points declare them, in
    Ansible's own format (what ArgumentSpecValidator takes), each distinct one once."""
    return _option_specs(Path(roles_dir) if roles_dir is not None else default_roles_dir())


@cache
def _option_specs(roles_dir: Path) -> dict[str, tuple[dict[str, Any], ...]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for _role_name, _entry_name, options in _entry_points(roles_dir):
        for name, option in options.items():
            declared = found.setdefault(str(name), [])
            if isinstance(option, dict) and option not in declared:
                declared.append(option)
    return {name: tuple(declared) for name, declared in found.items()}


def _entry_points(roles_dir: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(role, entry point, options) of every role's argument specs, each role's main first:
    the one reader of meta/argument_specs.yml."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    if not roles_dir.is_dir():
        return found
    for spec_file in sorted(roles_dir.glob("*/meta/argument_specs.y*ml")):
        role_name = spec_file.parent.parent.name
        try:
            document = yaml_files.load(spec_file)
        except yaml_files.YamlFileError as error:
            raise BrokenContent(f"role {role_name}: {spec_file}: {error} (a defect in deepops, not in your input)") from None
        entry_points = document.get("argument_specs") if isinstance(document, dict) else None
        if not isinstance(entry_points, dict):
            continue
        for entry_name, entry in sorted(entry_points.items(), key=lambda item: item[0] != "main"):
            options = entry.get("options") if isinstance(entry, dict) else None
            found.append((role_name, str(entry_name), options if isinstance(options, dict) else {}))
    return found


def _parse_options(options: Any, owner: str) -> dict[str, VarSpec]:
    if not isinstance(options, dict):
        return {}
    parsed = {}
    for name, option in options.items():
        option = option if isinstance(option, dict) else {}
        description = option.get("description", "")
        if isinstance(description, list):
            description = " ".join(str(line) for line in description)
        choices = option.get("choices") or ()
        parsed[str(name)] = VarSpec(
            name=str(name),
            type=str(option.get("type", "str")),
            elements=option.get("elements"),
            choices=tuple(choices) if isinstance(choices, list) else (),
            options=_parse_options(option.get("options"), owner),
            required=bool(option.get("required", False)),
            default=option.get("default"),
            description=str(description).strip(),
            owner=owner,
        )
    return parsed


# --------------------------------------------------------------------------
# checking values


def type_name(value: Any) -> str:
    """The YAML-ish name users recognise: str, int, bool, list, dict, null."""
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(
        type(value), type(value).__name__
    )


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _matches(type_: str, value: Any) -> bool:
    accepted = _PYTHON_TYPES.get(type_)
    if accepted is None:  # raw, or a type deepops does not check
        return True
    if isinstance(value, bool) and bool not in accepted:
        return False  # bool is an int subclass; yes/no is not a number
    return isinstance(value, accepted)


def check_value(spec: VarSpec, value: Any) -> list[str]:
    """Messages for what is wrong with ``value`` (empty when it fits ``spec``)."""
    if yaml_files.is_opaque(value):
        return []
    if value is None and not spec.required:
        return []  # YAML 'key:' with no value: Ansible passes None, roles treat it as unset
    if not _matches(spec.type, value):
        return [f"expected {spec.type}, found {type_name(value)} ({_show(value)})"]
    problems: list[str] = []
    if spec.type == "list":
        element_spec = VarSpec(name=spec.name, type=spec.elements or "raw", choices=spec.choices, options=spec.options)
        for index, element in enumerate(value):
            problems.extend(f"item {index + 1}: {message}" for message in check_value(element_spec, element))
        return problems
    if spec.choices and value not in spec.choices:
        allowed = ", ".join(str(choice) for choice in spec.choices)
        problems.append(f"expected one of {allowed}, found {_show(value)}")
    if spec.type == "dict" and spec.options:
        problems.extend(_check_suboptions(spec.options, value))
    return problems


def _check_suboptions(options: Mapping[str, VarSpec], value: Mapping[Any, Any]) -> list[str]:
    problems = []
    for name, option in options.items():
        if option.required and name not in value:
            problems.append(f"missing required key '{name}'")
    for key, item in value.items():
        option = options.get(str(key))
        if option is None:
            hint = suggest.did_you_mean(str(key), options)
            if hint:
                problems.append(f"unknown key '{key}'{hint}")
            continue
        problems.extend(f"{key}: {message}" for message in check_value(option, item))
    return problems


def check_variables(variables: Mapping[Any, Any], known: Mapping[str, VarSpec]) -> list[tuple[str, str]]:
    """(key, message) for each defined variable that is mistyped or misspelled."""
    problems = []
    for key, value in variables.items():
        name = str(key)
        spec = known.get(name)
        if spec is None and not name.isidentifier():
            hint = suggest.did_you_mean(name, known) or " — use letters, digits and underscores"
            problems.append((name, f"'{name}' is not a valid variable name{hint}"))
            continue
        if spec is None:
            match = suggest.closest(name, known)
            if match:
                problems.append((name, f"unknown variable '{name}' — did you mean {match}?"))
            continue
        problems.extend((name, message) for message in check_value(spec, value))
        problems.extend((name, message) for message in single_line_problems(value))
        problems.extend((name, message) for message in value_rules.check(name, value))
    return problems


# Line breaks (str.splitlines() knows more than \n) and other control characters.
_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def single_line_problems(value: Any, where: str = "") -> list[str]:
    """Every text in a roles' variable (nested ones included) is one line
    without control characters: the roles write these values into config files
    and command lines, where a newline would add lines of the writer's choosing."""
    if yaml_files.is_opaque(value):
        return []
    if isinstance(value, str):
        found = _BREAKS.search(value)
        if found:
            # Where, not what: the value may be a password.
            return [f"{where}must be one line without control characters, found {found.group()!r} at character {found.start() + 1}"]
        return []
    if isinstance(value, Mapping):
        return [problem for key, item in value.items() for problem in single_line_problems(item, f"{where}{key}: ")]
    if isinstance(value, (list, tuple)):
        return [problem for index, item in enumerate(value)
                for problem in single_line_problems(item, f"{where}item {index + 1}: ")]
    return []
