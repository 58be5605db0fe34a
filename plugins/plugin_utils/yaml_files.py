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


# Limits that turn hostile input into a quick, clear error: an inventory is
# kilobytes, a few levels deep, with a handful of aliases. A 2 KB "billion
# laughs" alias bomb expands to 10^9 values; it is refused before expansion.
MAX_BYTES = 8 * 1024 * 1024
MAX_VALUES = 200_000  # values after every alias is expanded
MAX_DEPTH = 64


def load(path: Path) -> Any:
    """Parse one YAML file, or raise YamlFileError naming the line and column."""
    try:
        _check_size(path.stat().st_size)  # before reading it
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise YamlFileError(f"cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise YamlFileError(f"not UTF-8 text (byte {error.start})") from None
    return loads(text)


def loads(text: str) -> Any:
    """Parse YAML text with the limits above, or raise YamlFileError."""
    _check_size(len(text))
    if text.lstrip().startswith(VAULT_FILE_HEADER):
        return Vaulted(text)
    loader = _AnsibleSafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as error:
        raise YamlFileError(_describe(error)) from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as error:
        # ValueError/TypeError: e.g. unhashable mapping keys; RecursionError: absurd nesting.
        raise YamlFileError(f"not valid YAML: {error}") from None
    finally:
        loader.dispose()


def _check_size(size: int) -> None:
    if size > MAX_BYTES:
        raise YamlFileError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB; not an inventory or vars file")


def _check_node(root: yaml.Node) -> None:
    """Refuse duplicate keys, recursive aliases, alias bombs and absurd depth,
    from the node graph, before any value is built (so a bomb costs nothing)."""
    sizes: dict[int, int] = {}  # node id -> values it expands to
    depths: dict[int, int] = {}
    open_nodes: set[int] = set()

    def visit(node: yaml.Node) -> None:
        key = id(node)
        if key in sizes:
            return
        if key in open_nodes:
            raise YamlFileError(f"not valid YAML: {_at(node)}an alias refers to a value that contains it (a recursive alias)")
        open_nodes.add(key)
        children = _children(node)
        for child in children:
            visit(child)
        open_nodes.discard(key)
        sizes[key] = 1 + sum(sizes[id(child)] for child in children)
        depths[key] = 1 + max((depths[id(child)] for child in children), default=0)
        if sizes[key] > MAX_VALUES:
            raise YamlFileError(f"not valid YAML: {_at(node)}aliases expand to more than {MAX_VALUES} values (an alias bomb?)")
        if depths[key] > MAX_DEPTH:
            raise YamlFileError(f"not valid YAML: {_at(node)}values nest more than {MAX_DEPTH} levels deep")

    visit(root)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key_node, _value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                name = (key_node.tag, key_node.value)
                if name in seen:
                    first = seen[name].start_mark.line + 1
                    raise YamlFileError(f"not valid YAML: {_at(key_node)}duplicate key '{key_node.value}' (first on line {first})")
                seen[name] = key_node
        return [child for pair in node.value for child in pair]
    return []


def _at(node: yaml.Node) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""


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
