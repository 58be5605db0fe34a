#!/usr/bin/env python3
"""Wall time of `deepops validate` (default checks) on the virtual cluster; prints JSON.

Through the real CLI, as a user would run it: a default virtual cluster of its
own (controller + gpu01 h100:8 + gpu02 a100:4) is started and deployed, then
`deepops validate --json` runs --runs times. Each run reports its wall time,
its exit code, the status of every check and the seconds each check's tasks
took (from the run's recorded job events). The cluster is removed at the end
(--keep leaves it); --state-dir DIR and --name NAME measure an existing
cluster instead (nothing is started, deployed or removed then).

The nccl and dcgm checks run through the virtual cluster's stand-ins, so their
seconds are Slurm's and the stand-ins', not a GPU's.
Usage: .venv/bin/python bench/validate.py [--runs N] [--keep] [--state-dir DIR --name NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy import REPO, _deepops  # noqa: E402  (the benchmarks share one CLI runner)

sys.path.insert(0, str(REPO))
from ansible_collections.deepops.cluster.plugins.module_utils.validation import CHECK_NAMES  # noqa: E402


def check_seconds(state: Path, run_id: str | None) -> dict[str, float]:
    """Seconds per check in one validate run: from each 'Run each check' include of
    check_<name>.yml to the next task outside it, summed per check."""
    if not run_id:
        return {}
    events = [json.loads(path.read_text()) for path in (state / "runs" / run_id / "job_events").glob("*.json")]
    events.sort(key=lambda event: event["counter"])
    starts = [event for event in events if event["event"] in ("playbook_on_task_start", "playbook_on_stats")]
    seconds: dict[str, float] = {}
    for start, end in zip(starts, starts[1:]):
        path = start["event_data"].get("task_path") or ""
        name = Path(path.split(":")[0]).stem
        check = name.removeprefix("check_") if name.startswith("check_") else ("nccl" if name == "nccl_round" else None)
        if check in CHECK_NAMES:
            elapsed = _timestamp(end) - _timestamp(start)
            seconds[check] = round(seconds.get(check, 0.0) + elapsed, 1)
    return seconds


def _timestamp(event: dict) -> float:
    return datetime.fromisoformat(event["created"]).timestamp()


def measure(env: dict, state: Path, runs: int) -> list[dict]:
    measured = []
    for _ in range(runs):
        seconds, data, rc = _deepops(env, "validate", "--json")
        statuses: dict[str, dict[str, int]] = {}
        for check in (data or {}).get("checks", []):
            counts = statuses.setdefault(check["check"], {})
            counts[check["status"]] = counts.get(check["status"], 0) + 1
        measured.append({"seconds": round(seconds, 1), "rc": rc, "statuses": statuses,
                         "check_seconds": check_seconds(state, (data or {}).get("run_id"))})
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="validate runs to time (default 2)")
    parser.add_argument("--keep", action="store_true", help="leave the benchmark cluster running")
    parser.add_argument("--state-dir", type=Path, help="measure the existing cluster of this state directory")
    parser.add_argument("--name", default="bench", help="its DEEPOPS_VIRTUAL_NAME (with --state-dir)")
    args = parser.parse_args()
    own = args.state_dir is None
    state = Path(tempfile.mkdtemp(prefix="deepops-bench-")) if own else args.state_dir.resolve()
    env = {**os.environ, "DEEPOPS_STATE_DIR": str(state), "DEEPOPS_VIRTUAL_NAME": args.name}
    env.pop("DEEPOPS_INVENTORY", None)
    report: dict = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg()[0]},
        "cluster": "own" if own else str(state),
    }
    try:
        if own:
            _deepops(env, "virtual", "down")
            for key, step in (("virtual_up_s", ("virtual", "up")), ("deploy_s", ("deploy", "--json"))):
                seconds, _, rc = _deepops(env, *step)
                report[key] = round(seconds, 1)
                if rc:
                    report["error"] = f"deepops {step[0]} failed (rc={rc})"
                    break
        if "error" not in report:
            report["validate"] = measure(env, state, args.runs)
    finally:
        if own and not args.keep:
            _deepops(env, "virtual", "down")
            shutil.rmtree(state, ignore_errors=True)
    print(json.dumps(report, indent=2))
    sys.exit(1 if "error" in report else 0)


if __name__ == "__main__":
    main()
