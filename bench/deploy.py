#!/usr/bin/env python3
"""Deploy benchmarks on the default virtual cluster; prints JSON.

Measures, through the real CLI, as a user would run it:
  - fresh deploy of the default cluster (controller + gpu01 h100:8 + gpu02 a100:4),
    or of --compute N nodes,
  - a no-op re-run of the same deploy, with seconds, tasks and host results
    per role and its slowest tasks (from the run's recorded job events),
  - deepops plan on the converged cluster,
    both --repeat times (default 3), taking turns: each reports its median run
    and every run's seconds, since single runs on a small machine swing by
    a second or more,
  - adding a node (virtual up --compute N+1, then deepops node add of it),
  - removing that node again (deepops node remove --yes; it stays in the
    virtual cluster's inventory, so with --keep a later deploy adds it back),
and, in-process, rendering slurm.conf and gres.conf for 10,000 nodes with the
slurm role's templates and filters.

The cluster gets its own name and state directory and is removed at the end
(--keep leaves it). The apt cache is kept between runs in --cache-dir, so
"fresh" means fresh hosts with a warm package cache unless --cold is given.
Usage: .venv/bin/python bench/deploy.py [--compute N] [--repeat N] [--keep] [--cold] [--skip-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
DEEPOPS = Path(sys.executable).parent / "deepops"
CLUSTER = "bench"  # the benchmark cluster's DEEPOPS_VIRTUAL_NAME


class Run(NamedTuple):
    """One deepops command: wall seconds, where the CPU went, its --json output and exit code."""

    seconds: float
    # CPU seconds on this machine's side of SSH: the CLI, ansible-playbook, its
    # workers and ssh clients.
    controller_cpu_s: float
    # CPU seconds inside the benchmark cluster's containers: the nodes' own work
    # (sshd, modules, dpkg, services), which on the virtual cluster shares this
    # machine's cores with the controller. None where the cgroups are unreadable.
    nodes_cpu_s: float | None
    data: dict | None
    rc: int

    def summary(self) -> dict:
        return {"seconds": round(self.seconds, 1), "controller_cpu_s": round(self.controller_cpu_s, 1),
                "nodes_cpu_s": None if self.nodes_cpu_s is None else round(self.nodes_cpu_s, 1),
                "rc": self.rc, "changed": _changed(self.data)}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _container_cpu_s(container: str) -> float | None:
    """CPU seconds a container used so far, from its cgroup (v1 or v2, cgroupfs or systemd driver)."""
    v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{container}/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for stat in (Path(f"/sys/fs/cgroup/docker/{container}/cpu.stat"),
                 Path(f"/sys/fs/cgroup/system.slice/docker-{container}.scope/cpu.stat")):
        if stat.exists():
            usage = dict(line.split() for line in stat.read_text().splitlines())
            return int(usage["usage_usec"]) / 1e6
    return None


def _nodes_cpu_s() -> float | None:
    """CPU seconds used so far by the benchmark cluster's containers."""
    listed = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"label=deepops.virtual={CLUSTER}"],
                            capture_output=True, text=True)
    total = 0.0
    for container in listed.stdout.split():
        used = _container_cpu_s(container)
        if used is None:
            return None
        total += used
    return total


def _deepops(env: dict, *args: str) -> Run:
    """Run deepops ARGS as a user would."""
    cpu_before, nodes_before = _children_cpu_s(), _nodes_cpu_s()
    started = time.perf_counter()
    proc = subprocess.run([str(DEEPOPS), *args], cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    cpu, nodes_after = _children_cpu_s() - cpu_before, _nodes_cpu_s()
    # A container the command started counts from zero.
    nodes = None if nodes_before is None or nodes_after is None else nodes_after - nodes_before
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
    data = None
    if "--json" in args and proc.stdout.strip():
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError:
            data = None
    return Run(elapsed, cpu, nodes, data, proc.returncode)


def _changed(result: dict | None) -> dict[str, int] | None:
    if not result:
        return None
    return {host: row["changed"] for host, row in result.get("hosts", {}).items()}


def _task_times(state: Path, result: dict | None) -> list[dict] | None:
    """Every task of one run with its role, seconds and host results, from its recorded job events.

    A task's time runs from its start to the next task's (or play's) start;
    host_results counts the results that were not skips (controller-side
    set_fact and assert included). Tasks outside roles (plays' fact
    gathering, pre_tasks) have the role "-".
    """
    if not result or not result.get("run_id"):
        return None
    events = []
    for path in (state / "runs" / result["run_id"] / "job_events").glob("*.json"):
        events.append(json.loads(path.read_text()))
    events.sort(key=lambda event: event["counter"])
    results: dict[str, int] = {}
    for event in events:
        if event["event"] in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            uuid = event["event_data"].get("task_uuid")
            results[uuid] = results.get(uuid, 0) + 1
    marks = [event for event in events if event["event"] in ("playbook_on_task_start", "playbook_on_play_start", "playbook_on_stats")]
    tasks = []
    for start, end in zip(marks, marks[1:]):
        if start["event"] != "playbook_on_task_start":
            continue
        data = start["event_data"]
        seconds = (datetime.fromisoformat(end["created"]) - datetime.fromisoformat(start["created"])).total_seconds()
        tasks.append({"role": data.get("role") or "-", "task": data.get("task", ""), "seconds": seconds,
                      "host_results": results.get(data.get("task_uuid"), 0)})
    return tasks


def role_breakdown(tasks: list[dict] | None) -> dict | None:
    """Seconds, tasks and host results per role, slowest role first."""
    if tasks is None:
        return None
    roles: dict[str, dict] = {}
    for task in tasks:
        row = roles.setdefault(task["role"], {"seconds": 0.0, "tasks": 0, "host_results": 0})
        row["seconds"] += task["seconds"]
        row["tasks"] += 1
        row["host_results"] += task["host_results"]
    ordered = sorted(roles.items(), key=lambda item: -item[1]["seconds"])
    return {role: {**row, "seconds": round(row["seconds"], 1)} for role, row in ordered}


def slowest_tasks(tasks: list[dict] | None, count: int = 15) -> list[dict] | None:
    if tasks is None:
        return None
    ordered = sorted(tasks, key=lambda task: -task["seconds"])[:count]
    return [{**task, "seconds": round(task["seconds"], 2)} for task in ordered]


def cluster_benchmarks(compute: int, keep: bool, cold: bool, cache_dir: Path, repeat: int = 3) -> dict:
    state = Path(tempfile.mkdtemp(prefix="deepops-bench-"))
    if not cold:
        # Reuse the package cache across benchmark runs: it is what a user's
        # second cluster on the same machine sees.
        (state / "cache").parent.mkdir(parents=True, exist_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        (state / "cache").symlink_to(cache_dir)
    env = {**os.environ, "DEEPOPS_STATE_DIR": str(state), "DEEPOPS_VIRTUAL_NAME": CLUSTER}
    env.pop("DEEPOPS_INVENTORY", None)
    results: dict = {"state_dir": str(state), "apt_cache": "cold" if cold else "warm", "compute_nodes": compute}
    try:
        _deepops(env, "virtual", "down")
        up = _deepops(env, "virtual", "up", "--compute", str(compute))
        results["virtual_up_s"] = round(up.seconds, 1)
        if up.rc:
            results["error"] = "virtual up failed"
            return results
        results["fresh_deploy"] = _deepops(env, "deploy", "--json").summary()
        noops: list[Run] = []
        plans: list[Run] = []
        for _turn in range(repeat):
            noops.append(_deepops(env, "deploy", "--json"))
            plans.append(_deepops(env, "plan", "--json"))
        noop = median_run(noops)
        results["noop_rerun"] = {**noop.summary(), "runs_s": [round(run.seconds, 1) for run in noops]}
        tasks = _task_times(state, noop.data)
        results["noop_rerun"]["by_role"] = role_breakdown(tasks)
        results["noop_rerun"]["slowest_tasks"] = slowest_tasks(tasks)
        results["plan_converged"] = {**median_run(plans).summary(), "runs_s": [round(run.seconds, 1) for run in plans]}
        results["virtual_grow_s"] = round(_deepops(env, "virtual", "up", "--compute", str(compute + 1)).seconds, 1)
        new_node = f"gpu{compute + 1:02d}"
        added = _deepops(env, "node", "add", new_node, "--json")
        results["add_node"] = {"node": new_node, **added.summary()}
        if added.rc == 0:
            removed = _deepops(env, "node", "remove", new_node, "--yes", "--json")
            results["remove_node"] = {"node": new_node, **removed.summary()}
    finally:
        if not keep:
            _deepops(env, "virtual", "down")
            shutil.rmtree(state, ignore_errors=True)
    return results


def median_run(runs: list[Run]) -> Run:
    """The run with the median wall time (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda run: run.seconds)
    return ordered[(len(ordered) - 1) // 2]


def render_benchmark(nodes: int = 10_000) -> dict:
    sys.path.insert(0, str(REPO / "tests" / "support"))
    from slurm_render import nvidia_smi, render

    fixture = REPO / "deepops_py" / "virtual" / "fixtures" / "h100-sxm5-80gb-x8-driver580.xml"
    gpus = nvidia_smi.build_facts(nvidia_smi.parse_xml(fixture.read_text()), None)
    host = {"processor_vcpus": 224, "processor_count": 2, "processor_cores": 56,
            "processor_threads_per_core": 2, "memtotal_mb": 2_064_000}
    facts = {f"gpu{i:05d}": {**host, "deepops_gpus": gpus} for i in range(1, nodes // 2 + 1)}
    facts.update({f"cpu{i:05d}": dict(host) for i in range(1, nodes - nodes // 2 + 1)})
    timings = {}
    for template in ("slurm.conf.j2", "gres.conf.j2"):
        started = time.perf_counter()
        text = render(template, facts)
        timings[template] = {"seconds": round(time.perf_counter() - started, 3),
                             "node_lines": sum(line.startswith("NodeName=") for line in text.splitlines())}
    return {"nodes": nodes, **timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compute", type=int, default=2, help="compute nodes of the benchmark cluster (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="no-op deploys and plans, taking turns (default 3)")
    parser.add_argument("--keep", action="store_true", help="leave the benchmark cluster running")
    parser.add_argument("--cold", action="store_true", help="start with an empty apt cache")
    parser.add_argument("--skip-cluster", action="store_true", help="only the in-process render benchmark")
    parser.add_argument("--cache-dir", type=Path, default=REPO / ".deepops" / "bench-cache")
    args = parser.parse_args()
    report: dict = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "render_10000_nodes": render_benchmark(),
    }
    if not args.skip_cluster:
        if args.repeat < 1:
            parser.error("--repeat must be at least 1")
        report["virtual_cluster"] = cluster_benchmarks(args.compute, args.keep, args.cold, args.cache_dir, args.repeat)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
