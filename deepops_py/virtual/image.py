"""The virtual cluster's images, built locally and cached by recipe hash.

No registry is reachable from the machines this runs on, so the node image is
built with debootstrap and ``docker import``; the apt cache image is the node
image plus apt-cacher-ng. Each image carries a label with the hash of its
recipe and is rebuilt only when it is missing or that hash changed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.deepops.cluster.plugins.module_utils import platforms

from deepops_py.errors import DeepopsError
from deepops_py.virtual import docker

MIRROR = "http://deb.debian.org/debian"
SECURITY_MIRROR = "http://deb.debian.org/debian-security"
# One node image per release CI tests (the collection's OS table), named like
# debian12 and debootstrapped from Debian's mirror.
SUITES = {release.slug: release.codename for release in platforms.tested_releases() if release.distribution == "Debian"}
RECIPE_LABEL = "deepops.recipe"
IMAGE_LABEL = "deepops.image"  # images are a cache: 'virtual down' keeps them

PACKAGES = (
    "systemd", "systemd-sysv", "libpam-systemd", "dbus", "python3", "openssh-server", "sudo",
    "iproute2", "iputils-ping", "netbase", "procps", "ca-certificates", "gnupg",
)

SSHD_CONFIG = """\
# deepops virtual cluster: key login as root only
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
"""

# Host keys are generated on each container's first boot, so no two
# containers (and no two clusters) share them.
HOSTKEYS_UNIT = """\
[Unit]
Description=Generate SSH host keys (deepops virtual node)
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
"""

# Units that only make sense on a real console or a writable kernel.
MASKED_UNITS = ("getty.target", "console-getty.service", "systemd-remount-fs.service", "sys-kernel-config.mount")

APT_CACHER_CONFIG = """\
# deepops virtual cluster: serve Debian's mirrors to the nodes
Port: 3142
BindAddress: 0.0.0.0
CacheDir: /var/cache/apt-cacher-ng
LogDir: /var/log/apt-cacher-ng
ExThreshold: 14
# apt-cacher-ng 3.7 counts an index file whose download has not begun yet as
# stuck (as if begun more than this many seconds ago). When several nodes ask for
# one InRelease in the same second, the second moves the first's item aside
# under the name the first just used, fails, and answers 503; apt 2.6 then
# hangs after "Ign: ... InRelease". The largest value turns the check off.
ResponseFreezeDetectTime: 2147483647
"""


def _sources_list(suite: str) -> str:
    return (
        f"deb {MIRROR} {suite} main\n"
        f"deb {MIRROR} {suite}-updates main\n"
        f"deb {SECURITY_MIRROR} {suite}-security main\n"
    )


@dataclass(frozen=True)
class NodeImage:
    """The node image for one Debian release."""

    image: str  # "debian12" or "debian13"

    @property
    def suite(self) -> str:
        return SUITES[self.image]

    @property
    def tag(self) -> str:
        return f"deepops-node:{self.image}"

    def recipe(self) -> str:
        parts = [self.suite, MIRROR, ",".join(PACKAGES), SSHD_CONFIG, HOSTKEYS_UNIT, ",".join(MASKED_UNITS),
                 _sources_list(self.suite)]
        return hashlib.sha256("\n--\n".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AptCacheImage:
    """apt-cacher-ng on top of a node image."""

    base: NodeImage

    @property
    def tag(self) -> str:
        return f"deepops-aptcache:{self.base.image}"

    def recipe(self) -> str:
        return hashlib.sha256(f"{self.base.recipe()}\n{APT_CACHER_CONFIG}".encode()).hexdigest()[:16]


def _progress(message: str) -> None:
    print(f"virtual: {message}", file=sys.stderr, flush=True)


def _is_current(tag: str, recipe: str) -> bool:
    labels = docker.image_labels(tag)
    return labels is not None and labels.get(RECIPE_LABEL) == recipe


def ensure_node_image(node_image: NodeImage) -> str:
    """Build the node image unless an image with the same recipe exists; return its tag."""
    recipe = node_image.recipe()
    if _is_current(node_image.tag, recipe):
        return node_image.tag
    if os.geteuid() != 0:
        raise DeepopsError("Building the virtual node image needs root (debootstrap): run 'deepops virtual up' as root")
    if shutil.which("debootstrap") is None:
        raise DeepopsError("debootstrap is not installed: apt-get install debootstrap")
    _progress(f"building image {node_image.tag} with debootstrap ({node_image.suite}, about a minute)")
    with tempfile.TemporaryDirectory(prefix="deepops-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _debootstrap(node_image.suite, rootfs)
        _configure_rootfs(rootfs, node_image.suite)
        _progress(f"importing {node_image.tag} into docker")
        _import(rootfs, node_image.tag, recipe)
    _progress(f"image {node_image.tag} ready")
    return node_image.tag


# Stage lines ("I: Installing core packages..."), not the hundreds of per-package lines.
_DEBOOTSTRAP_STAGE = re.compile(
    r"I: (Retrieving InRelease|Resolving|Installing|Unpacking (required|the base)|Configuring (required|the base)|Base system)"
)


def _debootstrap(suite: str, rootfs: Path) -> None:
    command = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(rootfs), MIRROR]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-15:]
        if _DEBOOTSTRAP_STAGE.match(line):
            _progress(f"  debootstrap: {line[3:]}")
    if process.wait() != 0:
        raise DeepopsError(
            f"debootstrap {suite} from {MIRROR} failed (exit {process.returncode}):\n  " + "\n  ".join(tail)
        )


def _configure_rootfs(rootfs: Path, suite: str) -> None:
    etc = rootfs / "etc"
    (etc / "apt" / "sources.list").write_text(_sources_list(suite))
    (etc / "ssh" / "sshd_config.d").mkdir(parents=True, exist_ok=True)
    (etc / "ssh" / "sshd_config.d" / "deepops-virtual.conf").write_text(SSHD_CONFIG)
    for key in (etc / "ssh").glob("ssh_host_*"):
        key.unlink()
    units = etc / "systemd" / "system"
    (units / "deepops-ssh-hostkeys.service").write_text(HOSTKEYS_UNIT)
    wants = units / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    _symlink(wants / "deepops-ssh-hostkeys.service", "/etc/systemd/system/deepops-ssh-hostkeys.service")
    _symlink(wants / "ssh.service", "/lib/systemd/system/ssh.service")
    for unit in MASKED_UNITS:
        _symlink(units / unit, "/dev/null")
    # An empty machine-id makes systemd generate one per container at boot.
    (etc / "machine-id").write_text("")
    (rootfs / "var" / "lib" / "dbus" / "machine-id").unlink(missing_ok=True)
    (etc / "hostname").unlink(missing_ok=True)
    ssh_dir = rootfs / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    ssh_dir.chmod(0o700)
    for leftover in (rootfs / "var" / "cache" / "apt" / "archives").glob("*.deb"):
        leftover.unlink()


def _symlink(link: Path, target: str) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def _import(rootfs: Path, tag: str, recipe: str) -> None:
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    command = [
        shutil.which("docker") or "docker", "import",
        "-c", 'CMD ["/lib/systemd/systemd"]',
        "-c", "ENV container=docker",
        "-c", f"LABEL {RECIPE_LABEL}={recipe} {IMAGE_LABEL}=1",
        "-", tag,
    ]
    imported = subprocess.run(command, stdin=tar.stdout, capture_output=True, text=True)
    assert tar.stdout is not None
    tar.stdout.close()
    if tar.wait() != 0 or imported.returncode != 0:
        raise DeepopsError(f"docker import of {tag} failed: {imported.stderr.strip() or 'tar failed'}")


def ensure_aptcache_image(cache_image: AptCacheImage) -> str:
    """Build the apt-cacher-ng image on top of the node image unless current; return its tag."""
    recipe = cache_image.recipe()
    if _is_current(cache_image.tag, recipe):
        return cache_image.tag
    base = ensure_node_image(cache_image.base)
    _progress(f"building image {cache_image.tag} (apt-cacher-ng)")
    builder = f"deepops-build-aptcache-{cache_image.base.image}"  # one per release: two may build at once
    docker.run(["rm", "-f", builder], check=False)
    script = (
        "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update -q;"
        " apt-get install -y -q --no-install-recommends apt-cacher-ng;"
        " rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb;"
        " echo 'http://deb.debian.org/debian/' > /etc/apt-cacher-ng/backends_debian;"
        " cat > /etc/apt-cacher-ng/zz-deepops.conf"
    )
    try:
        docker.run(["run", "-i", "--name", builder, base, "bash", "-c", script], input=APT_CACHER_CONFIG, timeout=600)
        docker.run([
            "commit",
            "--change", 'CMD ["/usr/sbin/apt-cacher-ng", "-c", "/etc/apt-cacher-ng", "ForeGround=1"]',
            "--change", f"LABEL {RECIPE_LABEL}={recipe} {IMAGE_LABEL}=1",
            builder, cache_image.tag,
        ])
    finally:
        docker.run(["rm", "-f", builder], check=False)
    _progress(f"image {cache_image.tag} ready")
    return cache_image.tag
