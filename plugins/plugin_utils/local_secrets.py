"""Secrets made once on the controller and kept beside the inventory.

The munge key, the slurmdbd and Grafana passwords and the monitoring
account's password live in ``secrets/`` beside the inventory: the directory
mode 0700, each file 0600. A secret is made the first time it is asked for
and only read after that, so every later run (and ``deepops plan``) renders
the same configuration. Hosts never hold this directory; roles copy what a
host needs from it.
"""

from __future__ import annotations

import os
import secrets
import stat
import string
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KINDS", "PASSWORD_CHARS", "Secret", "ensure", "write_private"]

PASSWORD_CHARS = string.ascii_letters + string.digits
# password: SIZE letters and digits (text); bytes: SIZE random bytes (a key file).
KINDS = ("password", "bytes")
DIRECTORY_MODE, FILE_MODE = 0o700, 0o600


@dataclass(frozen=True)
class Secret:
    path: Path
    # Made by this call.
    created: bool
    # Made, or its directory's or its own mode put right.
    changed: bool
    # The password (kind "password"); never the bytes of a key.
    password: str | None


def write_private(path: Path, data: bytes) -> None:
    """Write DATA to PATH, readable by its owner only from the first byte on."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.chmod(path, FILE_MODE)


def _private(path: Path, mode: int) -> bool:
    """Give PATH exactly MODE; True when it had another."""
    if stat.S_IMODE(path.stat().st_mode) == mode:
        return False
    os.chmod(path, mode)
    return True


def ensure(path: str | Path, kind: str = "password", size: int = 32) -> Secret:
    """The secret at PATH, made when missing; its directory and it made private."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if size < 16:
        raise ValueError(f"a secret of {size} is too short to guess at: 16 or more")
    path = Path(path)
    if path.parent.is_dir():
        changed = _private(path.parent, DIRECTORY_MODE)
    else:
        path.parent.mkdir(mode=DIRECTORY_MODE, parents=True)
        changed = True
    created = not path.exists()
    if created:
        data = os.urandom(size) if kind == "bytes" else "".join(map(secrets.choice, [PASSWORD_CHARS] * size)).encode()
        write_private(path, data)
    changed = created or _private(path, FILE_MODE) or changed
    if kind == "bytes":
        return Secret(path, created, changed, None)
    return Secret(path, created, changed, read_password(path))


def read_password(path: str | Path) -> str:
    """The password in the file at PATH (OSError when it cannot be read), which is left as it is."""
    # A file written by Ansible's password lookup (the earlier way) may carry
    # " salt=..." after the password on its line.
    words = Path(path).read_text().split()
    if not words:
        raise ValueError(f"{path} is empty: remove it to have a new password made")
    return words[0]
