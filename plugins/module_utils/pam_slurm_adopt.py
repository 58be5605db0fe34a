"""The sshd PAM lines that restrict compute nodes to users with a job there
(pam_slurm_adopt), and the pam_access table that lets root and the admins
past it.

The account stack deepops appends to ``/etc/pam.d/sshd`` (after the
distribution's own account modules, so pam_slurm_adopt is the last one, as
SchedMD's guide asks)::

    account [success=2 default=ignore] pam_succeed_if.so quiet uid eq 0
    account [success=1 default=ignore] pam_access.so nodefgroup accessfile=FILE
    -account required pam_slurm_adopt.so action_no_jobs=deny ...

- root (uid 0, how Ansible reaches the nodes) skips both other lines on the
  first one, which reads no file: whatever happens to FILE or to
  pam_slurm_adopt's package, root logs in.
- pam_access grants the users and ``(groups)`` of FILE (the deploy user
  always among them): success skips the pam_slurm_adopt line, so they log
  in whether or not slurmd answers. FILE ends with ``-:ALL:ALL``: for
  everyone else pam_access fails, which ``default=ignore`` passes over, and
  pam_slurm_adopt decides. A missing FILE fails the same way (only root is
  then sure to pass).
- With the module file missing (the package removed) the pam_slurm_adopt
  line fails without a log line (the leading ``-``): ordinary users are
  refused, the lines above still let root and the allowed users in.
  (Checked in a Debian 12 container with libpam-modules 1.5.2.)

Pure Python, no Ansible imports: unit tested, and imported by the filter
plugin ``plugins/filter/pam_slurm_adopt.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# Names a pam_access table can hold: no blanks, colons, commas or parentheses
# (its own syntax), nor a leading + - @ (netgroups and rule signs).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?")
_OPTION_KEY = re.compile(r"[a-z][a-z0-9_]{0,63}")
_OPTION_VALUE = re.compile(r"[A-Za-z0-9_.,/:-]{1,256}")

# The users pam_slurm_adopt never applies to, whatever the inventory says.
ALWAYS_ALLOWED = ("root",)

# pam_slurm_adopt's arguments deepops sets (its own defaults, spelled out so
# the PAM file says what it does); slurm_pam_adopt_options overrides them.
#   action_no_jobs=deny        no job of the user on this node: refused
#   action_unknown=newest      jobs but no way to tell which one: the newest
#   action_adopt_failure=allow a job, but adoption into it failed: let in
#   action_generic_failure=ignore  slurmd unreachable or another error: the
#                              module says nothing, the rest of the stack decides
DEFAULT_OPTIONS = {
    "action_no_jobs": "deny",
    "action_unknown": "newest",
    "action_adopt_failure": "allow",
    "action_generic_failure": "ignore",
}


class PamAdoptError(ValueError):
    """A user, group or option that cannot go into the PAM configuration."""


def _names(values: Iterable[Any] | None, what: str) -> list[str]:
    found: list[str] = []
    for value in values or []:
        name = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if name is None or not _NAME.fullmatch(name):
            raise PamAdoptError(
                f"{what} {value!r} cannot go into a pam_access table: letters, digits, _ . and - only, at most 32"
            )
        if name not in found:
            found.append(name)
    return found


def access_lines(users: Iterable[Any] | None = None, groups: Iterable[Any] | None = None) -> list[str]:
    """pam_access(8) table (``nodefgroup``) granting root, USERS and GROUPS and refusing everyone else
    (root passes before the table is read; it is listed for anyone reading the table alone)."""
    allowed = _names(ALWAYS_ALLOWED, "user") + _names(users, "user")
    allowed = list(dict.fromkeys(allowed))
    tokens = allowed + [f"({group})" for group in _names(groups, "group")]
    return [f"+:{' '.join(tokens)}:ALL", "-:ALL:ALL"]


def module_options(overrides: Mapping[str, Any] | None = None) -> dict[str, str]:
    """DEFAULT_OPTIONS with OVERRIDES merged over them; a None value drops an option."""
    merged: dict[str, Any] = {**DEFAULT_OPTIONS, **dict(overrides or {})}
    options: dict[str, str] = {}
    for key, value in merged.items():
        if not isinstance(key, str) or not _OPTION_KEY.fullmatch(key):
            raise PamAdoptError(f"pam_slurm_adopt option {key!r}: lower-case letters, digits and _ only")
        if value is None:
            continue
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        if not _OPTION_VALUE.fullmatch(text):
            raise PamAdoptError(f"pam_slurm_adopt option {key}: {value!r} is not a single word")
        options[key] = text
    return options


def account_lines(access_file: str, overrides: Mapping[str, Any] | None = None) -> list[str]:
    """The three account lines (see the module's docstring), for ACCESS_FILE and the merged options."""
    if not isinstance(access_file, str) or not access_file.startswith("/") or not _OPTION_VALUE.fullmatch(access_file):
        raise PamAdoptError(f"the pam_access table must be an absolute path without blanks, found {access_file!r}")
    arguments = " ".join(f"{key}={value}" for key, value in module_options(overrides).items())
    return [
        "account [success=2 default=ignore] pam_succeed_if.so quiet uid eq 0",
        f"account [success=1 default=ignore] pam_access.so nodefgroup accessfile={access_file}",
        f"-account required pam_slurm_adopt.so {arguments}".rstrip(),
    ]
