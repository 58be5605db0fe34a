"""The ``deepops`` command line: parse options, call a service, render.

Keep this module thin and its imports light: ``deepops --help`` must stay
fast, so Ansible, ansible-runner, paramiko and rich are imported inside the
commands that need them, never at module level.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click
from ansible_collections.deepops.cluster.plugins.module_utils import platforms

from deepops_py import __version__
from deepops_py.errors import DeepopsError, InputError, Interrupted, Problem

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# --------------------------------------------------------------------------
# options shared between commands (defined once)


def inventory_option(func):
    return click.option(
        "-i",
        "--inventory",
        "inventory",
        metavar="INV",
        help="Inventory file. Default: $DEEPOPS_INVENTORY, else config/inventory.yml, "
        "else the running virtual cluster's inventory.",
    )(func)


def json_option(func):
    return click.option("--json", "as_json", is_flag=True, help="Print a machine-readable JSON result on stdout.")(func)


def extra_vars_option(func):
    return click.option(
        "--extra-vars",
        "-e",
        "extra_vars",
        multiple=True,
        metavar="K=V",
        help="Extra variable, K=V or @file.yml; repeatable. Highest precedence.",
    )(func)


def forks_option(func):
    return click.option("--forks", "-f", type=click.IntRange(1, 500), default=None, help="Parallel hosts (default 20).")(func)


def wait_option(func):
    return click.option(
        "--wait",
        is_flag=True,
        help="If another deepops run holds this inventory, wait for it to end (default: exit 75 naming that run).",
    )(func)


def playbook_options(func):
    """Options of every command that runs a playbook (deploy, plan)."""
    decorators = [
        inventory_option,
        click.option("--limit", "-l", metavar="HOSTS", help="Only these hosts or groups (Ansible pattern)."),
        click.option("--tags", "-t", metavar="T", help="Only tasks with these tags (comma-separated)."),
        click.option("--skip-tags", metavar="T", help="Skip tasks with these tags (comma-separated)."),
        extra_vars_option,
        forks_option,
        wait_option,
        json_option,
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def handle_errors(func):
    """Map DeepopsError to its message and exit code; tracebacks only with --debug."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        ctx = click.get_current_context()
        try:
            return func(*args, **kwargs)
        except DeepopsError as error:
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"Error: {error.render()}", err=True)
            ctx.exit(error.exit_code)
        except KeyboardInterrupt as stop:
            click.echo("Interrupted.", err=True)
            ctx.exit(stop.exit_code if isinstance(stop, Interrupted) else 130)

    return wrapper


def _load_cluster(inventory):
    """The inventory a command uses (-i, else the defaults), said on stderr, then loaded and validated."""
    from deepops_py import inventory as inv

    source = inv.resolve_inventory(inventory)
    _say_inventory(source)
    return inv.load_cluster(source.path)


def _say_inventory(source) -> None:
    click.echo(f"Using inventory {source.path} ({source.origin})", err=True)


def _hint_stale_ports(cluster, unreachable) -> None:
    """Below a report of UNREACHABLE hosts: one line (stderr) for each virtual node whose SSH port changed since
    'deepops virtual up' wrote the inventory in use; nothing for other inventories, or when Docker cannot say."""
    ports = {name: cluster.hosts[name].port for name in unreachable if name in cluster.hosts}
    if not ports:
        return
    from deepops_py.virtual import cluster as virtual

    for line in virtual.stale_port_hints(Path(cluster.inventory), ports):
        click.echo(line, err=True)


def _parse_extra_vars(values: tuple[str, ...]) -> dict:
    """Turn repeated ``-e K=V`` / ``-e @file`` / ``-e '{json}'`` into one dict.

    Each value is checked against the roles' argument specs like the
    inventory's variables are (type, choices, misspelled names), so a bad -e
    stops here, before any host is contacted.
    """
    from ansible_collections.deepops.cluster.plugins.plugin_utils import schema

    result: dict = {}
    problems: list[Problem] = []
    known = schema.known_variables() if values else {}
    for value in values:
        source, loaded = _read_extra_vars(value)
        problems += [Problem(source, "", key, message) for key, message in schema.check_variables(loaded, known)]
        result.update(loaded)
    if problems:
        raise InputError("invalid extra variables (-e)", problems=problems)
    return result


def _read_extra_vars(value: str) -> tuple[str, dict]:
    """One -e value as (where it came from, its variables); YAML is read with
    the inventory's limits (size, depth, aliases, duplicate keys)."""
    from ansible_collections.deepops.cluster.plugins.plugin_utils import yaml_files

    if value.startswith("@"):
        path = Path(value[1:])
        try:
            loaded = yaml_files.load(path)
        except yaml_files.YamlFileError as error:
            raise InputError(f"-e {value}: {path}: {error}") from None
        if not isinstance(loaded, dict):
            raise InputError(f"-e {value}: {path} must hold a mapping of variables")
        return f"-e {value}", loaded
    if value.lstrip().startswith("{"):
        try:
            loaded = json.loads(value)
        except json.JSONDecodeError as error:
            raise InputError(f"-e {value!r}: not valid JSON: {error}") from None
        return "-e", loaded
    if "=" in value:
        key, _, raw = value.partition("=")
        if not key.isidentifier():
            raise InputError(f"-e {value!r}: {key!r} is not a valid variable name")
        try:
            return "-e", {key: yaml_files.loads(raw) if raw else ""}
        except yaml_files.YamlFileError as error:
            raise InputError(f"-e {value!r}: the value of {key} is {error}; for text, put the value in YAML quotes") from None
    raise InputError(f"-e {value!r}: expected K=V, @file.yml or a JSON object")


# --------------------------------------------------------------------------
# the commands


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="deepops")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def main(debug: bool) -> None:
    """Turn an inventory of GPU machines into a working Slurm GPU cluster.

    \b
    Quick start on one machine (Docker needed):
      deepops virtual up        # controller + 2 simulated GPU nodes
      deepops check             # validate inventory, preflight every host
      deepops deploy            # configure the cluster
    """


@main.command(context_settings=CONTEXT_SETTINGS)
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@handle_errors
def init(directory: Path | None, force: bool) -> None:
    """Write a commented starter config (inventory.yml, group_vars/) into DIRECTORY.

    DIRECTORY defaults to config/. Existing files are left alone unless --force.

    \b
    Examples:
      deepops init                 # writes config/inventory.yml and config/group_vars/
      deepops init site-a --force  # overwrite an existing site-a/
    """
    from deepops_py import starter

    target = directory or Path("config")
    written = starter.write_starter_config(target, force=force)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(f"Edit {target / 'inventory.yml'}, then run: deepops check")


@main.command(context_settings=CONTEXT_SETTINGS)
@inventory_option
@click.option("--no-ssh", is_flag=True, help="Validate the inventory only; do not contact hosts.")
@click.option("--limit", "-l", metavar="HOSTS", help="Preflight only these hosts or groups.")
@click.option("--forks", "-f", type=click.IntRange(1, 500), default=20, show_default=True, help="Parallel SSH checks.")
@click.option("--timeout", type=click.IntRange(1, 300), default=10, show_default=True, help="SSH timeout per host, seconds.")
@json_option
@handle_errors
def check(inventory, no_ssh, limit, forks, timeout, as_json) -> None:
    """Validate the inventory, then preflight every host over SSH.

    Stage 1 loads the inventory with Ansible and checks groups and variables
    against the schema. Stage 2 connects to every host in parallel: SSH
    reachable, root or sudo, python3 present, OS supported.

    Exit codes: 0 all good, 1 a host problem, 2 invalid input.

    \b
    Examples:
      deepops check
      deepops check -i site/inventory.yml --no-ssh
      deepops check --limit slurm_compute --json
    """
    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    click.echo(f"Inventory valid: {len(cluster.hosts)} hosts in {len(cluster.groups)} groups", err=True)
    if no_ssh:
        if as_json:
            click.echo(json.dumps({"inventory": str(cluster.inventory), "valid": True, "hosts": sorted(cluster.hosts)}))
        return
    from deepops_py import preflight

    results = preflight.run_preflight(cluster, limit=limit, forks=forks, timeout=timeout)
    if as_json:
        click.echo(json.dumps(preflight.results_as_dict(results), indent=2))
    else:
        preflight.print_table(results)
    _hint_stale_ports(cluster, preflight.unreachable_hosts(results))
    if any(not result.ok for result in results):
        sys.exit(1)


def _run_playbook_command(command: str, *, check_mode: bool, inventory, limit, tags, skip_tags, extra_vars, forks, wait, as_json):
    from deepops_py import runner

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    request = runner.RunRequest(
        command=command,
        playbook="site.yml",
        inventory=Path(cluster.inventory),
        limit=limit,
        tags=tags,
        skip_tags=skip_tags,
        extra_vars=_parse_extra_vars(extra_vars),
        forks=forks,
        check=check_mode,
        diff=check_mode,
        inventory_hosts=tuple(cluster.hosts),
        wait_for_lock=wait,
    )
    _finish_run(runner.run_playbook(request, json_output=as_json), as_json, cluster)


def _finish_run(result, as_json: bool, cluster) -> None:
    """Print a playbook run's result (JSON or the summary table); exit 1 unless it went well."""
    from deepops_py import runner

    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        runner.print_summary(result)
    _hint_stale_ports(cluster, result.unreachable_hosts)
    if not result.ok:
        sys.exit(1)


@main.command(context_settings=CONTEXT_SETTINGS)
@playbook_options
@handle_errors
def deploy(inventory, limit, tags, skip_tags, extra_vars, forks, wait, as_json) -> None:
    """Validate the inventory, then configure every host (playbooks/site.yml).

    Shows live progress per host and ends with a per-host summary. Artifacts
    of the run are kept under .deepops/runs/<id>/ (see: deepops runs).
    Exits non-zero if any host failed or was unreachable.

    \b
    Examples:
      deepops deploy
      deepops deploy --limit gpu01,gpu02 --tags common
      deepops deploy -e common_apt_proxy=http://cache:3142 --json
    """
    _run_playbook_command(
        "deploy", check_mode=False, inventory=inventory, limit=limit, tags=tags,
        skip_tags=skip_tags, extra_vars=extra_vars, forks=forks, wait=wait, as_json=as_json,
    )


def drain_options(jobs: str, timeout_var: str, past_it: str):
    """--timeout and --force of a command that drains nodes and waits for JOBS."""
    def decorate(func):
        func = click.option(
            "--force",
            is_flag=True,
            help="Requeue the running jobs instead of waiting; jobs that cannot be requeued are cancelled "
            "(the summary names them).",
        )(func)
        return click.option(
            "--timeout",
            type=click.IntRange(min=0),
            default=None,
            metavar="SECONDS",
            help=f"How long to wait for {jobs} to end (default: the slurm role's {timeout_var}). Past it {past_it}.",
        )(func)
    return decorate


def batch_option(func):
    return click.option(
        "--batch", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
        help="Compute nodes updated at a time, after the servers.",
    )(func)


@main.command(context_settings=CONTEXT_SETTINGS)
@playbook_options
@click.option("--upgrade", is_flag=True, help="Show the steps of deepops upgrade and what it would change, instead of deploy's.")
@batch_option
@handle_errors
def plan(inventory, limit, tags, skip_tags, extra_vars, forks, wait, as_json, upgrade, batch) -> None:
    """Show what deploy would change, per host, without changing anything.

    Runs the site playbook in Ansible's check and diff mode. With --upgrade,
    lists the steps of deepops upgrade (the servers, then the compute nodes in
    batches of --batch) and runs its playbook in check mode over every host at
    once: the packages it would update, the nodes it would drain.

    \b
    Examples:
      deepops plan
      deepops plan --limit slurm_compute --json
      deepops plan --upgrade --batch 4
    """
    if upgrade:
        _plan_upgrade(inventory, limit, tags, skip_tags, extra_vars, forks, wait, as_json, batch)
        return
    _run_playbook_command(
        "plan", check_mode=True, inventory=inventory, limit=limit, tags=tags,
        skip_tags=skip_tags, extra_vars=extra_vars, forks=forks, wait=wait, as_json=as_json,
    )


def _plan_upgrade(inventory, limit, tags, skip_tags, extra_vars, forks, wait, as_json, batch) -> None:
    from deepops_py import runner, upgrade

    if limit or tags or skip_tags:
        raise InputError("deepops plan --upgrade takes no --limit, --tags or --skip-tags: an upgrade runs whole steps")
    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    steps = upgrade.plan_steps(cluster, batch)
    variables = _parse_extra_vars(extra_vars)
    every_host = [host for step in steps for host in step["hosts"]]
    request = upgrade.build_request(cluster, every_host, check=True, extra_vars=variables, forks=forks, wait=wait)
    if not as_json:
        for line in upgrade.step_lines(steps):
            click.echo(line, err=True)
    result = runner.run_playbook(request, json_output=as_json)
    if as_json:
        click.echo(json.dumps({**result.as_dict(), "upgrade_steps": steps}, indent=2))
        if not result.ok:
            sys.exit(1)
        return
    _finish_run(result, as_json, cluster)


@main.command(context_settings=CONTEXT_SETTINGS)
@batch_option
@drain_options("the jobs on a batch's drained nodes", "slurm_upgrade_timeout",
               "the upgrade stops, the batch's nodes drained and not updated, and the command exits 1")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@inventory_option
@extra_vars_option
@forks_option
@wait_option
@json_option
@handle_errors
def upgrade(batch, timeout, force, yes, inventory, extra_vars, forks, wait, as_json) -> None:
    """Update the cluster's packages in rolling steps, servers first, then compute nodes in batches.

    Runs playbooks/upgrade.yml once per step. The servers (slurmdbd host,
    controllers, login, monitoring and NFS hosts) go first, in SchedMD's order
    for Slurm: the accounting database is dumped, then slurmdbd, slurmctld and
    the rest are updated. Then, --batch compute nodes at a time: drain them and
    wait for their jobs (--timeout; --force requeues them), apply the package
    updates the inventory asks for (the newest packages the repositories
    offer; the driver branch and CUDA version the inventory names), reboot
    where the packages ask for it, check each node (slurmd registered, the GPU
    health check, a test job using all its GPUs, inside a maintenance
    reservation) and resume it. The first step that fails stops the upgrade:
    its failed nodes stay drained with the reason, later batches are left
    untouched. A node drained for another reason is updated but stays
    drained. See the steps first with: deepops plan --upgrade. Exits 2
    (touching nothing) on bad input, 1 if a step failed.

    \b
    Examples:
      deepops plan --upgrade --batch 2      # the steps, and what would change
      deepops upgrade --batch 2 --yes
      deepops upgrade --timeout 600 --json --yes
    """
    from deepops_py import runner
    from deepops_py import upgrade as rolling

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    variables = _parse_extra_vars(extra_vars)
    steps = rolling.plan_steps(cluster, batch)
    if not yes:
        if not sys.stdin.isatty():
            raise InputError("An upgrade drains compute nodes and needs confirmation: add --yes "
                             "(or run deepops plan --upgrade to look first)")
        for line in rolling.step_lines(steps):
            click.echo(line, err=True)
        click.confirm(f"Upgrade in {len(steps)} step(s){', requeueing running jobs' if force else ''}?", abort=True, err=True)
    done = rolling.run_steps(
        cluster, steps, json_output=as_json, announce=None if as_json else lambda line: click.echo(line, err=True),
        timeout=timeout, force=force, extra_vars=variables, forks=forks, wait=wait,
    )
    report = rolling.report(steps, done)
    notes = rolling.notes(steps, done)
    if as_json:
        click.echo(json.dumps({**report, "notes": notes}, indent=2))
    else:
        runner.print_summary(done[-1].result)
        for note in notes:
            click.echo(note, err=True)
        _hint_stale_ports(cluster, done[-1].result.unreachable_hosts)
    if not report["ok"]:
        sys.exit(1)


def _validation_checks():
    """The collection's one list of validation checks (plugins/module_utils/validation.py).

    That module imports the standard library only, so reading it here keeps
    ``deepops --help`` fast; Ansible itself is not imported.
    """
    from ansible_collections.deepops.cluster.plugins.module_utils import validation

    return validation


def _validate_help() -> str:
    import textwrap

    checks = _validation_checks().CHECKS
    width = max(len(check.name) for check in checks) + 2
    rows = [
        textwrap.fill(check.description, width=94, initial_indent=f"  {check.name:<{width}}",
                      subsequent_indent=" " * (width + 2))
        for check in checks
    ]
    return (
        "Check that the deployed Slurm cluster works (playbooks/validate.yml, the validate role).\n\n"
        "From the controller, with short test jobs it cancels afterwards:\n\n"
        "\b\n" + "\n".join(rows) + "\n\n"
        "Each result is pass, fail or not applicable (with the reason, e.g. a node without GPUs). "
        "Prints a table (or --json); --junit FILE writes JUnit XML too (not applicable: <skipped>); "
        "--report FILE writes the acceptance report as one self-contained HTML page, whatever the verdict. "
        "Results from the virtual cluster's stand-in tools are marked simulated in every output. "
        "--burn-in MINUTES adds the opt-in burnin check; --drain-failed drains the nodes failing a GPU check. "
        "Settings: the validate role's argument specs, roles/validate/meta/argument_specs.yml.\n\n"
        "Exit codes: 0 no check failed, 1 a check or the run failed, 2 invalid input.\n\n"
        "\b\n"
        "Examples:\n"
        "  deepops validate\n"
        "  deepops validate --skip preemption --junit validate.xml\n"
        "  deepops validate --report acceptance.html\n"
        "  deepops validate --burn-in 10 --drain-failed --report acceptance.html\n"
        "  deepops validate -e validate_preemption_bound=120 --json\n"
    )


def _output_file_option(flag: str, dest: str, help: str):
    """An option naming a file a command writes (a directory is refused by click: exit 2)."""
    return click.option(flag, dest, metavar="FILE", type=click.Path(dir_okay=False, writable=True, path_type=Path), help=help)


def _check_output_files(files: dict[str, Path | None]) -> None:
    """Before anything runs: each file's directory exists, and no two options name the same file."""
    seen: dict[Path, str] = {}
    for flag, path in files.items():
        if path is None:
            continue
        if not path.absolute().parent.is_dir():
            raise InputError(f"{flag} {path}: directory {path.absolute().parent} does not exist")
        if path.resolve() in seen:
            raise InputError(f"{flag} {path}: {seen[path.resolve()]} writes the same file")
        seen[path.resolve()] = flag


def _write_output_file(flag: str, path: Path | None, render) -> None:
    if path is None:
        return
    try:
        path.write_text(render(), encoding="utf-8")
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write: {error.strerror}") from None


def _cluster_name(cluster) -> str:
    """Slurm's name for the cluster (slurm_cluster_name), else the inventory it comes from."""
    from deepops_py.inventory import CONTROLLER

    controllers = cluster.groups.get(CONTROLLER) or []
    name = cluster.hosts[controllers[0]].vars.get("slurm_cluster_name") if controllers else None
    return str(name) if name else str(cluster.inventory)


@main.command(context_settings=CONTEXT_SETTINGS, help=_validate_help())
@inventory_option
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(_validation_checks().SKIPPABLE_CHECKS),
    help="Leave out this check; repeatable. The nodes check always runs.",
)
@extra_vars_option
@_output_file_option("--junit", "junit_file", "Also write the results as JUnit XML to FILE.")
@_output_file_option(
    "--report",
    "report_file",
    "Also write the acceptance report to FILE: one self-contained HTML page (versions, a verdict per check and "
    "node, NCCL bandwidth plots, DCGM and burn-in figures).",
)
@click.option(
    "--burn-in",
    "burn_in_minutes",
    metavar="MINUTES",
    type=click.IntRange(1, 1440),
    help="Also run the burnin check: DCGM's stress tests for MINUTES each on every GPU node (opt-in).",
)
@click.option(
    "--drain-failed",
    is_flag=True,
    help="Drain each node that fails a GPU check (gpus, mig, dcgm, nccl, burnin), the reason naming the check "
    "and its figure.",
)
@wait_option
@json_option
@handle_errors
def validate(inventory, skip, extra_vars, junit_file, report_file, burn_in_minutes, drain_failed, wait, as_json) -> None:
    """Check that the deployed Slurm cluster works (help: _validate_help, built from the check list)."""
    from datetime import datetime, timezone

    from deepops_py import html_report, reports, runner, validate as validation

    _check_output_files({"--junit": junit_file, "--report": report_file})
    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    report, result = validation.run_validation(
        cluster, skip=tuple(skip), extra_vars=_parse_extra_vars(extra_vars), wait=wait, json_output=as_json,
        burn_in_minutes=burn_in_minutes, drain_failed=drain_failed,
    )
    generated_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    _write_output_file("--junit", junit_file, lambda: reports.to_junit(report))
    _write_output_file(
        "--report",
        report_file,
        lambda: html_report.render_html(report, cluster_name=_cluster_name(cluster), generated_at=generated_at),
    )
    if as_json:
        click.echo(json.dumps({**report.as_dict(), "failed_hosts": result.failed_hosts}, indent=2))
    else:
        if not result.ok:
            runner.print_summary(result)
        reports.print_table(report)
    _hint_stale_ports(cluster, result.unreachable_hosts)
    if not report.ok:
        sys.exit(1)


@main.group(context_settings=CONTEXT_SETTINGS)
def node() -> None:
    """Add compute nodes to a deployed cluster, or remove them.

    \b
    Examples:
      deepops node add gpu03            # after adding gpu03 to slurm_compute in the inventory
      deepops node add gpu03 gpu04 --json
      deepops node remove gpu03 --yes   # drain, wait for its jobs, take it out
    """


@node.command("add", context_settings=CONTEXT_SETTINGS)
@click.argument("hosts", nargs=-1, required=True, metavar="HOST...")
@inventory_option
@extra_vars_option
@forks_option
@wait_option
@json_option
@handle_errors
def node_add(hosts, inventory, extra_vars, forks, wait, as_json) -> None:
    """Configure new compute nodes, then update and reconfigure the controller.

    Add each HOST to slurm_compute in the inventory first. Runs
    playbooks/add_node.yml on the new hosts, the controller(s), the slurmdbd,
    NFS and monitoring hosts and the login nodes: the new nodes come up idle
    with their GPUs as GRES, the controller learns them without restarting
    running jobs, and Prometheus scrapes them. The other compute nodes only
    get the new hosts in /etc/hosts. Exits 2 (touching nothing) if a HOST is not in slurm_compute,
    1 if the run failed.

    \b
    Examples:
      deepops node add gpu03
      deepops node add gpu03 gpu04 -i site/inventory.yml --json
    """
    from deepops_py import nodes

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    variables = _parse_extra_vars(extra_vars)
    new_hosts = nodes.check_new_hosts(cluster, hosts)  # before anything runs: exit 2 touches nothing
    click.echo(f"Adding {', '.join(new_hosts)}; running on: {', '.join(nodes.target_hosts(cluster, new_hosts))}", err=True)
    result = nodes.add_nodes(cluster, new_hosts, extra_vars=variables, forks=forks, wait=wait, json_output=as_json)
    _finish_run(result, as_json, cluster)


@node.command("remove", context_settings=CONTEXT_SETTINGS)
@click.argument("hosts", nargs=-1, required=True, metavar="HOST...")
@drain_options("the jobs on the drained nodes", "slurm_remove_timeout",
               "nothing is removed, the jobs keep running and the command exits 1")
@click.option("--check", is_flag=True, help="Show what would change (check mode); drain, requeue and change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@inventory_option
@extra_vars_option
@forks_option
@wait_option
@json_option
@handle_errors
def node_remove(hosts, timeout, force, check, yes, inventory, extra_vars, forks, wait, as_json) -> None:
    """Drain compute nodes, wait for their jobs, then take them out of the cluster.

    Runs playbooks/remove_node.yml: drains each HOST with a reason, waits for
    its jobs to end (--timeout; --force requeues them, cancelling those that
    cannot be requeued), stops and disables slurmd and the exporters on it (an
    unreachable HOST is removed all the same, and the summary says so), renders
    slurm.conf and gres.conf without it and reconfigures slurmctld, and drops
    it from Prometheus' targets and the other hosts' /etc/hosts. Nothing else
    changes. Keep HOST in the inventory for the run; delete it from there
    afterwards. Exits 2 (touching nothing) if a HOST is not a compute node, is
    also the controller, slurmdbd, monitoring or login host, or would leave no
    compute node; 1 if the run failed or jobs still ran at the timeout.

    \b
    Examples:
      deepops node remove gpu03 --yes
      deepops node remove gpu03 gpu04 --timeout 600 --json --yes
      deepops node remove gpu03 --force --yes   # requeue its jobs now
      deepops node remove gpu03 --check         # what would change
    """
    from deepops_py import nodes, runner

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    variables = _parse_extra_vars(extra_vars)
    removed = nodes.check_removable_hosts(cluster, hosts)  # before anything runs: exit 2 touches nothing
    if not (yes or check):
        if not sys.stdin.isatty():
            raise InputError(f"Removing {', '.join(removed)} needs confirmation: add --yes (or --check to look first)")
        click.confirm(f"Drain and remove {', '.join(removed)}{' (requeueing their jobs)' if force else ''}?", abort=True, err=True)
    targets = nodes.remove_target_hosts(cluster, removed)
    click.echo(f"Removing {', '.join(removed)}; running on: {', '.join(targets)}", err=True)
    result = nodes.remove_nodes(
        cluster, removed, timeout=timeout, force=force, check=check, extra_vars=variables, forks=forks, wait=wait,
        json_output=as_json,
    )
    notes = nodes.removal_notes(result, removed)
    if as_json:
        click.echo(json.dumps({**result.as_dict(), "removed": removed if result.ok and not check else [], "notes": notes}, indent=2))
        if not result.ok:
            sys.exit(1)
        return
    runner.print_summary(result)
    for note in notes:
        click.echo(note, err=True)
    _hint_stale_ports(cluster, result.unreachable_hosts)
    if not result.ok:
        sys.exit(1)


@main.group(context_settings=CONTEXT_SETTINGS)
def mig() -> None:
    """MIG layouts of the compute nodes' GPUs (mig_layout in the inventory).

    \b
    Examples:
      deepops mig show
      deepops mig apply gpu02        # drains gpu02 only if its GPUs must change
      deepops mig apply --json       # every compute node
    """


@mig.command("show", context_settings=CONTEXT_SETTINGS)
@inventory_option
@click.option("--limit", "-l", metavar="HOSTS", help="Only these hosts or groups (Ansible pattern).")
@extra_vars_option
@wait_option
@json_option
@handle_errors
def mig_show(inventory, limit, extra_vars, wait, as_json) -> None:
    """Per node and GPU, the MIG layout found against the declared one.

    Changes nothing. State: ok (matches), differs (deepops mig apply or
    deploy would change it), reset pending (a MIG mode change waits for a GPU
    reset or reboot), unmanaged (mig_layout leaves it alone). Exits 1 if a
    node could not be read or its layout does not fit its GPUs.
    """
    from deepops_py import mig as migs
    from deepops_py import runner

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    request = migs.build_show_request(cluster, limit=limit, extra_vars=_parse_extra_vars(extra_vars), wait=wait)
    result = runner.run_playbook(request, json_output=as_json)
    rows, errors = migs.layout_rows(result), migs.layout_errors(result)
    if as_json:
        click.echo(json.dumps({"run_id": result.run_id, "ok": result.ok and not errors, "gpus": rows, "errors": errors}, indent=2))
    else:
        if not result.ok:
            runner.print_summary(result)
        migs.print_layouts(rows, errors)
    if not result.ok or errors:
        sys.exit(1)


@mig.command("apply", context_settings=CONTEXT_SETTINGS)
@click.argument("hosts", nargs=-1, metavar="[HOST]...")
@inventory_option
@extra_vars_option
@forks_option
@wait_option
@json_option
@handle_errors
def mig_apply(hosts, inventory, extra_vars, forks, wait, as_json) -> None:
    """Apply mig_layout on the compute nodes HOST... (default: all of them).

    Runs playbooks/mig_apply.yml on those nodes, the controller(s) and the
    slurmdbd host(s): a node whose GPUs already match is not touched; one
    that must change is drained, its jobs are waited for (mig_drain_timeout;
    then it fails and stays drained unless mig_force), its GPUs are changed,
    gres.conf is rendered with its MIG devices, Slurm reconfigured and the
    node resumed. deepops deploy does the same on every node. Exits 2
    (touching nothing) if a HOST is not in slurm_compute, 1 if the run failed.
    """
    from deepops_py import mig as migs
    from deepops_py import runner

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    request = migs.build_apply_request(cluster, hosts, extra_vars=_parse_extra_vars(extra_vars), forks=forks, wait=wait)
    _finish_run(runner.run_playbook(request, json_output=as_json), as_json, cluster)


@main.group(context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.pass_context
@json_option
@handle_errors
def runs(ctx, as_json) -> None:
    """List past runs (id, command, start, duration, result).

    The last 50 runs are kept under .deepops/runs/; set $DEEPOPS_RUNS_KEEP to
    keep another number (0 keeps every run). When a run starts, the oldest
    finished runs beyond that are removed; a running one never is.

    \b
    Examples:
      deepops runs
      deepops runs show 20261130-101500-deploy
    """
    if ctx.invoked_subcommand is not None:
        return
    from deepops_py import history

    records = history.list_runs()
    if as_json:
        click.echo(json.dumps([record.as_dict() for record in records], indent=2))
    else:
        history.print_runs(records)


@runs.command("show", context_settings=CONTEXT_SETTINGS)
@click.argument("run_id")
@json_option
@handle_errors
def runs_show(run_id, as_json) -> None:
    """Show one run's per-host summary."""
    from deepops_py import history, runner

    result = history.load_run(run_id)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        runner.print_summary(result)


@main.command(context_settings=CONTEXT_SETTINGS)
@inventory_option
@click.option("--timeout", type=click.FloatRange(0.5, 60), default=5, show_default=True,
              help="Seconds to wait for SSH and for each command on the hosts.")
@json_option
@handle_errors
def status(inventory, timeout, as_json) -> None:
    """The cluster at a glance; reads, never changes anything.

    Over one SSH connection to the first controller (the backup controller
    when the first cannot be reached; and one to the monitoring host when it
    is another host): per node its Slurm state and
    reason, CPUs and GPUs allocated/total per GRES type (MIG profiles marked),
    running and pending jobs per partition, the alerts Alertmanager is sending
    (active, not silenced or inhibited); where the REST API answers and how
    to get a token for it; then the last deploy and validate runs recorded
    here (deepops runs). No playbook runs.

    \b
    --json prints one object (schema_version 1):
      complete        true when every source was read
      controller, monitoring, slurm_version, inventory, alertmanager (its URL)
      nodes[]         name, state (sinfo's word), slurm_state, reason,
                      reason_user, reason_time, partitions[],
                      cpus {total, allocated},
                      gpus {total, allocated, types {TYPE: {total, allocated, mig}}}
      gpus            the same totals for the whole cluster
      partitions[]    name, state, default, nodes, total_nodes,
                      jobs {running, pending, other}
      jobs            {running, pending, other} over all partitions
      alerts[]        name, severity, target (node or instance), summary, starts_at
      rest_api        url, active (slurmrestd runs), token (the command that
                      makes one); null when slurm_restd_enabled is false
                      or the controller was not read
      runs            {deploy, validate}: id, command, start, duration, result, or null
      errors[]        source (controller, slurm, monitoring, alertmanager, runs),
                      host, message: what could not be read
    A part that could not be read is null, and says why in errors.

    Exit codes: 0 everything read, 1 a part could not be read (the rest is
    still shown), 2 invalid input.

    \b
    Examples:
      deepops status
      deepops status --json | jq '.nodes[] | select(.state != "idle")'
    """
    from deepops_py import status as cluster_status

    cluster = _load_cluster(inventory)  # validation first: bad input touches no host
    result = cluster_status.gather(cluster, timeout=timeout)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        cluster_status.print_status(result)
    sys.exit(result.exit_code)


@main.group(context_settings=CONTEXT_SETTINGS)
def virtual() -> None:
    """A virtual cluster of systemd containers on the local Docker engine.

    One controller (also login and monitoring host) plus N compute nodes with
    simulated GPUs, reachable over SSH on 127.0.0.1. Its inventory is written
    to .deepops/virtual/inventory.yml and used by default.

    \b
    Examples:
      deepops virtual up && deepops deploy
      deepops virtual up --compute 3 --gpus h100:8 --gpus a100:4 --gpus l40s:1
      deepops virtual up --login  # plus login01, a login node of its own
      deepops virtual up --controllers 2  # plus ctl02, a backup controller
      deepops virtual down
    """


@virtual.command("up", context_settings=CONTEXT_SETTINGS)
@click.option("--compute", "-n", type=click.IntRange(1, 32), default=2, show_default=True, help="Compute nodes.")
@click.option(
    "--gpus",
    multiple=True,
    metavar="MODEL:COUNT",
    help="Simulated GPUs of the next compute node, cycling through the list. "
    "Default: h100:8 then a100:4. Models: see 'deepops virtual status --models'.",
)
@click.option(
    "--image", type=click.Choice([release.slug for release in platforms.tested_releases()]), default="debian12", show_default=True
)
@click.option("--login", is_flag=True,
              help="Also a login node, login01 (no GPUs, group slurm_login); without it the controller is the login node.")
@click.option("--controllers", type=click.IntRange(1, 2), default=1, show_default=True,
              help="2: also ctl02, a backup controller; both controllers mount one Docker volume at Slurm's "
                   "StateSaveLocation (the stand-in for a shared NFS export).")
@json_option
@handle_errors
def virtual_up(compute, gpus, image, login, controllers, as_json) -> None:
    """Create (or complete) the virtual cluster. Safe to re-run."""
    from deepops_py.virtual import cluster

    spec = cluster.ClusterSpec.from_options(compute=compute, gpus=gpus, image=image, login=login,
                                            controllers=controllers)
    state = cluster.up(spec)
    if as_json:
        click.echo(json.dumps(state.as_dict(), indent=2))
    else:
        cluster.print_status(state)
        click.echo(f"Inventory: {state.inventory_path}\nNext: deepops check && deepops deploy")


@virtual.command("down", context_settings=CONTEXT_SETTINGS)
@handle_errors
def virtual_down() -> None:
    """Remove every container, network and key that 'virtual up' created."""
    from deepops_py.virtual import cluster

    for line in cluster.down():
        click.echo(line)


@virtual.command("fault", context_settings=CONTEXT_SETTINGS)
@click.argument("host")
@click.argument("fault", metavar="FAULT")
@click.option("--gpu", type=click.IntRange(0, None), default=None,
              help="GPU index (default 0; for clear, every GPU).")
@handle_errors
def virtual_fault(host, fault, gpu) -> None:
    """Make a simulated GPU of compute node HOST report a fault, or clear it.

    \b
    FAULT is one of:
      xid:CODE           the driver's "NVRM: Xid (PCI:...): CODE, ..." line in the
                         node's simulated kernel log (/run/deepops/simulated-gpus/kmsg)
      ecc[:COUNT]        uncorrectable ECC errors (nvidia-smi -q -x and --query-gpu)
      row-remap-pending  a row remapping pending (a GPU reset would apply it)
      row-remap-failure  a row remapping failed
      clear              what a GPU reset does: the faults are gone, and the node's
                         GPU health check forgets the XIDs it saw

    \b
    Examples:
      deepops virtual fault gpu01 xid:79 --gpu 0
      deepops virtual fault gpu02 ecc:2 --gpu 3
      deepops virtual fault gpu01 clear
    """
    from deepops_py.virtual import cluster

    click.echo(cluster.fault(cluster.FaultRequest.parse(host, fault, gpu)))


@virtual.command("status", context_settings=CONTEXT_SETTINGS)
@click.option("--models", is_flag=True, help="List the GPU models that can be simulated.")
@json_option
@handle_errors
def virtual_status(models, as_json) -> None:
    """Show the virtual cluster's nodes, their state, SSH ports and GPUs."""
    from deepops_py.virtual import cluster, gpus

    if models:
        width = max(map(len, gpus.MODELS))
        for name, model in sorted(gpus.MODELS.items()):
            click.echo(f"{name:{width}}  {model.description}")
        return
    state = cluster.status()
    if as_json:
        click.echo(json.dumps(state.as_dict(), indent=2))
    else:
        cluster.print_status(state)


if __name__ == "__main__":  # pragma: no cover
    main()
