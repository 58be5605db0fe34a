"""Jinja filters for Slurm-style hostlists.

``hostlist_compress``, ``hostlist_expand`` and ``hostlist_group``.

The logic lives in ``plugins/module_utils/hostlist.py`` (pure Python, unit
tested, shared with the deepops command line).

Widths follow Slurm: ``gpu9,gpu10`` -> ``gpu[9-10]``, ``gpu09,gpu10`` ->
``gpu[09-10]``; ``hostlist_group`` turns ``{host: value}`` into
``[[hostlist, value], ...]`` for ``NodeName=`` lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.module_utils import hostlist as _hostlist


def hostlist_compress(hosts: str | Iterable[str]) -> str:
    """``['gpu01', 'gpu02', 'cpu1'] | hostlist_compress`` -> ``cpu1,gpu[01-02]``."""
    try:
        return _hostlist.hostlist_compress(hosts)
    except _hostlist.HostlistError as exc:
        raise AnsibleFilterError(f"hostlist_compress: {exc}") from exc


def hostlist_expand(expression: str | Iterable[str]) -> list[str]:
    """``'gpu[01-02],cpu1' | hostlist_expand`` -> ``['gpu01', 'gpu02', 'cpu1']``."""
    try:
        return _hostlist.hostlist_expand(expression)
    except _hostlist.HostlistError as exc:
        raise AnsibleFilterError(f"hostlist_expand: {exc}") from exc


def hostlist_group(mapping: Mapping[str, Any]) -> list[list[Any]]:
    """``{'gpu01': k, 'gpu02': k} | hostlist_group`` -> ``[['gpu[01-02]', k]]``."""
    if not isinstance(mapping, Mapping):
        raise AnsibleFilterError(
            f"hostlist_group expects a mapping of host to value, got {type(mapping).__name__}"
        )
    try:
        # Lists, not tuples: they template and serialise cleanly.
        return [[hosts, key] for hosts, key in _hostlist.hostlist_group(mapping)]
    except _hostlist.HostlistError as exc:
        raise AnsibleFilterError(f"hostlist_group: {exc}") from exc


class FilterModule:
    """Slurm-style hostlist filters."""

    def filters(self) -> dict[str, Any]:
        """Map filter names to functions."""
        return {
            "hostlist_compress": hostlist_compress,
            "hostlist_expand": hostlist_expand,
            "hostlist_group": hostlist_group,
        }
