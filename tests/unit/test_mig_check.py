"""`deepops check` rejects impossible MIG layouts from the inventory alone (issue #10).

Exit 2, the message naming host, GPU and profile, before any host is
contacted and before any playbook starts. The shipped roles' argument specs
are used (mig_layout is the mig role's).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from deepops_py import preflight, runner
from deepops_py.cli import main


@pytest.fixture
def contacted(monkeypatch):
    """Hosts preflight would reach, and playbooks a command would start (none, for bad input)."""
    calls: list = []
    monkeypatch.setattr(preflight, "run_preflight", lambda cluster, **kwargs: calls.append(("preflight", sorted(cluster.hosts))) or [])
    monkeypatch.setattr(runner, "run_playbook", lambda request, **kwargs: calls.append(("playbook", request)))
    return calls


def inventory(write_inventory, compute_vars: dict | None = None, gpu02: str = ""):
    """conftest's base inventory (ctl01; gpu01, gpu02 in slurm_compute) with group vars and gpu02's host vars."""
    text = write_inventory().read_text()
    if gpu02:
        text = text.replace("        gpu02:\n", f"        gpu02:\n          {gpu02}\n")
    return write_inventory(text, files={"group_vars/slurm_compute.yml": compute_vars} if compute_vars else None)


def check(path, *args):
    return CliRunner().invoke(main, ["check", "-i", str(path), *args])


def test_an_impossible_layout_is_exit_2_before_any_host_or_playbook(write_inventory, contacted):
    path = inventory(write_inventory, {"slurm_gpu_type": "h100", "mig_layout": {"all": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
                     gpu02="mig_layout: {0: [4g.40gb, 2g.20gb, 2g.20gb], 3: [1g.10gb, 1g.11gb]}")
    for args in ((), ("--no-ssh",)):
        result = check(path, *args)
        assert result.exit_code == 2, result.output
        assert "host gpu02: mig_layout: GPU 0: 4g.40gb, 2g.20gb, 2g.20gb need 8 compute slices, and the H100 80GB has 7" in result.output
        assert "host gpu02: mig_layout: GPU 3: '1g.11gb' is not a MIG profile of the H100 80GB — did you mean 1g.10gb?" in result.output
        assert "host gpu01" not in result.output  # its layout, the group's, fits
        assert "Traceback" not in result.output
    deploy = CliRunner().invoke(main, ["deploy", "-i", str(path)])
    assert deploy.exit_code == 2, deploy.output
    assert "GPU 0: 4g.40gb, 2g.20gb, 2g.20gb" in deploy.output
    assert contacted == []


def test_a_group_layout_that_cannot_fit_is_one_problem_at_its_first_host(write_inventory, contacted):
    path = inventory(write_inventory, {"slurm_gpu_type": "a30", "mig_layout": "all-1g.10gb"})
    result = check(path, "--no-ssh")
    assert result.exit_code == 2, result.output
    assert result.output.count("mig_layout") == 1
    assert "host gpu01: mig_layout: all GPUs: '1g.10gb' is not a MIG profile of the A30 24GB" in result.output
    assert contacted == []


def test_mig_on_a_gpu_type_without_a_table_is_refused(write_inventory, contacted):
    path = inventory(write_inventory, {"slurm_gpu_type": "l40s"}, gpu02="mig_layout: {1: [1g.10gb]}")
    result = check(path, "--no-ssh")
    assert result.exit_code == 2, result.output
    assert "host gpu02: mig_layout: GPU 1: 1g.10gb needs MIG, but slurm_gpu_type 'l40s' has no MIG table in deepops" in result.output


def test_a_malformed_layout_is_reported_where_it_is_defined(write_inventory, contacted):
    path = inventory(write_inventory, {"mig_layout": ["1g.10gb"]})
    result = check(path, "--no-ssh")
    assert result.exit_code == 2, result.output
    assert "group_vars/slurm_compute.yml: group slurm_compute: mig_layout: expected a named layout" in result.output
    assert result.output.count("mig_layout") == 1  # not again per host


@pytest.mark.parametrize(
    ("compute_vars", "gpu02"),
    [
        ({}, ""),  # no layout: unmanaged
        ({"slurm_gpu_type": "a100", "mig_layout": "all-balanced"}, "mig_layout: {0: [1g.5gb, 1g.5gb, 2g.10gb, 3g.20gb]}"),
        ({"slurm_gpu_type": "h200", "mig_layout": {"all": "all-1g.18gb", 7: "disabled"}}, ""),
        ({"slurm_gpu_type": "l40s", "mig_layout": "disabled"}, ""),
        ({"mig_layout": {"all": ["4g.40gb", "3g.40gb"]}}, "mig_layout: unmanaged"),  # no type: fits an 80GB A100 or H100
        ({"slurm_gpu_type": "a100", "mig_layout": "{{ site_layout }}", "site_layout": "x"}, ""),  # known at run time only
        ({"slurm_gpu_type": "a100", "mig_layout": {0: "{{ site_gpu0 }}", 1: ["1g.5gb"]}, "site_gpu0": "x"}, ""),
        ({"mig_layout": "all-1g.12gb", "mig_drain_timeout": 0, "mig_force": True}, ""),
    ],
)
def test_layouts_that_fit_pass(write_inventory, contacted, compute_vars, gpu02):
    result = check(inventory(write_inventory, compute_vars, gpu02=gpu02), "--no-ssh")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("compute_vars", "expected"),
    [
        ({"mig_drain_timeout": -1}, "mig_drain_timeout: must be at least 0, found -1"),
        ({"mig_drain_timeout": "soon"}, "mig_drain_timeout: expected int, found str"),
        ({"mig_force": "maybe"}, "mig_force: expected bool, found str"),
        ({"mig_layuot": "disabled"}, "unknown variable 'mig_layuot' — did you mean mig_layout?"),
    ],
)
def test_the_other_mig_variables_are_checked(write_inventory, contacted, compute_vars, expected):
    result = check(inventory(write_inventory, compute_vars), "--no-ssh")
    assert result.exit_code == 2, result.output
    assert expected in result.output


def test_an_extra_var_layout_gets_the_shape_check(write_inventory, contacted):
    result = CliRunner().invoke(main, ["deploy", "-i", str(write_inventory()), "-e", "mig_layout=all-1G.10GB"])
    assert result.exit_code == 2, result.output
    assert "-e: mig_layout: 'all-1G.10GB' is not a MIG layout" in result.output
    assert contacted == []
