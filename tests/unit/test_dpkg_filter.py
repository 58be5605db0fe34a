"""deepops.cluster.dpkg_unmet / dpkg_unheld: a role skips apt's module only
when dpkg's answer shows every request already met, and errs towards apt."""

from __future__ import annotations

import subprocess

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter.dpkg import dpkg_query_argv, dpkg_unheld, dpkg_unmet


def answer(*lines: str, rc: int = 0) -> dict:
    return {"rc": rc, "stdout": "\n".join(lines)}


DRIVER = answer(
    "hold installed cuda-drivers-580 580.95.05-1",
    "install installed nvidia-open 580.95.05-0ubuntu1",
    "install half-configured libnccl2 2.27.7-1+cuda13.0",
    "deinstall config-files nvidia-fabricmanager-570 570.195.03-1",
    "unknown not-installed cuda-toolkit-13-0 ",
)


def test_installed_names_are_met():
    assert dpkg_unmet(DRIVER, ["cuda-drivers-580", "nvidia-open"]) == []


@pytest.mark.parametrize("request_", ["cuda-drivers-580=580.95.05-1", "cuda-drivers-580=580.95.05-*", "nvidia-open=580.95.05*"])
def test_a_matching_version_or_version_pattern_is_met(request_):
    assert dpkg_unmet(DRIVER, [request_]) == []


@pytest.mark.parametrize(
    "request_",
    [
        "cuda-drivers-580=580.82.07-1",  # another version: apt must move it
        "cuda-drivers-580=580.95.05",  # an exact version is exact
        "libnccl2",  # half-configured: apt finishes it
        "nvidia-fabricmanager-570",  # removed, configuration left
        "cuda-toolkit-13-0",  # known, not installed
        "cuda-toolkit-12-8",  # unknown to dpkg
    ],
)
def test_anything_else_is_unmet(request_):
    assert dpkg_unmet(DRIVER, ["nvidia-open", request_]) == [request_]


@pytest.mark.parametrize("registered", [{"rc": 2, "stdout": DRIVER["stdout"]}, {"skipped": True}, {"rc": 0}])
def test_a_failed_or_skipped_query_leaves_everything_to_apt(registered):
    assert dpkg_unmet(registered, ["nvidia-open"]) == ["nvidia-open"]
    assert dpkg_unheld(registered, ["cuda-drivers-580"]) == ["cuda-drivers-580"]


def test_rc_1_still_counts_the_packages_dpkg_knows():
    assert dpkg_unmet(answer(*DRIVER["stdout"].splitlines(), rc=1), ["nvidia-open", "nothere"]) == ["nothere"]


def test_unheld_lists_packages_not_on_hold_in_order():
    assert dpkg_unheld(DRIVER, ["nvidia-open", "cuda-drivers-580", "nothere"]) == ["nvidia-open", "nothere"]


def test_query_argv_asks_by_name_once():
    argv = dpkg_query_argv(["libnccl2=2.27.7-1+cuda13.0", "libnccl2", "cuda-drivers-580"])
    assert argv[:2] == ["dpkg-query", "--show"] and argv[3] == "--"
    assert argv[4:] == ["libnccl2", "cuda-drivers-580"]


def test_the_query_parses_as_the_filters_read_it():
    # The real dpkg-query on this machine: its output format is what the parser reads.
    result = subprocess.run(dpkg_query_argv(["dpkg", "no-such-package-deepops"]), capture_output=True, text=True)
    assert result.returncode == 1
    registered = {"rc": result.returncode, "stdout": result.stdout}
    assert dpkg_unmet(registered, ["dpkg", "no-such-package-deepops"]) == ["no-such-package-deepops"]
    assert dpkg_unheld(registered, ["dpkg"]) == ["dpkg"]


@pytest.mark.parametrize("names", ["nvidia-open", [""], [None], None])
def test_names_must_be_a_list_of_names(names):
    with pytest.raises(AnsibleFilterError, match="list of package names"):
        dpkg_unmet(DRIVER, names)
