"""Stand-in apt repositories for tests: build them with dpkg-deb, serve them over HTTP.

NVIDIA's repositories (and Grafana's) are not reachable from the test
machines, so the roles' repository paths run against a local repository that
carries packages with the real names and versions but stand-in contents.

API:
- ``FakePackage``: one package (name, version, depends, files).
- ``build_repo(directory, packages, signing_home=None) -> Path``: a flat
  repository (sources line ``deb URL /``, as NVIDIA's CUDA repository is laid
  out) with Packages, Packages.gz and Release; InRelease and Release.gpg too
  when a GnuPG home with a secret key is given.
- ``signing_key()``: a context manager holding a throwaway signing key in a
  temporary GnuPG home; yields ``(home, public key)`` (binary, for a keyring
  package or ``signed-by=``). The home, its secret key and its agent are
  gone on exit.
- ``serve(directory, bind="0.0.0.0", port=0)``: a context manager running an
  HTTP server in a thread; ``RepoServer.url(host)``.
  ``docker_gateway(network)`` is the host's address as containers on that
  docker network see it, so ``server.url(docker_gateway("bridge"))`` is the
  URL to give a role.
- ``nvidia_repo(directory)``: NVIDIA's CUDA repository as the deepops roles
  use it (cuda-keyring, cuda-drivers-<branch>, nvidia-open-<branch>,
  nvidia-fabricmanager, cuda-toolkit-X-Y, cuDNN, NCCL, DCGM), signed.

Command line (used by the molecule scenarios' prepare step):
``python tests/support/aptrepo.py nvidia DIR``.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class FakePackage:
    """A package with a real name and version and stand-in contents."""

    name: str
    version: str
    architecture: str = "amd64"
    depends: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    description: str = "deepops test stand-in"
    # Absolute path on the target -> file content; paths under */bin/ and
    # */sbin/ are made executable.
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    postinst: str | None = None

    @property
    def filename(self) -> str:
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.architecture}.deb"


def _control(package: FakePackage) -> str:
    lines = [
        f"Package: {package.name}",
        f"Version: {package.version}",
        f"Architecture: {package.architecture}",
        "Maintainer: deepops tests <tests@deepops.invalid>",
        "Section: misc",
        "Priority: optional",
    ]
    if package.depends:
        lines.append(f"Depends: {', '.join(package.depends)}")
    if package.conflicts:
        lines.append(f"Conflicts: {', '.join(package.conflicts)}")
    lines.append(f"Description: {package.description}")
    lines.append(" Stand-in package built by deepops' tests; it is not the real software.")
    return "\n".join(lines) + "\n"


def _build_deb(package: FakePackage, pool: Path) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN" / "control").write_text(_control(package))
        if package.postinst:
            postinst = root / "DEBIAN" / "postinst"
            postinst.write_text(package.postinst)
            postinst.chmod(0o755)
        for target, content in package.files.items():
            path = root / target.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
            parts = Path(target).parts
            path.chmod(0o755 if "bin" in parts or "sbin" in parts else 0o644)
        for directory in [root, *root.rglob("*")]:
            if directory.is_dir():
                directory.chmod(0o755)
        out = pool / package.filename
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out)],
            check=True, capture_output=True,
        )
    return out


def _digests(data: bytes) -> dict[str, str]:
    return {
        "MD5sum": hashlib.md5(data).hexdigest(),  # noqa: S324 - apt's index format, not security
        "SHA256": hashlib.sha256(data).hexdigest(),
    }


def build_repo(directory: Path, packages: Sequence[FakePackage], *, signing_home: Path | None = None) -> Path:
    """Write a flat apt repository of ``packages`` into ``directory``; returns it."""
    directory = Path(directory)
    pool = directory / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    stanzas = []
    for package in packages:
        deb = _build_deb(package, pool)
        data = deb.read_bytes()
        digests = _digests(data)
        stanzas.append(
            _control(package).rstrip("\n").split("\nDescription:")[0]
            + f"\nFilename: ./pool/{deb.name}\nSize: {len(data)}\nMD5sum: {digests['MD5sum']}\nSHA256: {digests['SHA256']}"
            + "\nDescription:" + _control(package).split("\nDescription:", 1)[1].rstrip("\n")
        )
    index = ("\n\n".join(stanzas) + "\n").encode()
    (directory / "Packages").write_bytes(index)
    (directory / "Packages.gz").write_bytes(gzip.compress(index, mtime=0))
    release = ["Origin: deepops-tests", "Label: deepops stand-in", "Architectures: amd64 all", "Date: Thu, 01 Jan 2026 00:00:00 UTC"]
    for field_name in ("MD5Sum", "SHA256"):
        release.append(f"{field_name}:")
        for name in ("Packages", "Packages.gz"):
            data = (directory / name).read_bytes()
            digest = _digests(data)["MD5sum" if field_name == "MD5Sum" else "SHA256"]
            release.append(f" {digest} {len(data)} {name}")
    (directory / "Release").write_text("\n".join(release) + "\n")
    if signing_home is not None:
        gpg = ["gpg", "--homedir", str(signing_home), "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", ""]
        subprocess.run([*gpg, "--clearsign", "-o", str(directory / "InRelease"), str(directory / "Release")], check=True, capture_output=True)
        subprocess.run([*gpg, "--detach-sign", "-o", str(directory / "Release.gpg"), str(directory / "Release")], check=True, capture_output=True)
    return directory


@contextlib.contextmanager
def signing_key() -> Iterator[tuple[Path, bytes]]:
    """A throwaway signing key in a temporary GnuPG home: yields the home and the
    public key (binary). On exit the agent the key started is stopped and the home,
    secret key included, removed."""
    with tempfile.TemporaryDirectory(prefix="deepops-gpg-") as name:
        home = Path(name)
        gpg = ["gpg", "--homedir", name, "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", ""]
        try:
            subprocess.run([*gpg, "--quick-gen-key", "deepops test repository <tests@deepops.invalid>", "ed25519", "sign",
                            "never"], check=True, capture_output=True)
            yield home, subprocess.run([*gpg, "--export"], check=True, capture_output=True).stdout
        finally:
            # The agent's sockets live in the home; stopped first, the removal finds none.
            subprocess.run(["gpgconf", "--homedir", name, "--kill", "all"], capture_output=True)


# --------------------------------------------------------------------------
# serving


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's signature
        pass


@dataclass
class RepoServer:
    """An HTTP server for one directory, running in a daemon thread."""

    port: int
    server: http.server.ThreadingHTTPServer

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/"


@contextlib.contextmanager
def serve(directory: Path, *, bind: str = "0.0.0.0", port: int = 0) -> Iterator[RepoServer]:  # noqa: S104 - containers must reach it
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer((bind, port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RepoServer(port=server.server_address[1], server=server)
    finally:
        server.shutdown()
        server.server_close()


def docker_gateway(network: str = "bridge") -> str:
    """The host's address on a docker network (its gateway), as containers there reach it."""
    out = subprocess.run(["docker", "network", "inspect", network], check=True, capture_output=True, text=True).stdout
    return json.loads(out)[0]["IPAM"]["Config"][0]["Gateway"]


# --------------------------------------------------------------------------
# NVIDIA's CUDA repository, as the deepops roles use it

# Real releases of each branch (NVIDIA's Debian packages carry revision -1).
NVIDIA_DRIVERS = {570: "570.195.03", 580: "580.95.05"}
CUDA_TOOLKITS = {"12.8": "12.8.1-1", "13.0": "13.0.2-1"}
CUDNN_VERSION = "9.14.0.64-1"
NCCL_VERSIONS = {"12": "2.27.7-1+cuda12.9", "13": "2.28.3-1+cuda13.0"}
DCGM_VERSION = "1:4.4.1-1"

# nvidia-smi stand-in: two H100 SXM GPUs on a finished NVSwitch fabric, with
# settable persistence mode, power limit and application clocks (kept in a
# state file). Only what the roles and the facts module call is implemented.
NVIDIA_SMI = r'''#!/usr/bin/python3
"""STAND-IN nvidia-smi from deepops' test repository (not NVIDIA software)."""
import json, os, sys
DRIVER = "@DRIVER@"
STATE = "/var/lib/nvidia-standin/state.json"
GPUS = 2
DEFAULT = {"persistence_mode": "Disabled", "power_limit": 700.0, "app_mem": 2619, "app_gr": 1755}
RANGE = (200.0, 700.0)

def load():
    try:
        with open(STATE) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return [dict(DEFAULT) for _ in range(GPUS)]

def save(state):
    os.makedirs(os.path.dirname(STATE), exist_ok=True)
    with open(STATE, "w") as handle:
        json.dump(state, handle)

def xml(state):
    gpus = "".join(f"""
  <gpu id="00000000:{0x18 + 0x20 * i:02X}:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <product_architecture>Hopper</product_architecture>
    <persistence_mode>{s['persistence_mode']}</persistence_mode>
    <minor_number>{i}</minor_number>
    <uuid>GPU-00000000-0000-0000-0000-00000000000{i}</uuid>
    <serial>STANDIN{i}</serial>
    <mig_mode><current_mig>Disabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
    <fabric><state>Completed</state><status>Success</status></fabric>
    <pci><pci_bus_id>00000000:{0x18 + 0x20 * i:02X}:00.0</pci_bus_id></pci>
    <fb_memory_usage><total>81559 MiB</total></fb_memory_usage>
    <gpu_power_readings>
      <current_power_limit>{s['power_limit']:.2f} W</current_power_limit>
      <default_power_limit>700.00 W</default_power_limit>
      <min_power_limit>{RANGE[0]:.2f} W</min_power_limit>
      <max_power_limit>{RANGE[1]:.2f} W</max_power_limit>
    </gpu_power_readings>
  </gpu>""" for i, s in enumerate(state))
    return f"""<?xml version="1.0" ?>
<nvidia_smi_log>
  <driver_version>{DRIVER}</driver_version>
  <cuda_version>13.0</cuda_version>
  <attached_gpus>{GPUS}</attached_gpus>{gpus}
</nvidia_smi_log>"""

FIELDS = {
    "index": lambda i, s: str(i),
    "name": lambda i, s: "NVIDIA H100 80GB HBM3",
    "driver_version": lambda i, s: DRIVER,
    "persistence_mode": lambda i, s: s["persistence_mode"],
    "power.limit": lambda i, s: f"{s['power_limit']:.2f}",
    "power.default_limit": lambda i, s: "700.00",
    "power.min_limit": lambda i, s: f"{RANGE[0]:.2f}",
    "power.max_limit": lambda i, s: f"{RANGE[1]:.2f}",
    "clocks.applications.memory": lambda i, s: str(s["app_mem"]),
    "clocks.applications.graphics": lambda i, s: str(s["app_gr"]),
}

def main(argv):
    state = load()
    ids = list(range(GPUS))
    if "-i" in argv:
        ids = [int(argv[argv.index("-i") + 1])]
    if argv[:2] == ["-q", "-x"]:
        print(xml(state)); return 0
    if argv[:2] == ["topo", "-m"]:
        # Every pair over NVSwitch (NV18), one NUMA node: an HGX H100 board, cut down.
        print("\t" + "\t".join(f"GPU{j}" for j in range(GPUS)) + "\tCPU Affinity\tNUMA Affinity")
        for i in range(GPUS):
            links = "\t".join(" X " if i == j else "NV18" for j in range(GPUS))
            print(f"GPU{i}\t{links}\t0-47\t0")
        return 0
    query = [a for a in argv if a.startswith("--query-gpu=")]
    if query:
        names = query[0].split("=", 1)[1].split(",")
        for i in ids:
            print(", ".join(FIELDS[n](i, state[i]) for n in names))
        return 0
    for flag, value in zip(argv, argv[1:] + [""]):
        for i in ids:
            if flag == "-pm":
                state[i]["persistence_mode"] = "Enabled" if value in ("1", "ENABLED") else "Disabled"
            elif flag == "-pl":
                if not RANGE[0] <= float(value) <= RANGE[1]:
                    print("Provided power limit is not a valid power limit", file=sys.stderr); return 2
                state[i]["power_limit"] = float(value)
            elif flag == "-ac":
                state[i]["app_mem"], state[i]["app_gr"] = (int(x) for x in value.split(","))
            elif flag == "-rac":
                state[i]["app_mem"], state[i]["app_gr"] = DEFAULT["app_mem"], DEFAULT["app_gr"]
    save(state)
    print("stand-in nvidia-smi: " + " ".join(argv))
    return 0

sys.exit(main(sys.argv[1:]))
'''

DAEMON = "#!/bin/sh\n# STAND-IN daemon from deepops' test repository.\nexec sleep infinity\n"


def _unit(description: str, binary: str) -> str:
    return f"[Unit]\nDescription={description} (deepops test stand-in)\n\n[Service]\nExecStart={binary}\n\n[Install]\nWantedBy=multi-user.target\n"


def nvidia_packages(public_key: bytes, distro: str = "debian12") -> list[FakePackage]:
    """Packages with the names and versions of NVIDIA's CUDA repository for ``distro``."""
    packages = [
        FakePackage(
            "cuda-keyring", "1.1-1", architecture="all",
            files={
                "/usr/share/keyrings/cuda-archive-keyring.gpg": public_key,
                # The real package ships this source line, pointing at NVIDIA.
                f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list": (
                    "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                    f"https://developer.download.nvidia.com/compute/cuda/repos/{distro}/x86_64/ /\n"
                ),
            },
        ),
    ]
    for branch, driver in NVIDIA_DRIVERS.items():
        version = f"{driver}-1"
        exact = f"(= {version})"
        packages += [
            FakePackage("nvidia-kernel-dkms", version, conflicts=("nvidia-open-kernel-dkms",),
                        files={f"/usr/src/nvidia-{driver}/STAND-IN": "proprietary kernel module sources (stand-in)\n"}),
            FakePackage("nvidia-open-kernel-dkms", version, conflicts=("nvidia-kernel-dkms",),
                        files={f"/usr/src/nvidia-open-{driver}/STAND-IN": "open kernel module sources (stand-in)\n"}),
            FakePackage("nvidia-driver-cuda", version, depends=("python3",),
                        files={"/usr/bin/nvidia-smi": NVIDIA_SMI.replace("@DRIVER@", driver)}),
            FakePackage("nvidia-persistenced", version, files={
                "/usr/bin/nvidia-persistenced": DAEMON,
                "/lib/systemd/system/nvidia-persistenced.service": _unit("NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced"),
            }),
            FakePackage("nvidia-driver", version, depends=(f"nvidia-driver-cuda {exact}", f"nvidia-persistenced {exact}"),
                        files={"/usr/share/doc/nvidia-driver/STAND-IN": f"driver {driver} (stand-in)\n"}),
            FakePackage(f"cuda-drivers-{branch}", version, depends=(f"nvidia-driver {exact}", f"nvidia-kernel-dkms {exact}")),
            FakePackage(f"nvidia-open-{branch}", version, depends=(f"nvidia-driver {exact}", f"nvidia-open-kernel-dkms {exact}")),
            FakePackage("nvidia-fabricmanager" if branch >= 580 else f"nvidia-fabricmanager-{branch}", version,
                        conflicts=("nvidia-fabricmanager",) if branch < 580 else (), files={
                "/usr/bin/nv-fabricmanager": DAEMON,
                "/lib/systemd/system/nvidia-fabricmanager.service": _unit("NVIDIA fabric manager service", "/usr/bin/nv-fabricmanager"),
            }),
        ]
    for cuda, version in CUDA_TOOLKITS.items():
        dashed = cuda.replace(".", "-")
        packages.append(FakePackage(f"cuda-toolkit-{dashed}", version, files={
            f"/usr/local/cuda-{cuda}/bin/nvcc": f"#!/bin/sh\necho 'Cuda compilation tools, release {cuda} (deepops stand-in)'\n",
            f"/usr/local/cuda-{cuda}/lib64/STAND-IN": "CUDA libraries (stand-in)\n",
        }))
    for major, nccl in NCCL_VERSIONS.items():
        packages += [
            FakePackage(f"libcudnn9-cuda-{major}", CUDNN_VERSION,
                        files={f"/usr/lib/x86_64-linux-gnu/libcudnn.so.9.cuda{major}.stand-in": "cuDNN (stand-in)\n"}),
            FakePackage("libnccl2", nccl, files={f"/usr/lib/x86_64-linux-gnu/libnccl.so.2.cuda{major}.stand-in": "NCCL (stand-in)\n"}),
            FakePackage("libnccl-dev", nccl, depends=(f"libnccl2 (= {nccl})",),
                        files={"/usr/include/nccl.h": f"/* NCCL {nccl} headers (stand-in) */\n"}),
            FakePackage(f"datacenter-gpu-manager-4-cuda{major}", DCGM_VERSION, depends=(f"datacenter-gpu-manager-4-core (= {DCGM_VERSION})",),
                        files={f"/usr/lib/x86_64-linux-gnu/libdcgmmodule-cuda{major}.stand-in": "DCGM CUDA module (stand-in)\n"}),
        ]
    packages.append(FakePackage("datacenter-gpu-manager-4-core", DCGM_VERSION, files={
        "/usr/bin/nv-hostengine": DAEMON,
        "/lib/systemd/system/nvidia-dcgm.service": _unit("NVIDIA DCGM service", "/usr/bin/nv-hostengine -n --service-account nvidia-dcgm"),
    }))
    return packages


# The release of nccl-tests the nccl_tests role builds by default (its defaults/main.yml).
NCCL_TESTS_VERSION = "2.13.6"

# Stand-in of nccl-tests' top-level Makefile: it fails unless make gets what a
# real build needs (MPI=1, nvcc, NCCL's and Open MPI's headers, gencode flags)
# and writes *_perf programs that print how they were built.
NCCL_TESTS_MAKEFILE = """\
# deepops test stand-in for NVIDIA/nccl-tests (not the real sources)
BUILDDIR ?= build
all:
\ttest "$(MPI)" = 1
\ttest -x "$(CUDA_HOME)/bin/nvcc"
\ttest -f "$(NCCL_HOME)/include/nccl.h"
\ttest -f "$(MPI_HOME)/include/mpi.h"
\tcase '$(NVCC_GENCODE)' in *-gencode=arch=compute_*) ;; *) exit 1 ;; esac
\tmkdir -p $(BUILDDIR)
\tfor test in all_reduce all_gather sendrecv; do \\
\t  printf '#!/bin/sh\\necho "stand-in %s_perf: CUDA_HOME=%s NCCL_HOME=%s MPI=%s NVCC_GENCODE=%s"\\n' \\
\t    $$test '$(CUDA_HOME)' '$(NCCL_HOME)' '$(MPI)' '$(NVCC_GENCODE)' >$(BUILDDIR)/$${test}_perf; \\
\t  chmod 755 $(BUILDDIR)/$${test}_perf; \\
\tdone
\ttouch $(BUILDDIR)/common.o
"""


def nccl_tests_source(directory: Path, version: str = NCCL_TESTS_VERSION) -> Path:
    """``directory/v<version>.tar.gz``, laid out as GitHub's archive of the release
    (one top directory ``nccl-tests-<version>``) with the stand-in Makefile, and its
    sha256 beside it in ``v<version>.tar.gz.sha256``."""
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / f"v{version}.tar.gz"
    data = NCCL_TESTS_MAKEFILE.encode()
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo(f"nccl-tests-{version}/Makefile")
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    (directory / f"{archive.name}.sha256").write_text(hashlib.sha256(archive.read_bytes()).hexdigest())
    return archive


def nvidia_repo(directory: Path, distro: str = "debian12") -> Path:
    """A signed stand-in of NVIDIA's CUDA repository in ``directory`` (with cuda-keyring_1.1-1_all.deb at its top),
    and the stand-in nccl-tests release archive under ``directory/nccl-tests/``."""
    directory = Path(directory)
    with signing_key() as (home, public_key):
        build_repo(directory, nvidia_packages(public_key, distro), signing_home=home)
    # NVIDIA publishes the keyring package at the repository's top level.
    (directory / "cuda-keyring_1.1-1_all.deb").write_bytes((directory / "pool" / "cuda-keyring_1.1-1_all.deb").read_bytes())
    nccl_tests_source(directory / "nccl-tests")
    return directory


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[0] != "nvidia":
        print("usage: aptrepo.py nvidia DIRECTORY [DISTRO]", file=sys.stderr)
        return 2
    print(nvidia_repo(Path(argv[1]), *argv[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
