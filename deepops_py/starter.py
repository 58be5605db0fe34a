"""`deepops init`: write a commented starter inventory and group_vars.

group_vars/all.yml is generated from the roles' argument specs at write
time, so it documents exactly the variables this version of deepops knows.
"""

from __future__ import annotations

import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ansible_collections.deepops.cluster.plugins.plugin_utils import schema
from deepops_py.errors import DeepopsError, InputError

_DESCRIPTION_WIDTH = 76


def _template(name: str) -> str:
    return (resources.files("deepops_py") / "starter_files" / name).read_text(encoding="utf-8")


def write_starter_config(target: Path, *, force: bool, roles_dir: Path | None = None) -> list[Path]:
    """Write target/inventory.yml and target/group_vars/all.yml; return the paths written.

    Writes nothing if either file exists, unless ``force``.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise InputError(f"{target} exists and is not a directory")
    contents = {
        target / "inventory.yml": _template("inventory.yml"),
        target / "group_vars" / "all.yml": render_group_vars_all(roles_dir),
    }
    existing = [path for path in contents if path.exists()]
    if existing and not force:
        listed = ", ".join(str(path) for path in existing)
        raise InputError(f"Not overwriting existing files: {listed}. Use --force to replace them, or choose another directory.")
    written = []
    for path, text in contents.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            raise DeepopsError(f"cannot write {path}: {error.strerror}") from None
        written.append(path)
    return written


def render_group_vars_all(roles_dir: Path | None = None) -> str:
    """The starter group_vars/all.yml: every role variable, commented out at its default."""
    roles_dir = Path(roles_dir) if roles_dir is not None else schema.default_roles_dir()
    sections = [_template("group_vars_all_header.yml").rstrip("\n")]
    for role, variables in schema.load_role_specs(roles_dir).items():
        lines = [f"# --- role {role} (roles/{role}/meta/argument_specs.yml)"]
        for spec in variables.values():
            lines.extend(_describe(spec))
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def _describe(spec: schema.VarSpec) -> list[str]:
    kind = f"list of {spec.elements}" if spec.type == "list" and spec.elements else spec.type
    if spec.choices:
        kind += f", one of: {', '.join(str(choice) for choice in spec.choices)}"
    summary = f"{spec.name} ({kind}). {spec.description}".strip()
    lines = [f"#   {line}" for line in textwrap.wrap(summary, _DESCRIPTION_WIDTH)]
    if spec.default is None:
        lines.append(f"#   (no default{'; required' if spec.required else ''})")
    else:
        lines.append(f"# {spec.name}: {_one_line(spec.default)}")
    return lines


def _one_line(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()
