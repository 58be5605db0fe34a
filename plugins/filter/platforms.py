"""Jinja filter over deepops' table of supported operating systems
(``plugins/module_utils/platforms.py``), the one ``deepops check`` applies too.

- ``ansible_facts | deepops.cluster.os_support_problems`` -> [] on a supported
  release, else one message naming the host's OS and the supported ones.
  Reads the facts distribution, distribution_version and distribution_release
  (gather_subset min has them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.deepops.cluster.plugins.module_utils import platforms


def os_support_problems(facts: Any) -> list[str]:
    if not isinstance(facts, Mapping) or "distribution" not in facts:
        raise AnsibleFilterError("os_support_problems expects ansible_facts with the distribution facts (gather_facts)")
    return platforms.support_problems(
        facts.get("distribution"), facts.get("distribution_version"), facts.get("distribution_release")
    )


class FilterModule:
    """deepops supported-OS filter."""

    def filters(self) -> dict[str, Any]:
        return {"os_support_problems": os_support_problems}
