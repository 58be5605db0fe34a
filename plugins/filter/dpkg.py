"""Jinja filters that let a role skip apt's module when dpkg already says the
packages it asks for are in place (apt's module costs seconds a call even
when it has nothing to do: it loads the whole package cache).

One query, one parser, so the query's format lives here only:

- ``names | deepops.cluster.dpkg_query_argv`` -> the ``dpkg-query`` argv for
  those packages (``name=version`` requests are asked about by name). Run it
  with ``failed_when: rc not in [0, 1]``: 1 means a package dpkg never heard
  of, which is only "not installed".
- ``registered | deepops.cluster.dpkg_unmet(requests)`` -> the apt requests
  (``name``, ``name=version``, ``name=version-*``) that the installed packages
  do not already satisfy, in request order: empty means apt has nothing to do.
- ``registered | deepops.cluster.dpkg_unheld(names)`` -> the names not on hold.
- ``registered | deepops.cluster.dpkg_installed`` -> the names installed (a
  query may name a pattern, ``'nvidia-fabricmanager*'``).

Any doubt (a failed query, a half-installed package, an unknown name) counts
as unmet, so the task runs as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any, NamedTuple

from ansible.errors import AnsibleFilterError

# Want and status first: a package that is not installed has an empty version.
_SHOWFORMAT = "${db:Status-Want} ${db:Status-Status} ${Package} ${Version}\\n"


class Package(NamedTuple):
    want: str
    status: str
    version: str


def _request_name(request: str) -> str:
    return request.split("=", 1)[0]


def dpkg_query_argv(requests: Any) -> list[str]:
    names = _names(requests, "dpkg_query_argv")
    return ["dpkg-query", "--show", f"--showformat={_SHOWFORMAT}", "--", *dict.fromkeys(map(_request_name, names))]


def parse_dpkg_query(stdout: str) -> dict[str, Package]:
    packages = {}
    for line in stdout.splitlines():
        fields = line.split(" ")
        if len(fields) >= 3 and fields[2]:
            packages[fields[2]] = Package(fields[0], fields[1], fields[3] if len(fields) > 3 else "")
    return packages


def dpkg_unmet(registered: Any, requests: Any) -> list[str]:
    wanted = _names(requests, "dpkg_unmet")
    installed = _installed(registered, "dpkg_unmet")
    unmet = []
    for request in wanted:
        name, version = request.split("=", 1) if "=" in request else (request, "")
        package = installed.get(name)
        if package is None or package.status != "installed" or (version and not fnmatchcase(package.version, version)):
            unmet.append(request)
    return unmet


def dpkg_unheld(registered: Any, names: Any) -> list[str]:
    wanted = _names(names, "dpkg_unheld")
    installed = _installed(registered, "dpkg_unheld")
    return [name for name in wanted if name not in installed or installed[name].want != "hold"]


def dpkg_installed(registered: Any) -> list[str]:
    return [name for name, package in _installed(registered, "dpkg_installed").items() if package.status == "installed"]


def _installed(registered: Any, filter_name: str) -> dict[str, Package]:
    if not isinstance(registered, Mapping):
        raise AnsibleFilterError(f"{filter_name} expects the registered result of the dpkg_query_argv command")
    stdout = registered.get("stdout")
    # 1: some name is unknown to dpkg; its lines for the others still count.
    if registered.get("rc") not in (0, 1) or not isinstance(stdout, str):
        return {}
    return parse_dpkg_query(stdout)


def _names(value: Any, filter_name: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(item, str) and item for item in value):
        raise AnsibleFilterError(f"{filter_name} expects a list of package names, got {value!r}")
    return list(value)


class FilterModule:
    """deepops dpkg filters."""

    def filters(self) -> dict[str, Any]:
        return {"dpkg_query_argv": dpkg_query_argv, "dpkg_unmet": dpkg_unmet, "dpkg_unheld": dpkg_unheld,
                "dpkg_installed": dpkg_installed}
