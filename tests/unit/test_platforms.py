"""The one table of supported operating systems (plugins/module_utils/platforms.py),
its filter for the roles' preflight, and the places that must read it rather
than keep their own list."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter import platforms as filters
from ansible_collections.deepops.cluster.plugins.module_utils import platforms

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if (path / "tasks" / "main.yml").is_file())


# --------------------------------------------------------------------------
# the table


def test_supported_releases_and_which_ci_tests():
    assert [(release.name, release.tested) for release in platforms.RELEASES] == [
        ("Debian 12", True), ("Debian 13", True), ("Ubuntu 22.04", False), ("Ubuntu 24.04", False),
    ]
    assert [release.slug for release in platforms.tested_releases()] == ["debian12", "debian13"]
    assert platforms.supported_text() == "Debian 12, 13; Ubuntu 22.04, 24.04"
    assert platforms.tested_text() == "Debian 12, 13"


def test_every_release_is_complete_and_listed_once():
    for release in platforms.RELEASES:
        assert release.distribution and release.version and release.codename, release
    assert len({(release.os_id, release.version) for release in platforms.RELEASES}) == len(platforms.RELEASES)
    assert len({release.codename for release in platforms.RELEASES}) == len(platforms.RELEASES)


@pytest.mark.parametrize(
    ("distribution", "version", "codename", "expected"),
    [
        ("debian", "12", "bookworm", "Debian 12"),  # /etc/os-release
        ("Debian", "12.5", "bookworm", "Debian 12"),  # Ansible's facts: a point release
        ("Debian", "13", "", "Debian 13"),
        ("Ubuntu", "22.04", "jammy", "Ubuntu 22.04"),
        ("ubuntu", "24.04", "noble", "Ubuntu 24.04"),
        # Debian testing before its release has no version number, only its codename
        ("debian", "", "trixie", "Debian 13"),
        ("Debian", "n/a", "trixie", "Debian 13"),
        ("Debian", "trixie/sid", "trixie", "Debian 13"),
        # not supported
        ("Debian", "11", "bullseye", None),
        ("Debian", "11.9", "trixie", None),  # a version number wins over the codename
        ("Debian", "120", "", None),
        ("Ubuntu", "22.10", "kinetic", None),  # not an LTS, though its major is 22
        ("Ubuntu", "20.04", "focal", None),
        ("Rocky", "9.3", "Blue Onyx", None),
        ("", "", "", None),
        (None, None, None, None),
    ],
)
def test_find_release(distribution, version, codename, expected):
    release = platforms.find_release(distribution, version, codename)
    assert (release.name if release else None) == expected


def test_support_problems_name_the_os_and_the_supported_ones():
    assert platforms.support_problems("Debian", "12.11", "bookworm") == []
    assert platforms.support_problems("Rocky", "9.3") == ["Rocky 9.3 is not supported (supported: Debian 12, 13; Ubuntu 22.04, 24.04)"]
    assert platforms.support_problems("Debian", "", "forky") == ["Debian forky is not supported (supported: Debian 12, 13; Ubuntu 22.04, 24.04)"]
    assert platforms.support_problems("", "") == ["unknown OS is not supported (supported: Debian 12, 13; Ubuntu 22.04, 24.04)"]


# --------------------------------------------------------------------------
# the filter the roles' preflight asserts with


def _facts(distribution, version, release=""):
    return {"distribution": distribution, "distribution_version": version, "distribution_major_version": version.split(".")[0],
            "distribution_release": release, "os_family": "Debian"}


def test_filter_passes_supported_releases_untested_ones_included():
    for facts in (_facts("Debian", "12.11", "bookworm"), _facts("Debian", "13.1", "trixie"),
                  _facts("Ubuntu", "22.04", "jammy"), _facts("Ubuntu", "24.04", "noble"), _facts("Debian", "n/a", "trixie")):
        assert filters.os_support_problems(facts) == [], facts


def test_filter_fails_other_releases_with_one_message():
    assert filters.os_support_problems(_facts("Ubuntu", "22.10", "kinetic")) == [
        "Ubuntu 22.10 is not supported (supported: Debian 12, 13; Ubuntu 22.04, 24.04)"
    ]
    assert filters.os_support_problems(_facts("Debian", "11.11", "bullseye")) == [
        "Debian 11.11 is not supported (supported: Debian 12, 13; Ubuntu 22.04, 24.04)"
    ]


def test_filter_without_facts_is_an_ansible_error():
    with pytest.raises(AnsibleFilterError, match="gather_facts"):
        filters.os_support_problems({})
    with pytest.raises(AnsibleFilterError):
        filters.os_support_problems("Debian")
    assert filters.FilterModule().filters() == {"os_support_problems": filters.os_support_problems}


# --------------------------------------------------------------------------
# the places that read the table instead of keeping a list


def _tasks(path: Path) -> list[dict]:
    return yaml.safe_load(path.read_text()) or []


@pytest.mark.parametrize("role", ROLES)
def test_role_meta_does_not_repeat_the_platforms(role):
    """Collection roles carry no Galaxy platforms: the table is the one list, and preflight asserts it."""
    meta = yaml.safe_load((REPO / "roles" / role / "meta" / "main.yml").read_text())
    galaxy_info = meta.get("galaxy_info") or {}
    assert "platforms" not in galaxy_info, f"{role}: meta/main.yml lists platforms; the table is plugins/module_utils/platforms.py"
    assert galaxy_info.get("standalone") is False, f"{role}: galaxy_info must say standalone: false (a collection role)"


def test_roles_assert_the_os_with_the_table():
    """Every OS assert in a role goes through the filter, and the three roles that check the OS still do."""
    asserting = {}
    for path in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        for task in _tasks(path):
            if "| Assert the OS is supported" in str(task.get("name", "")):
                asserting[path.parts[-3]] = yaml.safe_dump(task)
    assert set(asserting) >= {"common", "slurm", "nvidia_driver"}
    for role, text in asserting.items():
        assert "ansible_facts | deepops.cluster.os_support_problems" in text, role
        assert "supported_versions" not in text and "12" not in text, role


def test_virtual_cluster_images_are_the_tested_releases():
    from deepops_py import cli
    from deepops_py.virtual import cluster, image

    tested = [release.slug for release in platforms.tested_releases()]
    assert list(image.SUITES) == tested, "every release CI tests needs a virtual node image (and only those)"
    assert image.SUITES == {release.slug: release.codename for release in platforms.tested_releases()}
    assert list(cluster.IMAGE_NAMES) == tested
    [option] = [param for param in cli.virtual_up.params if param.name == "image"]
    assert list(option.type.choices) == tested
