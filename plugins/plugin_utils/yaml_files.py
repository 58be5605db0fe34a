"""Read user YAML strictly enough to report broken files with a line number.

Ansible's inventory machinery only warns about files it cannot parse, so
deepops reads every inventory and vars file itself first. The loader knows
Ansible's ``!vault`` and ``!unsafe`` tags, so valid Ansible input is never
reported as broken.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

VAULT_FILE_HEADER = "$ANSIBLE_VAULT;"


@dataclass(frozen=True)
class Vaulted:
    """A value encrypted with Ansible Vault: present, but not checkable."""

    ciphertext: str


class _AnsibleSafeLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    pass


def _construct_vault(loader: yaml.SafeLoader, node: yaml.Node) -> Vaulted:
    return Vaulted(str(loader.construct_scalar(node)))  # type: ignore[arg-type]


def _construct_unsafe(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return str(loader.construct_scalar(node))
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


_AnsibleSafeLoader.add_constructor("!vault", _construct_vault)
_AnsibleSafeLoader.add_constructor("!vault-encrypted", _construct_vault)
_AnsibleSafeLoader.add_constructor("!unsafe", _construct_unsafe)


class YamlFileError(Exception):
    """A file that cannot be read or is not valid YAML; str() is the user message."""


def load(path: Path) -> Any:
    """Parse one YAML file, or raise YamlFileError naming the line and column."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise YamlFileError(f"cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise YamlFileError(f"not UTF-8 text (byte {error.start})") from None
    if text.lstrip().startswith(VAULT_FILE_HEADER):
        return Vaulted(text)
    try:
        return yaml.load(text, Loader=_AnsibleSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        raise YamlFileError(_describe(error)) from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as error:
        # ValueError/TypeError: e.g. unhashable mapping keys; RecursionError: absurd nesting.
        raise YamlFileError(f"not valid YAML: {error}") from None


def _describe(error: yaml.MarkedYAMLError) -> str:
    mark = error.problem_mark or error.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    what = " ".join(part for part in (error.context, error.problem) if part)
    return f"not valid YAML: {where}{what}".rstrip(": ")


def is_opaque(value: Any) -> bool:
    """True for values only known at run time: Jinja templates and vaulted data."""
    if isinstance(value, Vaulted):
        return True
    return isinstance(value, str) and ("{{" in value or "{%" in value)
