"""The GPU checks of ``deepops validate`` (dcgm, nccl, burnin) from the role's job runs to results.

The role runs its diagnostics with ``roles/validate/files/jobs.sh``: job steps
side by side, one line per job (``NODES<TAB>RC<TAB>SECONDS<TAB>b64 stdout<TAB>b64 stderr``).
This module reads those lines, says which jobs to run next (the nccl check's
cross-node run, then its pair tests, rounds at most ``NCCL_ROUNDS``), and
builds every node's result with the parsers and verdicts of ``dcgm_diag`` and
``nccl_tests``. It also lists the nodes ``--drain-failed`` drains, with the
reason naming the check and the figure.

Pure functions, standard library only, and no Ansible import.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import dcgm_diag, gpu_performance, nccl_tests
from ansible_collections.deepops.cluster.plugins.module_utils.validation import FAIL, NOT_APPLICABLE, result

__all__ = [
    "GPU_CHECKS",
    "NCCL_ROUNDS",
    "burnin_results",
    "dcgm_results",
    "drain_list",
    "job_specs",
    "nccl_next_jobs",
    "nccl_results",
    "parse_job_lines",
    "versions",
]

# Checks whose failure --drain-failed acts on: the GPUs themselves misbehave.
GPU_CHECKS = ("gpus", "mig", "dcgm", "nccl", "burnin")
# Job runs of the nccl check: per node and across nodes, then pair tests (two rounds in the usual case).
NCCL_ROUNDS = 3
DRAIN_REASON_LIMIT = 200  # Slurm keeps reasons short; scontrol shows them on one line


def parse_job_lines(stdout: Any) -> list[dict[str, Any]]:
    """jobs.sh's lines -> ``[{"nodes": [...], "rc": int, "seconds": float, "stdout": str, "stderr": str}]``."""
    jobs = []
    for line in ("" if stdout is None else str(stdout)).splitlines():
        fields = line.split("\t")
        if len(fields) != 5:
            continue
        nodes, rc, seconds, out, err = fields
        try:
            jobs.append({
                "nodes": [node for node in nodes.split(",") if node],
                "rc": int(rc),
                "seconds": float(seconds),
                "stdout": base64.b64decode(out).decode("utf-8", "replace"),
                "stderr": base64.b64decode(err).decode("utf-8", "replace"),
            })
        except (ValueError, binascii.Error):
            continue
    return jobs


def job_specs(node_sets: Sequence[Any], gpus: Mapping[str, Any]) -> list[str]:
    """jobs.sh's ``NODES=GPUS`` arguments: each set (a node name is a set of one) with the GPUs
    per node all its nodes have (the fewest)."""
    specs = []
    for entry in node_sets:
        nodes = [entry] if isinstance(entry, str) else list(entry)
        counts = [int(gpus.get(node) or 0) for node in nodes]
        if nodes and min(counts) > 0:
            specs.append(f"{','.join(nodes)}={min(counts)}")
    return specs


def _by_nodes(runs: Any) -> dict[tuple[str, ...], dict[str, Any]]:
    """Job runs (one or more jobs.sh outputs) keyed by their node set; a later run of a set wins."""
    outputs = runs if isinstance(runs, list) else [runs]
    return {tuple(job["nodes"]): job for output in outputs for job in parse_job_lines(output)}


def _error(job: Mapping[str, Any] | None, problem: str = "") -> str:
    if job is None:
        return "not run"
    text = " ".join(f"{problem} {job['stderr']}".split()) or "no output"
    return f"rc={job['rc']}: {text}"[:300]


def _per_node(check: str, cluster: Mapping[str, Any], judge) -> list[dict[str, Any]]:
    """One result per compute node: unusable fails, without GPUs not applicable, else ``judge(node)``."""
    results = []
    for node in cluster["computes"]:
        if node not in cluster["usable"]:
            results.append(result(check, node, FAIL, "not run: the node is not usable (see the nodes check)"))
        elif not cluster["gpus"].get(node):
            results.append(result(check, node, NOT_APPLICABLE, "no GPUs in Slurm's GRES"))
        else:
            results.append(judge(node))
    return results


def _parsed_diag(job: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    if job is None:
        return None, "not run"
    try:
        return dcgm_diag.parse_diag(job["stdout"]), ""
    except dcgm_diag.DcgmParseError as problem:
        return None, _error(job, str(problem))


def dcgm_results(runs: Any, cluster: Mapping[str, Any], level: Any = dcgm_diag.DEFAULT_LEVEL) -> list[dict[str, Any]]:
    """``dcgmi diag -r <level> -j`` on each node with GPUs, judged by ``dcgm_diag.dcgm_result``."""
    jobs = _by_nodes(runs)

    def judge(node: str) -> dict[str, Any]:
        job = jobs.get((node,))
        parsed, error = _parsed_diag(job)
        return dcgm_diag.dcgm_result(node, parsed, int(level), job["seconds"] if job else 0.0, error)

    return _per_node(dcgm_diag.DCGM_CHECK, cluster, judge)


def burnin_results(runs: Any, cluster: Mapping[str, Any], node_facts: Mapping[str, Any],
                   tflops_fraction: Any = gpu_performance.BURNIN_TFLOPS_FRACTION,
                   mem_bw_fraction: Any = gpu_performance.BURNIN_MEM_BW_FRACTION) -> list[dict[str, Any]]:
    """The burn-in run (``dcgmi diag`` stress tests) on each node with GPUs, per GPU against its model's peaks."""
    jobs = _by_nodes(runs)

    def judge(node: str) -> dict[str, Any]:
        job = jobs.get((node,))
        parsed, error = _parsed_diag(job)
        models = [gpu.get("product_name") or gpu.get("type") for gpu in _gpu_facts(node_facts, node).get("gpus") or []]
        return dcgm_diag.burnin_result(node, parsed, models, None, job["seconds"] if job else 0.0,
                                       float(tflops_fraction), float(mem_bw_fraction), error)

    return _per_node(dcgm_diag.BURNIN_CHECK, cluster, judge)


def _gpu_facts(node_facts: Any, node: str) -> dict[str, Any]:
    """The node's ``deepops_gpus`` fact from ``{node: ansible_facts}``; {} when it was not reached."""
    facts = (node_facts or {}).get(node) if isinstance(node_facts, Mapping) else None
    gpus = facts.get("deepops_gpus") if isinstance(facts, Mapping) else None
    return dict(gpus) if isinstance(gpus, Mapping) else {}


def _parsed_nccl(job: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    if job is None:
        return None, "not run"
    try:
        return nccl_tests.parse_all_reduce(job["stdout"]), ("" if job["rc"] == 0 else _error(job))
    except nccl_tests.NcclParseError as problem:
        return None, _error(job, str(problem))


def _gpu_nodes(cluster: Mapping[str, Any]) -> list[str]:
    return [node for node in cluster["computes"] if node in cluster["usable"] and cluster["gpus"].get(node)]


def _internode_threshold(overrides: Any, cluster: Mapping[str, Any], node_facts: Any) -> float | None:
    """The cross-node mark: the override ``<model>/internode`` of the nodes' one GPU model, if set."""
    checked = gpu_performance.validate_overrides(overrides or {})
    models = {gpu_performance.model_key(model) for node in _gpu_nodes(cluster)
              for model in _gpu_facts(node_facts, node).get("types") or []}
    marks = [checked.get(f"{model}/{gpu_performance.INTERNODE}") for model in models]
    return marks[0] if len(marks) == 1 else None


def _nccl_state(runs: Any, cluster: Mapping[str, Any], node_facts: Any, overrides: Any) -> dict[str, Any]:
    """Everything the runs so far show: per-node results, the cross-node run and the pair tests' isolation."""
    jobs = _by_nodes(runs)
    nodes = _gpu_nodes(cluster)
    per_node = {}
    for node in nodes:
        job = jobs.get((node,))
        parsed, error = _parsed_nccl(job)
        per_node[node] = nccl_tests.node_result(node, parsed, _gpu_facts(node_facts, node), overrides,
                                                job["seconds"] if job else 0.0, error)
    cross_job = jobs.get(tuple(nodes)) if len(nodes) > 1 else None
    cross, cross_error = _parsed_nccl(cross_job)
    threshold = _internode_threshold(overrides, cluster, node_facts)
    cross_failed = len(nodes) > 1 and (cross is None or not _pair_ok(cross, threshold))
    pairs = [(key, job) for key, job in jobs.items() if len(key) == 2]
    outcomes = nccl_tests.pair_outcomes([(key, _parsed_nccl(job)[0]) for key, job in pairs], threshold)
    known_bad = [node for node, entry in per_node.items() if entry["status"] == FAIL]
    isolation = nccl_tests.isolate_faulty(nodes, outcomes, known_bad) if cross_failed else None
    return {"nodes": nodes, "per_node": per_node, "cross_job": cross_job, "cross": cross,
            "cross_error": cross_error, "threshold": threshold, "cross_failed": cross_failed,
            "pairs_run": [list(key) for key, _job in pairs], "isolation": isolation}


def _pair_ok(parsed: Mapping[str, Any], threshold: float | None) -> bool:
    [outcome] = nccl_tests.pair_outcomes([(("a", "b"), parsed)], threshold)
    return outcome["ok"]


def nccl_next_jobs(runs: Any, cluster: Mapping[str, Any], node_facts: Any, overrides: Any = None) -> list[str]:
    """jobs.sh specs to run next: first every node alone and all nodes together, then pair tests; [] when done."""
    state = _nccl_state(runs, cluster, node_facts, overrides)
    nodes = state["nodes"]
    if not _by_nodes(runs):
        return job_specs([[node] for node in nodes] + ([nodes] if len(nodes) > 1 else []), cluster["gpus"])
    if not state["cross_failed"]:
        return []
    if not state["pairs_run"]:
        return job_specs([list(pair) for pair in nccl_tests.plan_pairs(nodes)], cluster["gpus"])
    return job_specs([list(pair) for pair in state["isolation"]["next_pairs"]], cluster["gpus"])


def nccl_results(runs: Any, cluster: Mapping[str, Any], node_facts: Any, overrides: Any = None) -> list[dict[str, Any]]:
    """Every GPU node's result, then the cross-node one (node ``all``) naming the node(s) the pair tests blame."""
    state = _nccl_state(runs, cluster, node_facts, overrides)
    results = _per_node(nccl_tests.CHECK, cluster, lambda node: state["per_node"][node])
    if len(state["nodes"]) > 1:
        job = state["cross_job"]
        cross = nccl_tests.cluster_result(state["nodes"], state["cross"], state["isolation"], state["threshold"],
                                          job["seconds"] if job else 0.0, state["cross_error"])
        cross["measurements"]["faulty"] = list((state["isolation"] or {}).get("faulty") or [])
        results.append(cross)
    return results


def drain_list(results: Any, checks: Sequence[str] = GPU_CHECKS) -> list[dict[str, str]]:
    """``[{"node", "reason"}]``: each node failing a GPU check, once, the reason naming the check(s) and figures.

    A cross-node nccl failure drains the node(s) its pair tests named, never all of them.
    """
    reasons: dict[str, list[str]] = {}
    for entry in results or []:
        if not isinstance(entry, Mapping) or entry.get("status") != FAIL or entry.get("check") not in checks:
            continue
        if entry.get("node") == nccl_tests.CLUSTER_NODE:
            nodes = (entry.get("measurements") or {}).get("faulty") or []
        else:
            nodes = [entry.get("node")]
        for node in nodes:
            if node:
                reasons.setdefault(str(node), []).append(f"{entry['check']}: {entry.get('detail', '')}")
    return [
        {"node": node, "reason": _reason("deepops validate " + "; ".join(texts))}
        for node, texts in reasons.items()
    ]


def _reason(text: str) -> str:
    """A drain reason Slurm and a shell take as one argument: one line, no quotes, bounded."""
    text = " ".join(text.replace('"', "'").split())
    return text if len(text) <= DRAIN_REASON_LIMIT else text[: DRAIN_REASON_LIMIT - 3] + "..."


def versions(slurm_version: Any, node_facts: Any) -> dict[str, Any]:
    """What the report's versions table shows: Slurm's (``sinfo --version``: ``slurm-wlm 22.05.8``) and
    each compute node's driver and CUDA from its GPU facts; unknown ones are None."""
    words = ("" if slurm_version is None else str(slurm_version)).split()
    nodes = {}
    for node in sorted(node_facts or {}) if isinstance(node_facts, Mapping) else []:
        facts = _gpu_facts(node_facts, node)
        if facts.get("present"):
            nodes[str(node)] = {"driver": facts.get("driver_version"), "cuda": facts.get("cuda_version"), "nccl": None}
    return {"slurm": words[-1] if words else None, "nodes": nodes}
