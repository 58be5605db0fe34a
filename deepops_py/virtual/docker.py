"""A thin wrapper around the ``docker`` CLI.

The CLI rather than an SDK: no extra dependency, and the commands it runs are
the ones a user would type to inspect or repair the virtual cluster by hand.
Every failure becomes a ``DeepopsError`` that names the command and docker's
own message.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence

from deepops_py.errors import DeepopsError

LABEL = "deepops.virtual"  # every container and network of a virtual cluster carries LABEL=<cluster name>
START_DOCKERD_HINT = "start it with: setsid dockerd >/var/log/dockerd.log 2>&1 &  (or: systemctl start docker)"


def _docker_binary() -> str:
    binary = shutil.which("docker")
    if binary is None:
        raise DeepopsError("The docker CLI is not installed: install it (Debian: apt-get install docker.io)")
    return binary


def run(
    args: Sequence[str],
    *,
    input: bytes | str | None = None,
    timeout: float | None = 120,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS`` and return its completed process (text output)."""
    command = [_docker_binary(), *args]
    data = input.encode() if isinstance(input, str) else input
    try:
        completed = subprocess.run(command, input=data, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DeepopsError(f"'docker {' '.join(args[:3])} ...' did not finish within {timeout:.0f} s") from None
    result = subprocess.CompletedProcess(
        command,
        completed.returncode,
        completed.stdout.decode(errors="replace"),
        completed.stderr.decode(errors="replace"),
    )
    if check and result.returncode != 0:
        detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise DeepopsError(f"'docker {_shorten(args)}' failed: {detail[-1] if detail else f'exit {result.returncode}'}")
    return result


def _shorten(args: Sequence[str]) -> str:
    text = " ".join(args)
    return text if len(text) <= 100 else text[:97] + "..."


def ensure_engine() -> None:
    """Fail with a clear message when the Docker engine does not answer."""
    result = run(["info", "--format", "{{.ServerVersion}}"], timeout=20, check=False)
    if result.returncode != 0 or not result.stdout.strip():
        raise DeepopsError(f"Docker engine not reachable: {START_DOCKERD_HINT}")


def image_labels(image: str) -> dict[str, str] | None:
    """The image's labels, or None when the image does not exist."""
    result = run(["image", "inspect", "--format", "{{json .Config.Labels}}", image], check=False)
    if result.returncode != 0:
        return None
    return json.loads(result.stdout or "null") or {}


def containers(cluster: str, *, timeout: float | None = 120) -> list[dict]:
    """``docker inspect`` of every container (running or not) of virtual cluster CLUSTER."""
    names = run(["ps", "-a", "--filter", f"label={LABEL}={cluster}", "--format", "{{.Names}}"], timeout=timeout).stdout.split()
    if not names:
        return []
    return json.loads(run(["inspect", *names], timeout=timeout).stdout)


def networks(cluster: str) -> list[str]:
    return run(["network", "ls", "--filter", f"label={LABEL}={cluster}", "--format", "{{.Name}}"]).stdout.split()


def volumes(cluster: str) -> list[str]:
    return run(["volume", "ls", "--filter", f"label={LABEL}={cluster}", "--format", "{{.Name}}"]).stdout.split()


def published_port(container: str, port: int = 22) -> int:
    """The loopback host port docker chose for the container's PORT/tcp."""
    output = run(["port", container, f"{port}/tcp"]).stdout.split()
    if not output:
        raise DeepopsError(f"Container {container} publishes no port for {port}/tcp")
    return int(output[0].rpartition(":")[2])


def exec_(container: str, command: Sequence[str], *, input: bytes | str | None = None, timeout: float = 120,
          check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run COMMAND inside a running container."""
    return run(["exec", "-i", container, *command], input=input, timeout=timeout, check=check)
