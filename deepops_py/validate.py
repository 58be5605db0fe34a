"""``deepops validate``: run playbooks/validate.yml (the validate role, on the controller) and build the report.

The role submits short test jobs and records each check's results with
``set_stats``; the report is built from the run's stats data (``RunResult.data``),
never from Ansible's output. The checks, and which of them ``--skip`` may
leave out, are the collection's one list (``plugins/module_utils/validation.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepops_py import reports
from deepops_py.errors import InputError
from deepops_py.inventory import COMPUTE, CONTROLLER, Cluster

PLAYBOOK = "validate.yml"


def build_request(
    cluster: Cluster,
    *,
    skip: tuple[str, ...] = (),
    extra_vars: dict[str, Any] | None = None,
    forks: int | None = None,
    wait: bool = False,
    burn_in_minutes: int | None = None,
    drain_failed: bool = False,
):
    """The run request: the whole cluster, the skipped checks as ``validate_skip``, the burn-in's minutes
    (``validate_burnin_minutes``; none: the opt-in burnin check does not run) and ``validate_drain_failed``."""
    from deepops_py import runner

    unknown = sorted(set(skip) - set(reports.SKIPPABLE_CHECKS))
    if unknown:
        raise InputError(f"--skip {', '.join(unknown)}: not a check; choose from {', '.join(reports.SKIPPABLE_CHECKS)}")
    for group in (CONTROLLER, COMPUTE):
        if not cluster.groups.get(group):
            raise InputError(f"{cluster.inventory}: validation needs at least one host in {group}")
    variables = dict(extra_vars or {})
    variables["validate_skip"] = sorted(set(skip) | set(variables.get("validate_skip") or []))
    if burn_in_minutes is not None:
        variables["validate_burnin_minutes"] = burn_in_minutes
    if drain_failed:
        variables["validate_drain_failed"] = True
    return runner.RunRequest(
        command="validate",
        playbook=PLAYBOOK,
        inventory=Path(cluster.inventory),
        extra_vars=variables,
        forks=forks,
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )


def run_validation(
    cluster: Cluster,
    *,
    skip: tuple[str, ...] = (),
    extra_vars: dict[str, Any] | None = None,
    wait: bool = False,
    json_output: bool = False,
    burn_in_minutes: int | None = None,
    drain_failed: bool = False,
) -> tuple[reports.ValidationReport, Any]:
    """Run the checks; return the report and the run's result (for its per-host summary)."""
    from deepops_py import runner

    request = build_request(cluster, skip=skip, extra_vars=extra_vars, wait=wait, burn_in_minutes=burn_in_minutes,
                            drain_failed=drain_failed)
    result = runner.run_playbook(request, json_output=json_output)
    asked = [name for name in reports.OPT_IN_CHECKS if request.extra_vars.get(f"validate_{name}_minutes")]
    skipped = tuple(name for name in reports.SKIPPABLE_CHECKS
                    if name in request.extra_vars["validate_skip"] or (name in reports.OPT_IN_CHECKS and name not in asked))
    return reports.report_from_run(result, skipped), result
