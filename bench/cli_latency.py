"""Wall time of `deepops --help` and of `deepops check --no-ssh` on 1,000 hosts,
and with ``--status`` of `deepops status --json` on a running, deployed cluster.

Runs the venv's `deepops` (next to this interpreter) in subprocesses, so the
numbers include Python start-up and every import, as a user sees them.
Prints one JSON document; it reports, it does not judge (no thresholds).

    .venv/bin/python bench/cli_latency.py [--runs 5] [--hosts 1000]
    .venv/bin/python bench/cli_latency.py --status [--inventory INV]  # default: the virtual cluster's

`deepops status` reads the cluster over SSH: deploy it first (`deepops
virtual up && deepops deploy`, with the same DEEPOPS_STATE_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPU_GROUPS = ("gpu_h100", "gpu_a100", "gpu_l40s", "gpu_b200")


def write_inventory(directory: Path, hosts: int) -> Path:
    """1 controller, ``hosts - 1`` computes spread over a few groups, with group_vars."""
    computes = [f"gpu{index:04d}" for index in range(1, hosts)]
    lines = ["all:", "  vars:", "    ansible_user: admin", "  children:", "    slurm_controller:", "      hosts:",
             "        ctl01:", "          ansible_host: 10.0.0.1", "    slurm_compute:", "      children:"]
    for group_index, group in enumerate(GPU_GROUPS):
        lines += [f"        {group}:", "          hosts:"]
        for host_index, name in enumerate(computes[group_index :: len(GPU_GROUPS)]):
            lines += [f"            {name}:", f"              ansible_host: 10.{group_index + 1}.{host_index // 250}.{host_index % 250 + 1}"]
    (directory / "inventory.yml").write_text("\n".join(lines) + "\n")
    group_vars = directory / "group_vars"
    group_vars.mkdir()
    (group_vars / "all.yml").write_text("ansible_become: true\ndeepops_virtual: false\n")
    (group_vars / "slurm_compute.yml").write_text("ansible_port: 22\n")
    for group in GPU_GROUPS:
        (group_vars / f"{group}.yml").write_text(f"ansible_ssh_common_args: '-o ProxyJump=bastion-{group}'\n")
    return directory / "inventory.yml"


def time_command(command: list[str], runs: int) -> dict:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
    return {
        "command": " ".join(command[1:]),
        "exit_code": completed.returncode,
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "runs": runs,
        "stderr_tail": completed.stderr.strip().splitlines()[-1:] if completed.returncode else [],
    }


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in ("ansible-core", "click", "PyYAML"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--status", action="store_true", help="also time `deepops status --json` on a deployed cluster")
    parser.add_argument("--inventory", help="the cluster for --status (default: as deepops chooses, e.g. the virtual one)")
    options = parser.parse_args()
    deepops = str(Path(sys.executable).with_name("deepops"))
    with tempfile.TemporaryDirectory() as temp:
        inventory = write_inventory(Path(temp), options.hosts)
        results = [
            time_command([deepops, "--help"], options.runs),
            time_command([deepops, "check", "--no-ssh", "-i", str(inventory)], options.runs),
        ]
    if options.status:
        results.append(time_command([deepops, "status", "--json", *(["-i", options.inventory] if options.inventory else [])],
                                    options.runs))
    report = {
        "hosts": options.hosts,
        "results": results,
        "versions": versions(),
        "machine": {"platform": platform.platform(), "processor": platform.machine(), "cpus": os.cpu_count()},
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
