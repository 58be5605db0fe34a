"""``deepops mig show`` and ``deepops mig apply``.

show runs ``playbooks/mig_show.yml``: the nvidia_mig module in check mode on
the compute nodes, which reports per GPU the MIG layout found and the one
``mig_layout`` declares (through set_stats, ``deepops_mig``); nothing changes.
apply runs ``playbooks/mig_apply.yml`` on the named compute nodes (all of
them by default), the controller(s) and the slurmdbd host(s): the mig role
(drain, wait, apply), then the Slurm component, which renders gres.conf from
the new GPU facts, reconfigures and resumes the nodes drained for MIG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepops_py import nodes
from deepops_py.inventory import COMPUTE, Cluster

SHOW_PLAYBOOK = "mig_show.yml"
APPLY_PLAYBOOK = "mig_apply.yml"
# The stats key mig_show.yml reports under: {host: {"layout": ..., "gpus": [...]}}.
STATS_KEY = "deepops_mig"


def build_show_request(cluster: Cluster, *, limit: str | None = None, extra_vars: dict[str, Any] | None = None, wait: bool = False):
    from deepops_py import runner

    return runner.RunRequest(
        command="mig-show",
        playbook=SHOW_PLAYBOOK,
        inventory=Path(cluster.inventory),
        limit=limit,
        extra_vars=dict(extra_vars or {}),
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )


def build_apply_request(
    cluster: Cluster, hosts: tuple[str, ...] | list[str], *, extra_vars: dict[str, Any] | None = None,
    forks: int | None = None, wait: bool = False,
):
    from deepops_py import runner

    targets = nodes.check_compute_hosts(cluster, hosts or cluster.groups.get(COMPUTE, []), action="repartition")
    return runner.RunRequest(
        command="mig-apply",
        playbook=APPLY_PLAYBOOK,
        inventory=Path(cluster.inventory),
        extra_vars={**(extra_vars or {}), nodes.NEW_NODES_VAR: targets},
        forks=forks,
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )


def layout_rows(result) -> list[dict[str, Any]]:
    """One row per node and GPU from a show run's stats, in host then GPU order."""
    rows = []
    for host, report in sorted(((result.data or {}).get(STATS_KEY) or {}).items()):
        for gpu in report.get("gpus") or []:
            managed = bool(gpu.get("managed"))
            mode = gpu.get("mig_mode") or {}
            if not managed:
                state = "unmanaged"
            elif gpu.get("reset_required") or mode.get("pending") != mode.get("current"):
                state = "reset pending"
            else:
                state = "differs" if gpu.get("changed") else "ok"
            rows.append(
                {
                    "host": host,
                    "gpu": gpu.get("index"),
                    "model": gpu.get("model") or gpu.get("product_name") or "?",
                    "mig_mode": mode.get("current", "N/A"),
                    "current": list(gpu.get("current") or []),
                    "declared": _declared(gpu, managed),
                    "state": state,
                }
            )
    return rows


def _declared(gpu: dict[str, Any], managed: bool) -> str:
    if not managed:
        return "-"
    if gpu.get("wanted_mig_mode") == "Disabled":
        return "disabled"
    return ", ".join(gpu.get("wanted") or []) or "(none)"


def layout_errors(result) -> dict[str, str]:
    """{host: message} for the nodes whose layout could not be read or does not fit their GPUs."""
    reports = (result.data or {}).get(STATS_KEY) or {}
    return {host: str(report["error"]) for host, report in sorted(reports.items()) if report.get("error")}


def print_layouts(rows: list[dict[str, Any]], errors: dict[str, str], console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    for host, message in errors.items():
        console.print(f"[red]{escape(host)}[/red]: {escape(message)}", highlight=False)
    if not rows:
        console.print("No GPU reported a MIG state (no compute node ran, or none has GPUs).")
        return
    table = Table(title="MIG layouts", title_justify="left")
    for column in ("node", "GPU", "model", "MIG", "current", "declared", "state"):
        table.add_column(column)
    colours = {"ok": "green", "differs": "yellow", "reset pending": "yellow", "unmanaged": "dim"}
    for row in rows:
        state = row["state"]
        table.add_row(
            escape(row["host"]), str(row["gpu"]), escape(row["model"]), escape(row["mig_mode"]),
            escape(", ".join(row["current"]) or "-"), escape(row["declared"]),
            f"[{colours.get(state, 'red')}]{state}[/]",
        )
    console.print(table)
