"""Read an inventory and its group_vars/host_vars as files, before Ansible does.

This layer knows where each variable is *defined* (which file, which group or
host), so a problem is reported once where it can be fixed, not once per host
that inherits it. It mirrors what Ansible reads: the YAML inventory plugin's
structure, and the ``host_group_vars`` plugin's file lookup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils import suggest, yaml_files
from ansible_collections.deepops.cluster.plugins.plugin_utils.problems import Problem
from ansible_collections.deepops.cluster.plugins.plugin_utils.schema import type_name

GROUP_SECTIONS = ("hosts", "children", "vars")
# Ansible's C.YAML_FILENAME_EXTENSIONS, in the order its loader tries them.
VARS_EXTENSIONS = (".yml", ".yaml", ".json")
# Deeper nesting than this is a mistake (or a recursive YAML alias), not a cluster.
MAX_GROUP_DEPTH = 32
INI_HINT = "INI inventories are not supported; convert it with: ansible-inventory -i {path} --list --yaml"
_INI_SECTION = re.compile(r"^\[[A-Za-z0-9_:-]+\]\s*$")


@dataclass(frozen=True)
class Definition:
    """Variables as written in one place: inline in the inventory or a vars file."""

    file: str
    scope: str  # "group slurm_compute" or "host gpu01"
    variables: Mapping[Any, Any]


@dataclass
class VarsFiles:
    """group_vars/<name> or host_vars/<name>: the files Ansible reads, merged in order."""

    kind: str  # "group" or "host"
    name: str
    files: list[Path]
    merged: dict[Any, Any] = field(default_factory=dict)


@dataclass
class InventoryFiles:
    """Everything read from disk, and what was wrong with it."""

    path: Path
    data: Any = None
    definitions: list[Definition] = field(default_factory=list)
    group_vars: dict[str, VarsFiles] = field(default_factory=dict)
    host_vars: dict[str, VarsFiles] = field(default_factory=dict)
    group_names: set[str] = field(default_factory=set)
    host_patterns: list[str] = field(default_factory=list)  # as written: 'gpu[01:99]', 'ctl01:2222'
    problems: list[Problem] = field(default_factory=list)


def read(path: Path) -> InventoryFiles:
    """Parse the inventory file and every vars file beside it."""
    result = InventoryFiles(path=path)
    _read_inventory(result)
    for kind, directory, found in (
        ("group", path.parent / "group_vars", result.group_vars),
        ("host", path.parent / "host_vars", result.host_vars),
    ):
        found.update(_read_vars_dir(kind, directory, result))
    return result


# --------------------------------------------------------------------------
# the inventory file


def _read_inventory(result: InventoryFiles) -> None:
    file = str(result.path)
    try:
        data = yaml_files.load(result.path)
    except yaml_files.YamlFileError as error:
        hint = f" ({INI_HINT.format(path=file)})" if _looks_like_ini(result.path) else ""
        result.problems.append(Problem(file, "", "", f"{error}{hint}"))
        return
    example = "expected a YAML mapping of groups, such as 'all: {children: {slurm_controller: ..., slurm_compute: ...}}'"
    if data is None:
        result.problems.append(Problem(file, "", "", f"the file is empty: {example}"))
    elif isinstance(data, yaml_files.Vaulted):
        result.problems.append(Problem(file, "", "", "the inventory is vault-encrypted; encrypt single values instead"))
    elif not isinstance(data, dict):
        hint = f" ({INI_HINT.format(path=file)})" if _looks_like_ini(result.path) else ""
        result.problems.append(Problem(file, "", "", f"{example}; found {_kind(data)}{hint}"))
    else:
        result.data = data
        for name, group_data in data.items():
            _walk_group(result, name, group_data, depth=0)


def _looks_like_ini(path: Path) -> bool:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return False
    return any(_INI_SECTION.match(line) for line in lines)


def _walk_group(result: InventoryFiles, name: Any, data: Any, depth: int) -> None:
    file = str(result.path)
    if not isinstance(name, str) or not name:
        result.problems.append(Problem(file, "", "", f"group name {name!r} must be non-empty text"))
        return
    scope = f"group {name}"
    if depth > MAX_GROUP_DEPTH:
        result.problems.append(Problem(file, scope, "", f"groups nest more than {MAX_GROUP_DEPTH} deep"))
        return
    result.group_names.add(name)
    if data is None:
        return
    if not isinstance(data, dict):
        result.problems.append(Problem(file, scope, "", f"expected a mapping with hosts, children or vars; found {_kind(data)}"))
        return
    for key, section in data.items():
        if key not in GROUP_SECTIONS:
            hint = suggest.did_you_mean(str(key), GROUP_SECTIONS) or " (a group holds only hosts, children and vars)"
            result.problems.append(Problem(file, scope, str(key), f"unexpected key '{key}'{hint}"))
            continue
        if section is None:
            continue
        if isinstance(section, str) and key != "vars":
            section = {section: None}  # Ansible accepts 'hosts: gpu01' for one host
        if not isinstance(section, dict):
            result.problems.append(Problem(file, scope, key, f"expected a mapping, found {_kind(section)}"))
            continue
        if key == "vars":
            result.definitions.append(Definition(file, scope, section))
        elif key == "children":
            for child, child_data in section.items():
                _walk_group(result, child, child_data, depth + 1)
        else:
            _walk_hosts(result, scope, section)


def _walk_hosts(result: InventoryFiles, group_scope: str, hosts: dict[Any, Any]) -> None:
    file = str(result.path)
    for pattern, host_vars in hosts.items():
        if not isinstance(pattern, str) or not pattern.strip():
            result.problems.append(Problem(file, group_scope, "hosts", f"host name {pattern!r} must be non-empty text"))
            continue
        result.host_patterns.append(pattern)
        if host_vars is None:
            continue
        if not isinstance(host_vars, dict):
            result.problems.append(
                Problem(file, f"host {pattern}", "", f"expected a mapping of variables, found {_kind(host_vars)}")
            )
            continue
        result.definitions.append(Definition(file, f"host {pattern}", host_vars))


# --------------------------------------------------------------------------
# group_vars/ and host_vars/


def _read_vars_dir(kind: str, directory: Path, result: InventoryFiles) -> dict[str, VarsFiles]:
    if not directory.is_dir():
        return {}
    found: dict[str, VarsFiles] = {}
    try:
        names = sorted(_entity_names(directory))
    except OSError as error:
        result.problems.append(Problem(str(directory), "", "", f"cannot read: {error.strerror}"))
        return found
    for name in names:
        try:
            files, shadowed = _lookup(directory, name)
        except OSError as error:
            result.problems.append(Problem(str(directory / name), f"{kind} {name}", "", f"cannot read: {error.strerror}"))
            continue
        for path in shadowed:
            result.problems.append(
                Problem(str(path), f"{kind} {name}", "", f"ignored by Ansible, which reads {files[0] if files else directory / name} instead; merge the two")
            )
        entry = VarsFiles(kind=kind, name=name, files=files)
        for path in files:
            variables = _read_vars_file(path, kind, name, result)
            if variables:
                entry.merged.update(variables)
                result.definitions.append(Definition(str(path), f"{kind} {name}", variables))
        found[name] = entry
    return found


def _entity_names(directory: Path) -> set[str]:
    names = set()
    for entry in directory.iterdir():
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        stem, suffix = entry.stem, entry.suffix
        if entry.is_dir() and not suffix:
            names.add(entry.name)
        elif entry.is_file():
            if not suffix:
                names.add(entry.name)
            elif suffix in VARS_EXTENSIONS:
                names.add(stem)
    return names


def _lookup(directory: Path, name: str) -> tuple[list[Path], list[Path]]:
    """Ansible's find_vars_files: the first of name, name.yml, name.yaml, name.json wins.

    Returns the files Ansible reads and the ones it silently ignores.
    """
    candidates = [directory / name] + [directory / f"{name}{extension}" for extension in VARS_EXTENSIONS]
    existing = [candidate for candidate in candidates if candidate.exists()]
    if not existing:
        return [], []
    winner, shadowed = existing[0], existing[1:]
    files = sorted(_dir_files(winner)) if winner.is_dir() else [winner]
    return files, shadowed


def _dir_files(directory: Path) -> list[Path]:
    files = []
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        if entry.is_dir() and not entry.suffix:
            files.extend(_dir_files(entry))
        elif entry.is_file() and (not entry.suffix or entry.suffix in VARS_EXTENSIONS):
            files.append(entry)
    return files


def _read_vars_file(path: Path, kind: str, name: str, result: InventoryFiles) -> dict[Any, Any]:
    try:
        data = yaml_files.load(path)
    except yaml_files.YamlFileError as error:
        result.problems.append(Problem(str(path), f"{kind} {name}", "", str(error)))
        return {}
    if data is None or isinstance(data, yaml_files.Vaulted):
        return {}  # an empty file, or a vaulted one deepops cannot read without the password
    if not isinstance(data, dict):
        result.problems.append(Problem(str(path), f"{kind} {name}", "", f"expected a mapping of variables, found {_kind(data)}"))
        return {}
    return data


def _kind(value: Any) -> str:
    return {"list": "a list", "dict": "a mapping", "str": "text", "null": "nothing"}.get(type_name(value), type_name(value))
