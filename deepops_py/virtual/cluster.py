"""The virtual cluster: systemd containers with SSH on loopback, and their inventory.

Everything ``up`` creates carries the docker label ``deepops.virtual=<name>``,
where the cluster name is ``$DEEPOPS_VIRTUAL_NAME`` (default ``deepops``), so
several clusters (a user's and the test suite's) can share one Docker engine.
``down`` removes exactly that cluster's containers, network and shared
volumes (the stand-in for NFS, ``inventory.SHARED_VOLUMES``), plus the files
it wrote under ``.deepops/virtual``. The apt cache's data (``.deepops/cache/apt-cacher-ng``)
and the images are caches and stay.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from deepops_py import paths
from deepops_py.errors import DeepopsError, InputError
from deepops_py.virtual import docker, image, inventory, payload
from deepops_py.virtual.gpus import GpuSpec

APT_CACHE = "deepops-aptcache"  # the cache's name on the cluster network, whatever its container is called
APT_CACHE_PORT = 3142
DEFAULT_CLUSTER_NAME = "deepops"
CONTROLLER = "ctl01"
MAX_CONTROLLERS = 2  # ctl01 and, with --controllers 2, the backup ctl02
LOGIN = "login01"  # with --login: a login node of its own, no GPUs
DEFAULT_GPUS = (GpuSpec("h100", 8), GpuSpec("a100", 4))
MAX_COMPUTE = 32
READY_TIMEOUT_S = 120
PORT_LOOKUP_TIMEOUT_S = 5  # each docker command of a stale-port hint: a hint must never hold up a command
IMAGE_NAMES = tuple(image.SUITES)

ROLE_LABEL = "deepops.virtual.role"
HOST_LABEL = "deepops.virtual.host"
GPUS_LABEL = "deepops.virtual.gpus"
IMAGE_NAME_LABEL = "deepops.virtual.image"

# systemd as PID 1 without --privileged (which fails on the test VMs).
SYSTEMD_RUN_OPTIONS = (
    "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined", "--cgroupns=host",
    "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock",
    "--stop-signal", "SIGRTMIN+3",  # systemd's "halt"; SIGTERM would only make it re-execute
)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    role: str  # "controller", "compute" or "login"
    gpus: GpuSpec | None


@dataclass(frozen=True)
class ClusterSpec:
    """What ``virtual up`` should create."""

    compute: int
    gpus: tuple[GpuSpec, ...]
    image: str
    login: bool = False
    controllers: int = 1

    @classmethod
    def from_options(cls, *, compute: int = 2, gpus: Sequence[str] = (), image: str = "debian12",
                     login: bool = False, controllers: int = 1) -> ClusterSpec:
        if not 1 <= compute <= MAX_COMPUTE:
            raise InputError(f"--compute {compute}: must be from 1 to {MAX_COMPUTE}")
        if not 1 <= controllers <= MAX_CONTROLLERS:
            raise InputError(f"--controllers {controllers}: 1, or {MAX_CONTROLLERS} for a backup controller")
        if image not in IMAGE_NAMES:
            raise InputError(f"--image {image!r}: choose one of {', '.join(IMAGE_NAMES)}")
        parsed = tuple(GpuSpec.parse(text) for text in gpus) or DEFAULT_GPUS
        return cls(compute=compute, gpus=parsed, image=image, login=login, controllers=controllers)

    def nodes(self) -> list[NodeSpec]:
        controllers = [NodeSpec(f"ctl{i + 1:02d}", "controller", None) for i in range(self.controllers)]
        computes = [NodeSpec(f"gpu{i + 1:02d}", "compute", self.gpus[i % len(self.gpus)]) for i in range(self.compute)]
        logins = [NodeSpec(LOGIN, "login", None)] if self.login else []
        return [*controllers, *computes, *logins]


@dataclass
class NodeState:
    name: str  # the hostname, as in the inventory
    container: str
    role: str
    status: str  # docker's: running, exited, created, ...
    ssh_port: int | None
    gpus: str  # "h100:8"; "" on the controller
    image: str


@dataclass
class ClusterState:
    nodes: list[NodeState] = field(default_factory=list)
    apt_cache: str | None = None  # the apt cache container's status, None when absent
    network: str | None = None
    inventory_path: Path = field(default_factory=lambda: _files().inventory)
    changes: list[str] = field(default_factory=list)  # what the last 'up' did

    @property
    def exists(self) -> bool:
        return bool(self.nodes)

    def as_dict(self) -> dict:
        files = _files()
        return {
            "exists": self.exists,
            "nodes": [asdict(node) for node in self.nodes],
            "name": cluster_name(),
            "apt_cache": {"container": _apt_cache_container(), "status": self.apt_cache, "url": _apt_proxy_url(),
                          "data_dir": str(_apt_cache_dir())},
            "network": self.network,
            "shared_volumes": {volume.path: _volume(volume) for volume in inventory.SHARED_VOLUMES},
            "inventory": str(self.inventory_path) if self.inventory_path.exists() else None,
            "ssh_key": str(files.key) if files.key.exists() else None,
            "known_hosts": str(files.known_hosts) if files.known_hosts.exists() else None,
            "changes": list(self.changes),
        }


@dataclass(frozen=True)
class _Files:
    directory: Path
    inventory: Path
    known_hosts: Path
    key: Path
    public_key: Path


def _files() -> _Files:
    directory = paths.virtual_dir()
    return _Files(directory, directory / "inventory.yml", directory / "known_hosts",
                  directory / "id_ed25519", directory / "id_ed25519.pub")


def cluster_name() -> str:
    name = os.environ.get("DEEPOPS_VIRTUAL_NAME", DEFAULT_CLUSTER_NAME)
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,30}", name):
        raise InputError(f"DEEPOPS_VIRTUAL_NAME={name!r}: use lowercase letters, digits and '-', starting with a letter")
    return name


def _ready() -> None:
    """Check the settings a user gives (cluster name, state directory) before the
    Docker engine, so a wrong setting is exit 2 whether or not Docker runs."""
    cluster_name()
    paths.state_dir()
    docker.ensure_engine()


def _network() -> str:
    return f"{cluster_name()}-net"


def _container(host: str) -> str:
    """Docker's name for node HOST (its hostname inside the cluster stays HOST)."""
    return f"{cluster_name()}-{host}"


def _volume(volume: inventory.SharedVolume) -> str:
    """Docker's name for the shared volume (the virtual cluster's stand-in for an NFS export)."""
    return f"{cluster_name()}-{volume.name}"


def _volume_options() -> list[str]:
    return [option for volume in inventory.SHARED_VOLUMES for option in ("-v", f"{_volume(volume)}:{volume.path}")]


def _apt_cache_container() -> str:
    return _container("aptcache")


def _apt_cache_dir() -> Path:
    return paths.state_dir() / "cache" / "apt-cacher-ng"


def _apt_proxy_url() -> str:
    return f"http://{APT_CACHE}:{APT_CACHE_PORT}"


def _progress(message: str) -> None:
    print(f"virtual: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# status


def status() -> ClusterState:
    _ready()
    network = _network()
    state = ClusterState(network=network if network in docker.networks(cluster_name()) else None)
    for container in docker.containers(cluster_name()):
        labels = container["Config"]["Labels"] or {}
        running = container["State"]["Status"]
        if labels.get(ROLE_LABEL) == "aptcache":
            state.apt_cache = running
            continue
        state.nodes.append(NodeState(labels.get(HOST_LABEL, "?"), container["Name"].lstrip("/"),
                                     labels.get(ROLE_LABEL, "?"), running, _ssh_port(container),
                                     labels.get(GPUS_LABEL, ""), labels.get(IMAGE_NAME_LABEL, "")))
    state.nodes.sort(key=lambda node: (node.role != "controller", node.name))
    return state


def _ssh_port(container: dict) -> int | None:
    """The 127.0.0.1 port docker publishes the container's sshd on now (its ``docker inspect``); None when none."""
    bindings = (container["NetworkSettings"]["Ports"] or {}).get("22/tcp") or []
    return int(bindings[0]["HostPort"]) if bindings else None


def stale_port_hints(inventory_path: Path, ports: Mapping[str, int]) -> list[str]:
    """A line for each host of PORTS ({host: its ansible_port}) whose container publishes sshd on another port now.

    A restarted container may get a new port, and then the inventory 'up'
    wrote is stale. Only for that inventory, and only what Docker can say at
    once: none when it cannot (no docker CLI, no engine, a slow one).
    """
    if not ports or not _is_own_inventory(inventory_path):
        return []
    now = _published_ssh_ports()
    return [
        f"{host}: its SSH port changed (inventory {port}, container now {now[host]}): "
        "run `deepops virtual up` to refresh the inventory"
        for host, port in ports.items()
        if now.get(host) not in (None, port)
    ]


def _is_own_inventory(path: Path) -> bool:
    try:
        return Path(path).resolve() == _files().inventory.resolve()
    except (DeepopsError, OSError):
        return False


def _published_ssh_ports() -> dict[str, int]:
    """{hostname: its sshd's published port now}, of the nodes that publish one; {} when Docker cannot say."""
    try:
        containers = docker.containers(cluster_name(), timeout=PORT_LOOKUP_TIMEOUT_S)
        ports = {(container["Config"]["Labels"] or {}).get(HOST_LABEL): _ssh_port(container) for container in containers}
    except (DeepopsError, OSError, ValueError, KeyError, TypeError, IndexError):
        return {}
    return {host: port for host, port in ports.items() if host and port}


def print_status(state: ClusterState) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 100))  # pipes get 80 columns: too narrow for the table
    if not state.exists:
        console.print("No virtual cluster. Create one with: deepops virtual up")
        return
    table = Table(title="Virtual cluster")
    for column in ("Node", "Role", "State", "SSH", "Simulated GPUs", "Image"):
        table.add_column(column, no_wrap=True)
    has_login = any(node.role == "login" for node in state.nodes)
    for node in state.nodes:
        role = node.role
        if node.role == "controller":
            role = ("controller+monitoring" if has_login else "controller+login+monitoring") \
                if node.name == CONTROLLER else "backup controller"
        ssh = f"127.0.0.1:{node.ssh_port}" if node.ssh_port else "-"
        colour = "green" if node.status == "running" else "red"
        table.add_row(node.name, role, f"[{colour}]{node.status}[/]", ssh, node.gpus or "-", node.image)
    console.print(table)
    console.print(f"apt cache: {_apt_cache_container()} ({state.apt_cache or 'absent'}), "
                  f"{_apt_proxy_url()} on network {state.network}")
    shared = ", ".join(f"{volume.path} ({_volume(volume)})" for volume in inventory.SHARED_VOLUMES)
    console.print(f"shared on every node: {shared}: Docker volumes, the stand-in for NFS")


# --------------------------------------------------------------------------
# up


def up(spec: ClusterSpec) -> ClusterState:
    """Create, start or complete the cluster so it matches SPEC; safe to re-run."""
    _ready()
    _ensure_inotify_instances()
    files = _files()
    changes: list[str] = []
    public_key = _ensure_key(files, changes)
    existing: dict[str, dict] = {}  # hostname (or "aptcache") -> docker inspect
    for container in docker.containers(cluster_name()):
        labels = container["Config"]["Labels"] or {}
        existing[labels.get(HOST_LABEL) or "aptcache"] = container
    apt_cache = existing.pop("aptcache", None)
    wanted = spec.nodes()
    _refuse_mismatches(wanted, existing, spec)
    extra = sorted(set(existing) - {node.name for node in wanted})
    if extra:
        _progress(f"keeping nodes not in this spec: {', '.join(extra)} (remove all with: deepops virtual down)")

    to_create = [node for node in wanted if node.name not in existing]
    if to_create or apt_cache is None:
        node_image = image.NodeImage(spec.image)
        image.ensure_node_image(node_image)
        image.ensure_aptcache_image(image.AptCacheImage(node_image))
    if _network() not in docker.networks(cluster_name()):
        docker.run(["network", "create", "--label", f"{docker.LABEL}={cluster_name()}", _network()])
        changes.append(f"created network {_network()}")
    _ensure_apt_cache(spec, apt_cache, changes)
    _ensure_volumes(changes)

    booting: list[str] = []
    for node in to_create:
        _create_node(node, spec, public_key)
        changes.append(f"created {node.name}")
        booting.append(node.name)
    for name, container in existing.items():
        if container["State"]["Status"] != "running":
            docker.run(["start", _container(name)])
            changes.append(f"started {name}")
            booting.append(name)
    node_names = [node.name for node in wanted] + extra
    for name in node_names:
        # Also for nodes found running: 'docker restart' returns before sshd is up.
        _wait_until_ready(name, announce=name in booting)
    if to_create:
        _check_apt_through_cache(to_create[0].name, image.SUITES[spec.image])

    roles = {name: (container["Config"]["Labels"] or {}).get(ROLE_LABEL, "compute") for name, container in existing.items()}
    roles.update({node.name: node.role for node in wanted})
    endpoints = [_endpoint(name, roles[name], public_key, changes) for name in node_names]
    _write_if_changed(files.known_hosts, inventory.render_known_hosts(endpoints), changes)
    _write_if_changed(
        files.inventory,
        inventory.render_inventory(endpoints, key_path=files.key, known_hosts_path=files.known_hosts,
                                   apt_proxy=_apt_proxy_url(), user_public_key=public_key),
        changes,
    )
    state = status()
    state.changes = changes
    if not changes:
        _progress("already up to date: nothing changed")
    return state


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
MIN_INOTIFY_INSTANCES = 1024


def _ensure_inotify_instances() -> None:
    """Containers share the host kernel's per-user inotify limit (128 by default): a
    dozen systemd containers use it up, and then Prometheus' file_sd (and systemd
    path units) fail with "too many open files". Raise it, as kind does."""
    try:
        current = int(INOTIFY_INSTANCES.read_text())
        if current < MIN_INOTIFY_INSTANCES:
            INOTIFY_INSTANCES.write_text(f"{MIN_INOTIFY_INSTANCES}\n")
            _progress(f"raised fs.inotify.max_user_instances from {current} to {MIN_INOTIFY_INSTANCES}")
    except (OSError, ValueError) as error:
        _progress(f"could not raise fs.inotify.max_user_instances to {MIN_INOTIFY_INSTANCES} ({error}); "
                  "Prometheus file_sd in the nodes may fail with 'too many open files'")


def _ensure_key(files: _Files, changes: list[str]) -> str:
    if not (files.key.exists() and files.public_key.exists()):
        paths.make_dir(files.directory)
        files.key.unlink(missing_ok=True)
        files.public_key.unlink(missing_ok=True)
        try:
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "deepops-virtual", "-f", str(files.key)],
                           check=True, capture_output=True, text=True)
        except FileNotFoundError:
            raise DeepopsError("ssh-keygen not found: install openssh-client") from None
        except subprocess.CalledProcessError as error:
            raise DeepopsError(f"ssh-keygen failed: {error.stderr.strip()}") from None
        changes.append(f"generated SSH key {files.key}")
    return files.public_key.read_text().strip() + "\n"


def _refuse_mismatches(wanted: list[NodeSpec], existing: dict[str, dict], spec: ClusterSpec) -> None:
    """An existing node cannot change model, image or mounts in place: say so instead of guessing."""
    problems = []
    for node in wanted:
        container = existing.get(node.name)
        if container is None:
            continue
        mounted = {(mount.get("Name"), mount.get("Destination")) for mount in container.get("Mounts") or []}
        lacking = [volume.path for volume in inventory.SHARED_VOLUMES if (_volume(volume), volume.path) not in mounted]
        if lacking:
            problems.append(f"{node.name} has no shared {' and '.join(lacking)} (made before the virtual cluster had them)")
        labels = container["Config"]["Labels"] or {}
        have_gpus, want_gpus = labels.get(GPUS_LABEL, ""), str(node.gpus or "")
        if have_gpus != want_gpus:
            problems.append(f"{node.name} has GPUs {have_gpus or 'none'}, wanted {want_gpus or 'none'}")
        if labels.get(IMAGE_NAME_LABEL) != spec.image:
            problems.append(f"{node.name} runs {labels.get(IMAGE_NAME_LABEL)}, wanted {spec.image}")
    if problems:
        raise InputError(
            "The running virtual cluster differs from the requested one; run 'deepops virtual down' first:\n  "
            + "\n  ".join(problems)
        )


def _labels(role: str, spec: ClusterSpec, host: str = "", gpus: GpuSpec | None = None) -> list[str]:
    labels = [f"{docker.LABEL}={cluster_name()}", f"{ROLE_LABEL}={role}", f"{HOST_LABEL}={host}",
              f"{IMAGE_NAME_LABEL}={spec.image}", f"{GPUS_LABEL}={gpus or ''}"]
    return [argument for label in labels for argument in ("--label", label)]


def _ensure_apt_cache(spec: ClusterSpec, container: dict | None, changes: list[str]) -> None:
    if container is not None:
        if container["State"]["Status"] != "running":
            docker.run(["start", _apt_cache_container()])
            changes.append(f"started {_apt_cache_container()}")
        return
    cache_dir = paths.make_dir(_apt_cache_dir())
    docker.run([
        "run", "-d", "--name", _apt_cache_container(), "--hostname", APT_CACHE,
        "--network", _network(), "--network-alias", APT_CACHE,
        *_labels("aptcache", spec), "-v", f"{cache_dir}:/var/cache/apt-cacher-ng",
        image.AptCacheImage(image.NodeImage(spec.image)).tag,
    ])
    changes.append(f"created {_apt_cache_container()} (apt-cacher-ng, data in {cache_dir})")


def _state_volume() -> str:
    return f"{cluster_name()}-slurmctld-state"


def _node_volumes(node: NodeSpec) -> list[str]:
    """docker create's -v options of NODE: every controller mounts one Docker volume at Slurm's
    StateSaveLocation (the slurm role's slurm_state_save_location), the virtual cluster's
    stand-in for the NFS export a backup controller shares with the primary."""
    if node.role != "controller":
        return []
    if _state_volume() not in docker.volumes(cluster_name()):
        docker.run(["volume", "create", "--label", f"{docker.LABEL}={cluster_name()}", _state_volume()])
    return ["-v", f"{_state_volume()}:{paths.role_default('slurm', 'slurm_state_save_location')}"]


def _ensure_volumes(changes: list[str]) -> None:
    """The shared volumes every node mounts (inventory.SHARED_VOLUMES: the stand-in for NFS)."""
    have = set(docker.volumes(cluster_name()))
    for volume in inventory.SHARED_VOLUMES:
        if _volume(volume) not in have:
            docker.run(["volume", "create", "--label", f"{docker.LABEL}={cluster_name()}", _volume(volume)])
            changes.append(f"created volume {_volume(volume)} (shared {volume.path})")


def _create_node(node: NodeSpec, spec: ClusterSpec, public_key: str) -> None:
    _progress(f"creating {node.name}" + (f" with simulated GPUs {node.gpus}" if node.gpus else ""))
    docker.run([
        "create", "--name", _container(node.name), "--hostname", node.name, "--network", _network(),
        *_labels(node.role, spec, node.name, node.gpus), *SYSTEMD_RUN_OPTIONS, *_volume_options(), "-p", "127.0.0.1::22",
        *_node_volumes(node), image.NodeImage(spec.image).tag,
    ])
    try:
        docker.run(["cp", "-", f"{_container(node.name)}:/"], input=payload.node_tar(node.name, public_key, node.gpus))
        docker.run(["start", _container(node.name)])
    except DeepopsError:
        docker.run(["rm", "-f", _container(node.name)], check=False)  # no half-made node for the next 'up' to trust
        raise


def _wait_until_ready(name: str, *, announce: bool) -> None:
    """Wait for systemd to finish booting and sshd to answer on the published port."""
    if announce:
        _progress(f"waiting for {name} to boot")
    deadline = time.monotonic() + READY_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        result = docker.exec_(_container(name), ["systemctl", "is-system-running", "--wait"], check=False,
                              timeout=max(1.0, deadline - time.monotonic()))
        state = result.stdout.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(0.5)
    else:
        raise DeepopsError(f"{name} did not finish booting within {READY_TIMEOUT_S} s (systemd state: {state or '?'}); "
                           f"see: docker logs {_container(name)}")
    if state == "degraded":
        failed = docker.exec_(_container(name), ["systemctl", "--failed", "--plain", "--no-legend"], check=False).stdout.strip()
        _progress(f"{name}: systemd is degraded (failed units: {failed or '?'})")
    port = docker.published_port(_container(name))
    while time.monotonic() < deadline:
        if _ssh_banner(port):
            return
        time.sleep(0.5)
    raise DeepopsError(f"sshd on {name} (127.0.0.1:{port}) did not answer within {READY_TIMEOUT_S} s")


def _ssh_banner(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
            return connection.recv(16).startswith(b"SSH-")
    except OSError:
        return False


def _check_apt_through_cache(node: str, suite: str) -> None:
    """Nodes must reach Debian's mirrors through the cache, or every deploy fails later."""
    script = (
        "import sys, urllib.request as r\n"
        f"opener = r.build_opener(r.ProxyHandler({{'http': '{_apt_proxy_url()}'}}))\n"
        f"for url in ('{image.MIRROR}/dists/{suite}/InRelease', '{image.SECURITY_MIRROR}/dists/{suite}-security/InRelease'):\n"
        "    opener.open(url, timeout=30).read(64)\n"
    )
    error = ""
    for _attempt in range(10):  # apt-cacher-ng may still be starting
        result = docker.exec_(_container(node), ["python3", "-c", script], check=False, timeout=90)
        if result.returncode == 0:
            _progress(f"apt through {_apt_cache_container()} reaches {image.MIRROR} and {image.SECURITY_MIRROR}")
            return
        error = (result.stderr.strip().splitlines() or ["?"])[-1]
        time.sleep(2)
    raise DeepopsError(f"{node} cannot reach Debian's mirror through the apt cache {_apt_proxy_url()}: {error}; "
                       f"see: docker logs {_apt_cache_container()}")


def _endpoint(name: str, role: str, public_key: str, changes: list[str]) -> inventory.Endpoint:
    """Read NODE's SSH port and host key; reinstall our public key if the node lost it (new key pair)."""
    separator = "--deepops--"
    output = docker.exec_(_container(name), ["sh", "-c", f"cat /etc/ssh/ssh_host_ed25519_key.pub; echo {separator};"
                                 " cat /root/.ssh/authorized_keys 2>/dev/null || true"]).stdout
    host_key_line, _, authorized = output.partition(separator + "\n")
    host_key = " ".join(host_key_line.split()[:2])
    if public_key.strip() not in authorized:
        docker.run(["cp", "-", f"{_container(name)}:/"], input=payload.node_tar(name, public_key, None))
        changes.append(f"installed the SSH key on {name}")
    return inventory.Endpoint(name, role, docker.published_port(_container(name)), host_key)


def _write_if_changed(path: Path, content: str, changes: list[str]) -> None:
    if path.exists() and path.read_text() == content:
        return
    paths.make_dir(path.parent)
    path.write_text(content)
    changes.append(f"wrote {path}")
    _progress(f"wrote {path}")


# --------------------------------------------------------------------------
# fault: a simulated GPU reports an XID, ECC errors or a row remap


FAULT_TOOL = "/usr/local/sbin/deepops-simulated-gpu-fault"  # payload.py installs it; it writes the stand-in's files
FAULT_KINDS = ("xid:CODE", "ecc[:COUNT]", "row-remap-pending", "row-remap-failure", "clear")


@dataclass(frozen=True)
class FaultRequest:
    """What ``virtual fault`` asks of one node's simulated GPU (GPU None: every GPU, for clear)."""

    host: str
    kind: str  # xid, ecc, row-remap-pending, row-remap-failure, clear
    gpu: int | None
    value: int | None = None

    @classmethod
    def parse(cls, host: str, fault: str, gpu: int | None) -> FaultRequest:
        kind, _, value = fault.strip().lower().partition(":")
        if kind == "xid":
            if not value.isdigit() or not 1 <= int(value) <= 999:
                raise InputError(f"fault {fault!r}: give the XID's number, for example xid:79")
            return cls(host, kind, 0 if gpu is None else gpu, int(value))
        if kind == "ecc":
            if value and (not value.isdigit() or int(value) < 1):
                raise InputError(f"fault {fault!r}: COUNT must be a whole number of 1 or more, for example ecc:2")
            return cls(host, kind, 0 if gpu is None else gpu, int(value) if value else 1)
        if kind in ("row-remap-pending", "row-remap-failure", "clear") and not value:
            return cls(host, kind, gpu if kind == "clear" else (0 if gpu is None else gpu))
        raise InputError(f"fault {fault!r}: expected one of {', '.join(FAULT_KINDS)}")

    def argv(self) -> list[str]:
        if self.kind == "clear":
            return [FAULT_TOOL, "clear", *([] if self.gpu is None else [str(self.gpu)])]
        extra = [] if self.value is None else [str(self.value)]
        return [FAULT_TOOL, self.kind, str(self.gpu), *extra]


def fault(request: FaultRequest) -> str:
    """Inject (or clear) a fault on a running compute node's simulated GPU; returns what the node said."""
    state = status()
    node = next((node for node in state.nodes if node.name == request.host), None)
    computes = ", ".join(node.name for node in state.nodes if node.gpus) or "none"
    if node is None or not node.gpus:
        raise InputError(f"{request.host}: no compute node of virtual cluster {cluster_name()!r} has that name "
                         f"(nodes with simulated GPUs: {computes})")
    count = GpuSpec.parse(node.gpus).count
    if request.gpu is not None and not 0 <= request.gpu < count:
        raise InputError(f"--gpu {request.gpu}: {request.host} has GPUs 0-{count - 1}")
    if node.status != "running":
        raise InputError(f"{request.host} is {node.status}: start it with 'deepops virtual up'")
    result = docker.exec_(node.container, request.argv(), check=False, timeout=30)
    if result.returncode == 127 or "No such file" in result.stderr:
        raise DeepopsError(f"{request.host} has no {FAULT_TOOL}: its container predates 'virtual fault'; "
                           "recreate the cluster (deepops virtual down && deepops virtual up)")
    if result.returncode != 0:
        raise DeepopsError(f"{request.host}: {(result.stderr or result.stdout).strip()}")
    return result.stdout.strip()


# --------------------------------------------------------------------------
# down


def down() -> Iterator[str]:
    """Remove this cluster's containers, network and volumes (by label), and the files 'up' wrote."""
    _ready()
    containers = [container["Name"].lstrip("/") for container in docker.containers(cluster_name())]
    for name in sorted(containers):
        docker.run(["rm", "-f", "-v", name])
        yield f"removed container {name}"
    for network in docker.networks(cluster_name()):
        docker.run(["network", "rm", network])
        yield f"removed network {network}"
    for volume in docker.volumes(cluster_name()):
        docker.run(["volume", "rm", volume])
        yield f"removed volume {volume}"
    files = _files()
    for path in (files.inventory, files.known_hosts, files.key, files.public_key):
        if path.exists():
            path.unlink()
            yield f"removed {path}"
    if files.directory.is_dir() and not any(files.directory.iterdir()):
        files.directory.rmdir()
    if not containers:
        yield "no virtual cluster containers were running"
    if _apt_cache_dir().is_dir():
        yield f"kept the apt cache data in {_apt_cache_dir()} so the next 'up' is fast (delete it to free space)"
    yield "kept the images deepops-node:* and deepops-aptcache:* (remove with: docker rmi)"
