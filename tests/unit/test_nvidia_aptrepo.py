"""tests/support/aptrepo.py: the stand-in NVIDIA repository the molecule
scenarios install from is a well-formed, signed flat apt repository."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import aptrepo
import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not (shutil.which("dpkg-deb") and shutil.which("gpg")), reason="needs dpkg-deb and gpg")


def _stanzas(index: str) -> list[dict[str, str]]:
    stanzas = []
    for block in index.strip().split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if not line.startswith(" "):
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        stanzas.append(fields)
    return stanzas


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """Python's temporary directory while the repository is built (what it leaves there)."""
    return tmp_path_factory.mktemp("tmp")


@pytest.fixture(scope="module")
def nvidia(tmp_path_factory, scratch) -> Path:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(scratch))
        return aptrepo.nvidia_repo(tmp_path_factory.mktemp("repo") / "nvidia", "debian12")


def test_the_signing_key_is_not_left_behind(nvidia, scratch):
    # Its GnuPG home held the secret key; one was left in /tmp per build.
    assert list(scratch.iterdir()) == []


def test_index_lists_every_package_with_its_real_name_and_a_matching_hash(nvidia):
    stanzas = _stanzas((nvidia / "Packages").read_text())
    names = {(stanza["Package"], stanza["Version"]) for stanza in stanzas}
    for expected in [("cuda-keyring", "1.1-1"), ("cuda-drivers-580", "580.95.05-1"), ("nvidia-open-570", "570.195.03-1"),
                     ("nvidia-fabricmanager", "580.95.05-1"), ("nvidia-fabricmanager-570", "570.195.03-1"),
                     ("cuda-toolkit-13-0", "13.0.2-1"), ("libnccl2", "2.28.3-1+cuda13.0"),
                     ("datacenter-gpu-manager-4-cuda13", "1:4.4.1-1")]:
        assert expected in names
    for stanza in stanzas:
        data = (nvidia / stanza["Filename"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == stanza["SHA256"]
        assert int(stanza["Size"]) == len(data)
    assert gzip.decompress((nvidia / "Packages.gz").read_bytes()) == (nvidia / "Packages").read_bytes()


def test_release_is_signed_by_the_key_the_keyring_package_ships(nvidia, tmp_path):
    deb = nvidia / "cuda-keyring_1.1-1_all.deb"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "keyring")], check=True)
    keyring = tmp_path / "keyring" / "usr" / "share" / "keyrings" / "cuda-archive-keyring.gpg"
    verified = subprocess.run(["gpgv", "--keyring", str(keyring), str(nvidia / "InRelease")], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    source = (tmp_path / "keyring" / "etc" / "apt" / "sources.list.d" / "cuda-debian12-x86_64.list").read_text()
    assert "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /" in source


def test_driver_metapackages_pin_their_exact_driver(nvidia):
    stanzas = {(stanza["Package"], stanza["Version"]): stanza for stanza in _stanzas((nvidia / "Packages").read_text())}
    assert stanzas[("cuda-drivers-580", "580.95.05-1")]["Depends"] == "nvidia-driver (= 580.95.05-1), nvidia-kernel-dkms (= 580.95.05-1)"
    assert "nvidia-open-kernel-dkms (= 570.195.03-1)" in stanzas[("nvidia-open-570", "570.195.03-1")]["Depends"]


def test_stand_in_nvidia_smi_reports_its_driver_and_applies_settings(nvidia, tmp_path):
    subprocess.run(["dpkg-deb", "-x", str(nvidia / "pool" / "nvidia-driver-cuda_580.95.05-1_amd64.deb"), str(tmp_path / "x")], check=True)
    script = (tmp_path / "x" / "usr" / "bin" / "nvidia-smi").read_text().replace("/var/lib/nvidia-standin", str(tmp_path / "state"))
    smi = tmp_path / "nvidia-smi"
    smi.write_text(script)

    def run(*args: str) -> str:
        return subprocess.run([sys.executable, str(smi), *args], check=True, capture_output=True, text=True).stdout

    from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi

    facts = nvidia_smi.gpu_facts(run("-q", "-x"), run("topo", "-m"))
    assert facts["driver_version"] == "580.95.05" and facts["nvswitch"] is True and facts["types"] == ["h100"]
    assert [gpu["numa_node"] for gpu in facts["gpus"]] == [0, 0]
    run("-i", "1", "-pl", "450")
    assert run("--query-gpu=index,power.limit", "--format=csv,noheader,nounits").splitlines() == ["0, 700.00", "1, 450.00"]


def test_served_over_http(nvidia):
    with aptrepo.serve(nvidia, bind="127.0.0.1") as server:
        with urllib.request.urlopen(server.url() + "Release", timeout=10) as response:  # noqa: S310 - loopback test server
            assert response.read() == (nvidia / "Release").read_bytes()
