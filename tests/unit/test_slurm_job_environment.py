"""The jobs' environment on compute nodes: per-job /tmp (job_container/tmpfs,
PrologFlags=Contain) and pam_slurm_adopt in sshd's PAM stack.

The PAM lines and the pam_access table are tested as functions
(plugins/module_utils/pam_slurm_adopt.py), then the role's own tasks
(roles/slurm/tasks/pam_adopt.yml) and variables run for real with
ansible-playbook over a local connection, against copies of Debian's
/etc/pam.d/sshd in a temporary directory: which hosts get the lines, in what
order the files change, that a second run changes nothing, and that switching
it off restores the file byte for byte. The virtual cluster's integration test
(tests/integration/test_job_environment.py) proves what the lines do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.deepops.cluster.plugins.module_utils import pam_slurm_adopt
from ansible_collections.deepops.cluster.plugins.module_utils.pam_slurm_adopt import PamAdoptError

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "slurm"

# Debian 12's /etc/pam.d/sshd (openssh-server 1:9.2p1), comments shortened.
DEBIAN_SSHD = """\
# PAM configuration for the Secure Shell service
@include common-auth
account    required     pam_nologin.so
# account  required     pam_access.so
@include common-account
session [success=ok ignore=ignore module_unknown=ignore default=bad]        pam_selinux.so close
session    required     pam_loginuid.so
session    optional     pam_keyinit.so force revoke
@include common-session
session    optional     pam_motd.so  motd=/run/motd.dynamic
session    optional     pam_motd.so noupdate
session    optional     pam_mail.so standard noenv # [1]
session    required     pam_limits.so
session    required     pam_env.so # [1]
session    required     pam_env.so user_readenv=1 envfile=/etc/default/locale
session [success=ok ignore=ignore module_unknown=ignore default=bad]        pam_selinux.so open
@include common-password
"""


# --------------------------------------------------------------------------
# the lines


def test_access_table_grants_root_first_then_users_and_groups_and_refuses_the_rest():
    assert pam_slurm_adopt.access_lines(["ansible", "hpcadmin", "root", "ansible"], ["admins"]) == [
        "+:root ansible hpcadmin (admins):ALL",
        "-:ALL:ALL",
    ]
    assert pam_slurm_adopt.access_lines() == ["+:root:ALL", "-:ALL:ALL"]


@pytest.mark.parametrize("bad", ["a b", "x:ALL", "(wheel)", "+evil", "-:ALL", "a,b", "", "x\n+:ALL:ALL", "@netgroup", True])
def test_a_name_that_would_change_the_access_table_is_refused(bad):
    with pytest.raises(PamAdoptError, match="cannot go into a pam_access table"):
        pam_slurm_adopt.access_lines([bad])
    with pytest.raises(PamAdoptError, match="group"):
        pam_slurm_adopt.access_lines([], [bad])


def test_account_lines_root_then_the_access_table_skip_pam_slurm_adopt():
    lines = pam_slurm_adopt.account_lines("/etc/security/adopt.conf")
    assert lines == [
        "account [success=2 default=ignore] pam_succeed_if.so quiet uid eq 0",
        "account [success=1 default=ignore] pam_access.so nodefgroup accessfile=/etc/security/adopt.conf",
        "-account required pam_slurm_adopt.so action_no_jobs=deny action_unknown=newest "
        "action_adopt_failure=allow action_generic_failure=ignore",
    ]


def test_options_merge_over_the_defaults_and_null_drops_one():
    lines = pam_slurm_adopt.account_lines(
        "/etc/a.conf", {"log_level": "debug", "action_generic_failure": "deny", "action_unknown": None, "join_container": False})
    assert lines[2] == ("-account required pam_slurm_adopt.so action_no_jobs=deny action_adopt_failure=allow "
                        "action_generic_failure=deny log_level=debug join_container=0")


@pytest.mark.parametrize("options", [{"log_level": "debug ignore_root=0"}, {"Bad Key": "x"}, {"x": "a\nauth sufficient pam_permit.so"}])
def test_an_option_cannot_add_an_argument_or_a_line(options):
    with pytest.raises(PamAdoptError):
        pam_slurm_adopt.account_lines("/etc/a.conf", options)


@pytest.mark.parametrize("path", ["relative.conf", "/with space.conf", "/x\naccount sufficient pam_permit.so"])
def test_the_access_table_must_be_one_absolute_path(path):
    with pytest.raises(PamAdoptError, match="absolute path"):
        pam_slurm_adopt.account_lines(path)


# --------------------------------------------------------------------------
# the role's tasks and variables, for real


@pytest.fixture
def pam_run(tmp_path):
    """Runs roles/slurm/tasks/pam_adopt.yml on ctl01 (controller), gpu01 and gpu02 (compute only) and
    login01 (compute and login), each with its own copy of Debian's sshd PAM file under tmp_path."""
    hosts = ("ctl01", "gpu01", "gpu02", "login01")
    for host in hosts:
        (tmp_path / host).mkdir()
        (tmp_path / host / "sshd").write_text(DEBIAN_SSHD)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "slurm_controller": {"hosts": {"ctl01": dict(local)}},
        # gpu02 is reached as a user of its own, as on a site that deploys with sudo
        "slurm_compute": {"hosts": {"gpu01": dict(local), "gpu02": {**local, "ansible_user": "deployer"},
                                    "login01": dict(local)}},
        "deepops_slurm_compute": {"hosts": {"gpu01": {}, "gpu02": {}, "login01": {}}},
        "slurm_login": {"hosts": {"login01": {}}},
    }}}))
    playbook = tmp_path / "pam.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "pam_slurm_adopt (test)", "hosts": "all", "gather_facts": True, "gather_subset": ["min"],
        "tasks": [
            {"name": "Slurm | pam_slurm_adopt", "ansible.builtin.include_role": {"name": "slurm", "tasks_from": "pam_adopt"}},
        ],
    }], sort_keys=False))
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")},
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
    }
    paths = {
        # per host, like the real files on each node; systemd-logind is not there to mask
        "_slurm_pam_adopt_pam_file": str(tmp_path) + "/{{ inventory_hostname }}/sshd",
        "_slurm_pam_adopt_access_file": str(tmp_path) + "/{{ inventory_hostname }}/adopt-access.conf",
        "slurm_pam_adopt_disable_logind": False,
    }

    def run(**extra) -> dict:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook),
             "-e", json.dumps({"ansible_become": False, **paths, **extra})],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )
        try:
            data = json.loads(result.stdout)
        except json.JSONDecodeError:
            pytest.fail(result.stdout[-4000:] + result.stderr[-4000:])
        assert result.returncode == 0, json.dumps(data["stats"]) + result.stderr[-3000:]
        return data

    return run, tmp_path


def _block(access_file: str) -> str:
    return (
        "# BEGIN deepops (slurm role): pam_slurm_adopt\n"
        "account [success=2 default=ignore] pam_succeed_if.so quiet uid eq 0\n"
        f"account [success=1 default=ignore] pam_access.so nodefgroup accessfile={access_file}\n"
        "-account required pam_slurm_adopt.so action_no_jobs=deny action_unknown=newest "
        "action_adopt_failure=allow action_generic_failure=ignore\n"
        "# END deepops (slurm role): pam_slurm_adopt\n"
    )


def test_compute_only_nodes_get_the_lines_last_and_root_and_the_deploy_user_pass(pam_run):
    run, tmp = pam_run
    first = run(slurm_pam_adopt_allowed_users=["hpcadmin"], slurm_pam_adopt_allowed_groups=["admins"])
    for host in ("gpu01", "gpu02"):
        access = tmp / host / "adopt-access.conf"
        assert (tmp / host / "sshd").read_text() == DEBIAN_SSHD + _block(str(access))
        table = [line for line in access.read_text().splitlines() if not line.startswith("#")]
        deployer = " deployer" if host == "gpu02" else ""
        assert table == [f"+:root{deployer} hpcadmin (admins):ALL", "-:ALL:ALL"], table
        assert access.stat().st_mode & 0o777 == 0o644
    # never on a controller or a login node, even one that is also a compute node
    for host in ("ctl01", "login01"):
        assert (tmp / host / "sshd").read_text() == DEBIAN_SSHD
        assert not (tmp / host / "adopt-access.conf").exists()
    assert {host: stats["changed"] for host, stats in first["stats"].items()} == {
        "ctl01": 0, "gpu01": 2, "gpu02": 2, "login01": 0}

    second = run(slurm_pam_adopt_allowed_users=["hpcadmin"], slurm_pam_adopt_allowed_groups=["admins"])
    assert {host: stats["changed"] for host, stats in second["stats"].items()} == dict.fromkeys(
        ("ctl01", "gpu01", "gpu02", "login01"), 0)


def test_switched_off_the_sshd_file_is_restored_byte_for_byte_and_the_table_removed(pam_run):
    run, tmp = pam_run
    run()
    assert "pam_slurm_adopt.so" in (tmp / "gpu01" / "sshd").read_text()
    run(slurm_pam_adopt_enabled=False)
    for host in ("ctl01", "gpu01", "gpu02", "login01"):
        assert (tmp / host / "sshd").read_text() == DEBIAN_SSHD, host
        assert not (tmp / host / "adopt-access.conf").exists(), host


def _changed_tasks(data: dict, host: str) -> list[str]:
    """Names (without the role prefix) of the tasks that changed HOST, in order."""
    return [task["task"]["name"].split(" : ", 1)[-1] for play in data["plays"] for task in play["tasks"]
            if task["hosts"].get(host, {}).get("changed")]


def test_the_lines_change_only_where_the_table_is_in_place_first(pam_run):
    """The access table is written before the lines that read it, and removed after them."""
    run, tmp = pam_run
    data = run()
    names = _changed_tasks(data, "gpu01")
    assert names == ["Slurm | pam_access table of the users who pass pam_slurm_adopt",
                     "Slurm | pam_slurm_adopt in the sshd account stack"], names
    data = run(slurm_pam_adopt_enabled=False)
    names = _changed_tasks(data, "gpu01")
    assert names == ["Slurm | pam_slurm_adopt in the sshd account stack",
                     "Slurm | Remove the pam_access table of pam_slurm_adopt"], names


# --------------------------------------------------------------------------
# slurm.conf and job_container.conf


def _role_value(expression: str, **overrides) -> object:
    """EXPRESSION templated with the role's defaults and vars, as Ansible templates them."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    loader = DataLoader()  # trusted, as Ansible loads a role's files
    variables = {
        **loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True),
        **loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True),
        **overrides,
    }
    return Templar(loader=loader, variables=variables).template(trust_as_template("{{ " + expression + " }}"))


def test_slurm_conf_asks_for_the_job_container_and_the_extern_step_by_default():
    from ansible_collections.deepops.cluster.plugins.module_utils import slurm_conf

    settings = {key: _role_value(f"_slurm_conf_defaults['{key}']") for key in ("JobContainerType", "PrologFlags")}
    assert slurm_conf.slurm_conf_lines(settings) == ["JobContainerType=job_container/tmpfs", "PrologFlags=Contain"]
    off = {key: _role_value(f"_slurm_conf_defaults['{key}']", slurm_job_container_enabled=False, slurm_prolog_flags=[])
           for key in ("JobContainerType", "PrologFlags")}
    assert slurm_conf.slurm_conf_lines(off) == []
    more = _role_value("_slurm_conf_defaults['PrologFlags']", slurm_prolog_flags=["Contain", "X11"])
    assert slurm_conf.slurm_conf_lines({"PrologFlags": more}) == ["PrologFlags=Contain,X11"]


def test_job_container_conf_has_base_path_first_and_takes_extra_keys():
    import jinja2
    from ansible_collections.deepops.cluster.plugins.filter import slurm as slurm_filters

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), trim_blocks=True)
    env.filters["deepops.cluster.slurm_conf_lines"] = slurm_filters.FilterModule().filters()["slurm_conf_lines"]

    def body(**overrides) -> list[str]:
        conf = _role_value("_slurm_job_container_conf", **overrides)
        text = env.get_template("job_container.conf.j2").render(ansible_managed="managed", _slurm_job_container_conf=conf)
        return [line for line in text.splitlines() if line and not line.startswith("#")]

    assert body() == ["BasePath=/var/lib/slurm/job_containers", "AutoBasePath=YES"]
    assert body(slurm_job_container_base_path="/nvme/jobs", slurm_job_container_config={"Dirs": "/tmp,/dev/shm,/var/tmp"}) == [
        "BasePath=/nvme/jobs", "AutoBasePath=YES", "Dirs=/tmp,/dev/shm,/var/tmp"]
    assert body(slurm_job_container_config={"AutoBasePath": None}) == ["BasePath=/var/lib/slurm/job_containers"]


@pytest.mark.parametrize(("overrides", "ok"), [
    ({}, True),
    ({"slurm_prolog_flags": ["contain", "Serial"]}, True),
    ({"slurm_prolog_flags": []}, False),
    ({"slurm_prolog_flags": [], "slurm_job_container_enabled": False}, False),  # pam_slurm_adopt needs it too
    ({"slurm_prolog_flags": [], "slurm_job_container_enabled": False, "slurm_pam_adopt_enabled": False}, True),
    ({"slurm_job_container_base_path": "/tmp/jobs"}, False),
    ({"slurm_job_container_base_path": "/dev/shm"}, False),
    ({"slurm_job_container_base_path": "/"}, False),
    ({"slurm_job_container_base_path": "var/jobs"}, False),
    ({"slurm_job_container_base_path": "/tmpfs/jobs"}, True),
])
def test_the_preflight_refuses_settings_slurm_cannot_use(overrides, ok):
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(task for task in tasks if task["name"] == "Slurm | Assert the job container and pam_slurm_adopt settings are usable")
    results = [_role_value(condition, **overrides) for condition in task["ansible.builtin.assert"]["that"]]
    assert all(results) is ok, results
