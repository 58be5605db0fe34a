"""The operating systems deepops supports: one table, read in three places.

- The roles' preflight asserts, through the filter
  ``deepops.cluster.os_support_problems`` (``plugins/filter/platforms.py``),
  with the host's gathered facts.
- ``deepops check`` (``deepops_py/preflight.py``), with the host's
  /etc/os-release, before any playbook runs.
- The virtual cluster's node images (``deepops_py/virtual/image.py``): one
  per release tested in CI, which is what "tested" means here.

Every release in the table is supported: it goes through the same apt code
paths. Only the ones marked ``tested`` run in CI (molecule and the virtual
cluster); ``deepops check`` says so for the others. The roles' meta/main.yml
files do not repeat the list (collection roles carry no Galaxy platforms).

Standard library only: plugins and deepops_py import it alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """One supported release of a distribution."""

    distribution: str  # as Ansible's ansible_facts['distribution'] names it: Debian, Ubuntu
    version: str  # as /etc/os-release VERSION_ID says it: 12, 22.04
    codename: str  # VERSION_CODENAME, Ansible's distribution_release: bookworm, jammy
    tested: bool  # run in CI (molecule, the virtual cluster)

    @property
    def os_id(self) -> str:
        """The ID of /etc/os-release: debian, ubuntu."""
        return self.distribution.lower()

    @property
    def name(self) -> str:
        """For people: Debian 12, Ubuntu 22.04."""
        return f"{self.distribution} {self.version}"

    @property
    def slug(self) -> str:
        """One word: debian12, ubuntu2204 (the virtual cluster's image names, NVIDIA's repository names)."""
        return self.os_id + self.version.replace(".", "")


RELEASES: tuple[Release, ...] = (
    Release("Debian", "12", "bookworm", tested=True),
    Release("Debian", "13", "trixie", tested=True),
    Release("Ubuntu", "22.04", "jammy", tested=False),
    Release("Ubuntu", "24.04", "noble", tested=False),
)


def tested_releases() -> tuple[Release, ...]:
    return tuple(release for release in RELEASES if release.tested)


def find_release(distribution: object, version: object, codename: object = "") -> Release | None:
    """The supported release a host runs, or None.

    Takes /etc/os-release's ID, VERSION_ID and VERSION_CODENAME, or Ansible's
    facts distribution, distribution_version and distribution_release. A point
    release is its release (Debian 12.5 is Debian 12; Ubuntu 22.10 is not
    Ubuntu 22.04). A host whose version is no number (Debian testing before
    its release: none, n/a, trixie/sid) is known by its codename.
    """
    os_id = str(distribution or "").strip().lower()
    version = str(version or "").strip()
    codename = str(codename or "").strip().lower()
    candidates = [release for release in RELEASES if release.os_id == os_id]
    for release in candidates:
        if version == release.version or version.startswith(release.version + "."):
            return release
    if not re.match(r"[0-9]", version):
        for release in candidates:
            if codename and codename == release.codename:
                return release
    return None


def _versions_text(releases: tuple[Release, ...]) -> str:
    """Debian 12, 13; Ubuntu 22.04, 24.04."""
    by_distribution: dict[str, list[str]] = {}
    for release in releases:
        by_distribution.setdefault(release.distribution, []).append(release.version)
    return "; ".join(f"{distribution} {', '.join(versions)}" for distribution, versions in by_distribution.items())


def supported_text() -> str:
    """The supported releases, for messages: Debian 12, 13; Ubuntu 22.04, 24.04."""
    return _versions_text(RELEASES)


def tested_text() -> str:
    """The releases tested in CI, for messages: Debian 12, 13."""
    return _versions_text(tested_releases())


def support_problems(distribution: object, version: object, codename: object = "") -> list[str]:
    """[] for a supported release, else one message that names the host's OS and the supported ones."""
    if find_release(distribution, version, codename) is not None:
        return []
    name = f"{distribution or 'unknown OS'} {version or codename or ''}".strip()
    return [f"{name} is not supported (supported: {supported_text()})"]
