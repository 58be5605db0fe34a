"""Slurm-style hostlists: ``gpu[01-03,05],cpu1`` <-> a list of host names.

Pure functions with no Ansible imports (the filter plugin and the Python
services both use them). Semantics follow Slurm's hostlist.c:

- a name splits into a prefix and its trailing digits; the digit string's
  width is kept, so ``gpu01`` and ``gpu1`` are different hosts;
- two numbers share a range only when printing both at the range's width
  gives back the original text: ``gpu9,gpu10`` -> ``gpu[9-10]`` and
  ``gpu09,gpu10`` -> ``gpu[09-10]``, but ``gpu9,gpu010`` -> ``gpu[9,010]``;
- expansion keeps the order written; compression sorts by prefix, then
  number, and drops duplicates, so its output is deterministic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["HostlistError", "hostlist_compress", "hostlist_expand", "hostlist_group"]

# Slurm refuses larger expansions too; this stops a typo such as
# ``node[0-99999999]`` from eating the controller's memory.
MAX_EXPANDED_HOSTS = 1_000_000

_NAME = re.compile(r"^(.*?)(\d*)$", re.DOTALL)
_FORBIDDEN = re.compile(r"[\s,\[\]]")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(ValueError):
    """A host name or hostlist expression Slurm would not accept."""


def hostlist_expand(expression: str | Iterable[str]) -> list[str]:
    """Expand ``gpu[01-03,05],cpu1`` into host names, in the order written.

    Several bracket groups in one name expand as a product, like Slurm's
    ``rack[1-2]-node[01-02]``. A list input is expanded item by item.
    """
    if not isinstance(expression, str):
        return [host for item in expression for host in hostlist_expand(str(item))]
    hosts: list[str] = []
    for item in _split_top_level(expression):
        hosts.extend(_expand_item(item))
        if len(hosts) > MAX_EXPANDED_HOSTS:
            raise HostlistError(
                f"hostlist {expression!r} expands to more than {MAX_EXPANDED_HOSTS} hosts"
            )
    return hosts


def hostlist_compress(hosts: str | Iterable[str]) -> str:
    """Compress host names into Slurm's ranged form, e.g. ``cpu1,gpu[01-03,05]``.

    A string input is read as a hostlist expression first, so compressing an
    already ranged string normalises it.
    """
    names = hostlist_expand(hosts) if isinstance(hosts, str) else [str(host) for host in hosts]
    numbered: dict[str, list[tuple[int, str]]] = {}
    plain: set[str] = set()
    for name in names:
        _check_name(name)
        prefix, digits = _NAME.match(name).groups()  # type: ignore[union-attr]  # always matches
        if digits:
            numbered.setdefault(prefix, []).append((int(digits), digits))
        else:
            plain.add(name)
    parts = [(name, 0, name) for name in plain]
    parts += [(prefix, 1, _format_prefix(prefix, items)) for prefix, items in numbered.items()]
    # A plain name equal to a prefix ("gpu" and "gpu1") sorts before it.
    return ",".join(text for _prefix, _number, text in sorted(parts))


def hostlist_group(mapping: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Group hosts that share a value: ``{host: key}`` -> ``[(hostlist, key)]``.

    Built for Slurm ``NodeName=`` lines, where identical nodes share one line.
    Keys may be dicts or lists (compared by content). Sorted by hostlist.
    """
    groups: dict[str, tuple[list[str], Any]] = {}
    for host, key in mapping.items():
        identity = json.dumps(key, sort_keys=True, default=str)
        groups.setdefault(identity, ([], key))[0].append(str(host))
    return sorted(
        ((hostlist_compress(hosts), key) for hosts, key in groups.values()),
        key=lambda pair: pair[0],
    )


def _check_name(name: str) -> None:
    if not name or _FORBIDDEN.search(name):
        raise HostlistError(
            f"{name!r} is not a host name (empty, or has a space, comma or bracket)"
        )


def _format_prefix(prefix: str, items: list[tuple[int, str]]) -> str:
    ranges = _build_ranges(items)
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return prefix + _format_number(ranges[0][0], ranges[0][2])
    body = ",".join(_format_range(low, high, width) for low, high, width in ranges)
    return f"{prefix}[{body}]"


def _build_ranges(items: list[tuple[int, str]]) -> list[tuple[int, int, int]]:
    """Merge (number, text) pairs into sorted (low, high, width) ranges.

    A range stays open while the next number could extend it; several can be
    open at once when widths mix (``gpu1,gpu01,gpu2,gpu02``).
    """
    ranges: list[list[int]] = []
    open_by_next: dict[int, list[list[int]]] = {}
    for number, digits in sorted(set(items), key=lambda item: (item[0], len(item[1]))):
        candidates = open_by_next.get(number, [])
        current = next((r for r in candidates if _format_number(number, r[2]) == digits), None)
        if current is None:
            current = [number, number, len(digits)]
            ranges.append(current)
        else:
            candidates.remove(current)
            current[1] = number
        open_by_next.setdefault(number + 1, []).append(current)
    return sorted((low, high, width) for low, high, width in ranges)


def _format_number(number: int, width: int) -> str:
    return str(number).zfill(width)


def _format_range(low: int, high: int, width: int) -> str:
    if low == high:
        return _format_number(low, width)
    return f"{_format_number(low, width)}-{_format_number(high, width)}"


def _split_top_level(expression: str) -> list[str]:
    """Split on commas and whitespace outside brackets."""
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for char in expression:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expression!r}")
        if depth == 0 and (char == "," or char.isspace()):
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in hostlist {expression!r}")
    items.append("".join(current))
    return [item for item in items if item]


def _expand_item(item: str) -> list[str]:
    """Expand one name with zero or more bracket groups (cartesian product)."""
    hosts = [""]
    for token in re.split(r"(\[[^\[\]]*\])", item):
        if "[" in token[1:] or "]" in token[:-1] or (token[:1] == "[") != (token[-1:] == "]"):
            raise HostlistError(f"nested or unbalanced brackets in {item!r}")
        values = _expand_group(token[1:-1], item) if token.startswith("[") else [token]
        hosts = [host + value for host in hosts for value in values]
        if len(hosts) > MAX_EXPANDED_HOSTS:
            raise HostlistError(f"{item!r} expands to more than {MAX_EXPANDED_HOSTS} hosts")
    return hosts


def _expand_group(group: str, item: str) -> list[str]:
    values: list[str] = []
    for part in group.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise HostlistError(f"bad range {part!r} in {item!r} (expected N or N-M)")
        low_text, high_text = match.group(1), match.group(2) or match.group(1)
        low, high = int(low_text), int(high_text)
        if high < low:
            raise HostlistError(f"range {part!r} in {item!r} runs backwards")
        if high - low >= MAX_EXPANDED_HOSTS:
            raise HostlistError(
                f"range {part!r} in {item!r} has more than {MAX_EXPANDED_HOSTS} hosts"
            )
        # The low end's width is the range's width, as in Slurm (08-10 -> 08,09,10).
        values.extend(_format_number(number, len(low_text)) for number in range(low, high + 1))
    return values
