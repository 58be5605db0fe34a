"""Documentation fragment: the attributes of a deepops module whose work is done by its
action plugin on the controller (check mode, no diff, no async, POSIX targets). A module
that differs declares only the attribute that differs."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  platform:
    platforms: posix
"""
