"""Values the argument specs cannot constrain (patterns, minimums, a default
that must be in a list, host names that differ only in case) are refused by
the inventory check, before any host is contacted (hardening issue)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ansible_collections.deepops.cluster.plugins.plugin_utils import value_rules
from deepops_py.cli import main



def check(write_inventory, group_vars: str = "", more_hosts: str = ""):
    """deepops check on conftest's base inventory (a controller, two compute nodes) plus MORE_HOSTS."""
    base = write_inventory().read_text()
    path = write_inventory(base + more_hosts, files={"group_vars/all.yml": group_vars} if group_vars else None)
    return CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])


@pytest.mark.parametrize(
    ("group_vars", "expected"),
    [
        ("slurm_realmemory_reserve_mb: -5", "slurm_realmemory_reserve_mb: must be at least 0, found -5"),
        ("slurm_qos: [{name: low, priority: 10}]", "slurm_default_qos: 'normal' is not one of slurm_qos (low)"),
        ("slurm_qos: [{name: 'lo;w'}, {name: normal}]", "slurm_qos: item 1: name 'lo;w' is not a Slurm name"),
        ("slurm_qos: [{name: normal, preempt: ['$(id)']}]", "slurm_qos: item 1: preempt '$(id)' is not a Slurm name"),
        ("slurm_qos: [{name: normal, priority: -1}]", "slurm_qos: item 1: priority must be a whole number of at least 0"),
        ("slurm_qos: [{priority: 1}]", "slurm_qos: item 1: needs a name"),
        ("slurm_default_account: 'users; drop'", "slurm_default_account: name 'users; drop' is not a Slurm name"),
        ("slurm_partitions: [{name: my part}]", "slurm_partitions: item 1: name 'my part' is not a Slurm name"),
        ('common_apt_proxy: "http://x;rm -rf /"', "common_apt_proxy: 'http://x;rm -rf /' is not a proxy URL"),
        ('common_apt_proxy: "http://proxy\\"; Acquire::x \\"y"', "is not a proxy URL"),
        ('ansible_host: "$(reboot)"', "ansible_host: '$(reboot)' is not a host name or an IP address"),
        ('nccl_tests_version: "2.13; rm -rf /"', "nccl_tests_version: '2.13; rm -rf /' is not a release"),
        ("nccl_tests_sha256: abc", "nccl_tests_sha256: 'abc' is not a sha256 checksum"),
        ('nccl_tests_url: "ftp://mirror/nccl-tests.tgz"', "nccl_tests_url: 'ftp://mirror/nccl-tests.tgz' is not an http(s)"),
        ("nccl_tests_cuda_archs: ['90', 'sm_80']", "nccl_tests_cuda_archs: item 2: 'sm_80' is not a compute capability"),
        ("slurm_node_features: [ib, 'a|b']", "slurm_node_features: item 2: feature 'a|b' is not a Slurm name"),
        ("slurm_node_features: ib", "slurm_node_features"),
        ("slurm_over_time_limit_minutes: -1", "slurm_over_time_limit_minutes: must be at least 0"),
        ("slurm_enforce_part_limits: SOME", "slurm_enforce_part_limits"),
        ('slurm_srun_port_range: "60001"', "slurm_srun_port_range: '60001' is not a port range"),
        ('slurm_restd_listen: ["6820"]', "slurm_restd_listen: item 1: '6820' is not host:port"),
        ('slurm_restd_listen: [":6820"]', "slurm_restd_listen: item 1: ':6820' is not host:port"),
        ('slurm_restd_listen: ["0.0.0.0:6820", "ctl01:99999"]', "slurm_restd_listen: item 2: 'ctl01:99999' is not host:port"),
        ('slurm_restd_listen: ["$(id):6820"]', "slurm_restd_listen: item 1: '$(id):6820' is not host:port"),
        ('slurm_restd_listen: ["unix:run/rest.sock"]', "slurm_restd_listen: item 1: 'unix:run/rest.sock': a socket is unix:/absolute/path"),
        ("cluster_users: [{name: a, uid: 2001}, {name: b, uid: 2001}]", "cluster_users: item 2 (b): uid 2001 is already item 1 (a)'s"),
        ("cluster_users: [{uid: 2001}]", "cluster_users: item 1: missing required key 'name'"),
        ("cluster_users: [{name: a, uid: '2001'}]", "cluster_users: item 1: uid: expected int"),
        ("slurm_pam_adopt_allowed_users: [ok, 'x:ALL']", "slurm_pam_adopt_allowed_users: item 2: user 'x:ALL' cannot go into a pam_access"),
        ("slurm_pam_adopt_allowed_groups: ['(wheel)']", "slurm_pam_adopt_allowed_groups: item 1: group '(wheel)' cannot go"),
        ("slurm_pam_adopt_options: {log_level: 'debug ignore_root=0'}", "slurm_pam_adopt_options: pam_slurm_adopt option log_level"),
        ("slurm_job_container_enabled: maybe", "slurm_job_container_enabled"),
    ],
)
def test_bad_values_are_exit_2(write_inventory, group_vars, expected):
    result = check(write_inventory, group_vars)
    assert result.exit_code == 2, result.output
    assert expected in result.output


def test_hosts_that_differ_only_in_case_are_refused(write_inventory):
    result = check(write_inventory, more_hosts="        GPU01:\n")
    assert result.exit_code == 2, result.output
    assert "host gpu01: differs from host GPU01 only in case" in result.output


@pytest.mark.parametrize(
    "group_vars",
    [
        "slurm_realmemory_reserve_mb: 0",
        "slurm_qos: [{name: gold, priority: 10, preempt: [low-1]}, {name: low-1}]\nslurm_default_qos: gold",
        "slurm_partitions: [{name: gpu.h100_a}]",
        "slurm_node_features: [ib, local-nvme, v2.1]\nslurm_enforce_part_limits: ANY\nslurm_kill_on_bad_exit: false",
        'common_apt_proxy: "http://deepops-aptcache:3142"',
        'common_apt_proxy: "https://user:p%40ss@10.0.0.5:3128/"',
        'common_apt_proxy: "http://[fd00::5]:3142"',
        'ansible_host: "fd00::10"',
        'nccl_tests_url: "http://mirror.example/nccl-tests/v{version}.tar.gz"\nnccl_tests_cuda_archs: ["90a", "100"]',
        'slurm_default_qos: "{{ site_default_qos }}"\nsite_default_qos: x',
        'slurm_restd_listen: ["0.0.0.0:6820", "[::]:6820", "[::1]:6820", "ctl01.example:8080", "unix:/run/slurmrestd/slurmrestd.socket"]',
        "slurm_pam_adopt_allowed_users: [hpcadmin, svc.backup]\nslurm_pam_adopt_allowed_groups: [sudo]\n"
        "slurm_pam_adopt_options: {log_level: debug, action_unknown: null}\nslurm_job_container_base_path: /nvme/jobs",
    ],
)
def test_good_values_pass(write_inventory, group_vars):
    result = check(write_inventory, group_vars)
    assert result.exit_code == 0, result.output


def test_every_rule_is_for_a_variable_the_roles_know():
    from ansible_collections.deepops.cluster.plugins.plugin_utils import schema

    assert set(value_rules.RULES) <= set(schema.known_variables())
