"""The mig role run as a deploy runs it (ansible-playbook, local connection).

Every compute host of the inventory is one case: its GPUs are the virtual
cluster's stand-in nvidia-smi with its own temporary MIG state, and Slurm is a
small stand-in (scontrol, squeue, sinfo, scancel over one JSON file) that
logs every call, so the test sees exactly which nodes were drained, waited
for, ended and resumed. One plan (--check), one deploy and a second deploy
cover every case; nothing parses Ansible's text output (json callback).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.deepops.cluster.plugins.module_utils import mig_apply
from mig_standin import STAND_IN, install_node

from deepops_py.virtual.gpus import GpuSpec

REPO = Path(__file__).resolve().parents[2]
REASON = "deepops: MIG layout change"
MIXED = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]

FAKE_SLURM = r'''
"""Stand-in Slurm commands for the mig role's test: one JSON state, every call logged."""
import fcntl, json, os, sys

STATE = os.environ["FAKE_SLURM_STATE"]
command, args = os.path.basename(sys.argv[0]), sys.argv[1:]
lock = open(STATE + ".lock", "a")
fcntl.flock(lock, fcntl.LOCK_EX)  # the hosts' delegated calls run in parallel
with open(STATE) as handle:
    state = json.load(handle)
with open(STATE + ".log", "a") as log:
    log.write(json.dumps([command, *args]) + "\n")
nodes = state["nodes"]


def option(name):
    return next(arg.split("=", 1)[1] for arg in args if arg.lower().startswith(name + "="))


def save():
    with open(STATE, "w") as handle:
        json.dump(state, handle)


def flags(node):
    base = "ALLOCATED" if node["jobs"] else "IDLE"
    return base + ("+DRAIN" if node["drain"] else "")


if command == "scontrol" and args[:2] == ["show", "node"]:
    name = args[2]
    if name in state.get("unreachable", []):
        print("slurm_load_node error: Unable to contact slurm controller (connect failure)", file=sys.stderr)
        sys.exit(1)
    if name not in nodes:
        print(f"Node {name} not found", file=sys.stderr)
        sys.exit(1)
    node = nodes[name]
    reason = f" Reason={node['reason']} [root@2026-11-30T10:00:00]" if node["reason"] else ""
    print(f"NodeName={name} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State={flags(node)} ThreadsPerCore=1{reason}")
elif command == "scontrol" and args[:1] == ["update"]:
    node = nodes[option("nodename")]
    if option("state") == "drain":
        node["drain"], node["reason"] = True, option("reason")
    elif option("state") == "resume":
        node["drain"], node["reason"] = False, None
    save()
elif command == "squeue":
    node = nodes[option("--nodelist")]
    for job in list(node["jobs"]):
        print(job["id"])
        if job["looks"] is not None:  # None: runs until cancelled
            job["looks"] -= 1
            if job["looks"] <= 0:
                node["jobs"].remove(job)
    save()
elif command == "scancel":
    nodes[option("--nodelist")]["jobs"] = []
    save()
elif command == "sinfo":
    for name, node in sorted(nodes.items()):
        short = ("drng" if node["jobs"] else "drain") if node["drain"] else ("alloc" if node["jobs"] else "idle")
        print(f"{name}|{short}|{node['reason'] or 'none'}")
else:
    sys.exit(f"fake slurm: unexpected {command} {args}")
'''

# host -> (virtual GPUs, GPU count, role variables, Slurm node or None, layout applied beforehand, busy GPUs)
CASES = {
    "same": ("a100-80gb", 2, {"mig_layout": {"all": MIXED}}, {}, {"all": MIXED}, []),
    "idle": ("a100-80gb", 2, {"mig_layout": {"all": MIXED}, "mig_drain_timeout": 2}, {"jobs": [{"id": 101, "looks": 1}]}, None, []),
    "busy": ("h100", 1, {"mig_layout": "all-balanced", "mig_drain_timeout": 2}, {"jobs": [{"id": 201, "looks": None}]}, None, []),
    "forced": ("h100", 1, {"mig_layout": "all-balanced", "mig_drain_timeout": 1, "mig_force": True},
               {"jobs": [{"id": 301, "looks": None}]}, None, []),
    "newnode": ("a100-80gb", 1, {"mig_layout": {0: ["7g.80gb"]}}, None, None, []),
    "admin": ("a100-80gb", 1, {"mig_layout": "disabled"}, {"drain": True, "reason": "disk swap"}, None, []),
    "plain": ("a100-80gb", 1, {}, {}, None, []),
    "resetpending": ("h100", 2, {"mig_layout": "all-1g.10gb"}, {}, None, [1]),
    "nocontact": ("a100-80gb", 1, {"mig_layout": "disabled"}, {}, None, []),
    "badlayout": ("a100-80gb", 2, {"mig_layout": {0: MIXED, 2: ["1g.10gb"]}}, {}, None, []),
}


class Bed:
    """The inventory, the stand-ins and their states, and the runs."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.bin.mkdir()
        smi = self.bin / "nvidia-smi"  # as 'virtual up' installs it: executable, run by /usr/bin/python3
        smi.write_bytes(STAND_IN.read_bytes())
        smi.chmod(0o755)
        fake = self.bin / "fake-slurm"
        fake.write_text(f"#!{sys.executable}\n{FAKE_SLURM}")
        fake.chmod(0o755)
        for command in ("scontrol", "squeue", "sinfo", "scancel"):
            (self.bin / command).symlink_to(fake)
        self.slurm_state = tmp / "slurm.json"
        nodes = {
            host: {"drain": False, "reason": None, "jobs": [], **node}
            for host, (_gpus, _count, _vars, node, _pre, _busy) in CASES.items() if node is not None
        }
        self.slurm_state.write_text(json.dumps({"nodes": nodes, "unreachable": ["nocontact"]}))
        self.env = {
            **{key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")},
            "PATH": f"{self.bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "FAKE_SLURM_STATE": str(self.slurm_state),
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
            "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
            "ANSIBLE_SHOW_CUSTOM_STATS": "true",
            "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"),
        }
        local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        computes = {}
        for host, (gpus, count, variables, _node, before, busy) in CASES.items():
            root = tmp / "nodes" / host
            env = install_node(root, GpuSpec(gpus, count), host)
            computes[host] = {**local, **variables, "mig_test_env": env}
            if before is not None:
                mig_apply.apply_layout(self.runner(host, env), "nvidia-smi", before)
            for index in busy:  # this test process "uses" the GPU while the playbook runs
                clients = root / "run/deepops/simulated-gpus/clients"
                clients.mkdir(parents=True, exist_ok=True)
                (clients / f"{index}-test").write_text(f"{os.getpid()}\n")
        self.node_env = {host: computes[host]["mig_test_env"] for host in CASES}
        self.inventory = tmp / "inventory.yml"
        self.inventory.write_text(yaml.safe_dump({"all": {"children": {
            "slurm_controller": {"hosts": {"ctl01": dict(local)}},
            "slurm_compute": {"hosts": computes},
        }}}))
        self.playbook = tmp / "mig.yml"
        self.playbook.write_text(yaml.safe_dump([
            {"name": "MIG (test)", "hosts": "slurm_compute", "gather_facts": False,
             "environment": "{{ mig_test_env }}", "roles": [{"role": "mig"}]},
            {"name": "Resume the nodes drained for MIG (test: where the Slurm play would include it)",
             "hosts": "slurm_controller[0]", "gather_facts": False,
             "tasks": [{"name": "MIG | Resume", "ansible.builtin.import_role": {"name": "mig", "tasks_from": "resume.yml"}}]},
        ], sort_keys=False))

    def runner(self, host: str, env: dict[str, str] | None = None):
        full = {**os.environ, **(env or self.node_env[host])}

        def run(argv):
            done = subprocess.run([sys.executable, str(STAND_IN), *argv[1:]], capture_output=True, text=True, env=full)
            return done.returncode, done.stdout, done.stderr

        return run

    def gpus(self, host: str) -> list[dict]:
        """What nvidia_mig would find on HOST now (a check-mode apply of 'unmanaged' changes nothing)."""
        return mig_apply.apply_layout(self.runner(host), "nvidia-smi", "unmanaged", check_mode=True).gpus

    def mig_states(self) -> dict[str, bytes]:
        states = {}
        for host, env in self.node_env.items():
            path = Path(env["DEEPOPS_SIMULATED_MIG_STATE"])
            states[host] = path.read_bytes() if path.exists() else b""
        return states

    def slurm(self) -> dict:
        return json.loads(self.slurm_state.read_text())["nodes"]

    def slurm_calls(self) -> list[list[str]]:
        log = Path(str(self.slurm_state) + ".log")
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.write_text("")
        return calls

    def play(self, *extra: str) -> dict:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(self.inventory), str(self.playbook),
             "-e", "ansible_become=false", *extra],
            cwd=self.tmp, env=self.env, capture_output=True, text=True, timeout=600,
        )
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            pytest.fail(result.stdout[-4000:] + result.stderr[-4000:])


def _task_results(run: dict, host: str) -> dict[str, dict]:
    """Task name (without the role prefix) -> HOST's result, over both plays."""
    found = {}
    for play in run["plays"]:
        for task in play["tasks"]:
            if host in task["hosts"]:
                # "mig : MIG | Apply the layout to the GPUs" -> "Apply the layout to the GPUs"
                found[task["task"]["name"].split(" : ", 1)[-1].split(" | ", 1)[-1]] = task["hosts"][host]
    return found


def _failure(run: dict, host: str) -> tuple[str, str] | None:
    for name, result in _task_results(run, host).items():
        if result.get("failed"):
            return name, result.get("msg", "")
    return None


def _changed(run: dict, host: str) -> list[str]:
    return [name for name, result in _task_results(run, host).items() if result.get("changed")]


def _mutations(calls: list[list[str]]) -> list[list[str]]:
    return [call for call in calls if call[0] == "scancel" or call[:2] == ["scontrol", "update"]]


@pytest.fixture(scope="module")
def bed(tmp_path_factory) -> dict:
    """The plan, the deploy and the second deploy, with what each left behind."""
    bed = Bed(tmp_path_factory.mktemp("mig-role"))
    before = bed.mig_states()
    slurm_before = bed.slurm()
    check = bed.play("--check")
    after_check = {"mig": bed.mig_states(), "slurm": bed.slurm(), "calls": bed.slurm_calls()}
    assert slurm_before == after_check["slurm"]
    first = bed.play()
    after_first = {"slurm": bed.slurm(), "calls": bed.slurm_calls(), "gpus": {host: bed.gpus(host) for host in CASES}}
    second = bed.play()
    after_second = {"slurm": bed.slurm(), "calls": bed.slurm_calls()}
    return {"bed": bed, "before": before, "check": check, "after_check": after_check, "first": first,
            "after_first": after_first, "second": second, "after_second": after_second}


# --------------------------------------------------------------------------
# the plan (--check)


def test_the_plan_changes_nothing_and_drains_nothing(bed):
    assert bed["after_check"]["mig"] == bed["before"]
    assert _mutations(bed["after_check"]["calls"]) == []


def test_the_plan_names_the_nodes_that_would_change(bed):
    run = bed["check"]
    would = {host for host in CASES if "Apply the layout to the GPUs" in _changed(run, host)}
    assert would == {"idle", "busy", "forced", "newnode", "admin", "resetpending"}
    # A node already right skips the whole change (drain and apply) as one include.
    assert _task_results(run, "same")["Change the layout"].get("skipped")
    assert "Apply the layout to the GPUs" not in _task_results(run, "same")
    smi = str(bed["bed"].bin / "nvidia-smi")  # found on PATH
    assert _task_results(run, "idle")["Apply the layout to the GPUs"]["actions"] == [
        f"{smi} mig -i 0 -cgi 9,14,19,19 -C", f"{smi} mig -i 1 -cgi 9,14,19,19 -C",
    ]


# --------------------------------------------------------------------------
# the deploy


def test_a_node_already_right_is_not_drained_or_touched(bed):
    first = bed["first"]
    assert _changed(first, "same") == []
    assert not any(call[-1:] == ["same"] or "nodename=same" in call for call in bed["after_first"]["calls"])
    assert [gpu["current"] for gpu in bed["after_first"]["gpus"]["same"]] == [MIXED, MIXED]


def test_a_node_that_changes_is_drained_waited_for_applied_and_resumed(bed):
    calls = bed["after_first"]["calls"]
    assert ["scontrol", "show", "node", "idle", "--oneliner"] in calls
    assert ["scontrol", "update", "nodename=idle", "state=drain", f"reason={REASON}"] in calls
    squeue = [call for call in calls if call == ["squeue", "--noheader", "--nodelist=idle", "--format=%A"]]
    assert len(squeue) == 2  # the job was there at the first look, gone at the second
    assert ["scontrol", "update", "nodename=idle", "state=resume"] in calls
    drain_at = calls.index(["scontrol", "update", "nodename=idle", "state=drain", f"reason={REASON}"])
    resume_at = calls.index(["scontrol", "update", "nodename=idle", "state=resume"])
    assert drain_at < resume_at
    assert [gpu["current"] for gpu in bed["after_first"]["gpus"]["idle"]] == [MIXED, MIXED]
    assert bed["after_first"]["slurm"]["idle"]["drain"] is False
    results = _task_results(bed["first"], "idle")
    assert results["Flag the node for the Slurm play"]["ansible_facts"] == {"mig_changed": True, "mig_reset_required": []}


def test_jobs_still_running_fail_the_node_leaving_it_drained_and_unchanged(bed):
    failure = _failure(bed["first"], "busy")
    assert failure is not None and failure[0] == "Fail the node while jobs still run on it"
    assert "1 job(s) still on the node after mig_drain_timeout=2 s (201)" in failure[1]
    assert f"stays drained ('{REASON}')" in failure[1] and "mig_force=true" in failure[1]
    slurm = bed["after_first"]["slurm"]["busy"]
    assert (slurm["drain"], slurm["reason"], [job["id"] for job in slurm["jobs"]]) == (True, REASON, [201])
    assert not any(call[0] == "scancel" and "--nodelist=busy" in call for call in bed["after_first"]["calls"])
    (gpu,) = bed["after_first"]["gpus"]["busy"]
    assert (gpu["mig_mode"]["current"], gpu["current"]) == ("Disabled", [])
    assert ["scontrol", "update", "nodename=busy", "state=resume"] not in bed["after_first"]["calls"]


def test_mig_force_ends_the_jobs_then_applies(bed):
    calls = bed["after_first"]["calls"]
    assert ["scancel", "--nodelist=forced"] in calls
    assert calls.index(["scancel", "--nodelist=forced"]) > calls.index(
        ["scontrol", "update", "nodename=forced", "state=drain", f"reason={REASON}"])
    assert _failure(bed["first"], "forced") is None
    (gpu,) = bed["after_first"]["gpus"]["forced"]
    assert gpu["current"] == MIXED
    assert bed["after_first"]["slurm"]["forced"]["drain"] is False  # resumed


def test_a_node_slurm_does_not_know_is_applied_without_a_drain(bed):
    assert _failure(bed["first"], "newnode") is None
    assert not any("nodename=newnode" in call or "--nodelist=newnode" in call for call in bed["after_first"]["calls"])
    assert bed["after_first"]["gpus"]["newnode"][0]["current"] == ["7g.80gb"]


def test_a_node_drained_by_someone_else_keeps_its_drain(bed):
    calls = bed["after_first"]["calls"]
    assert not any("nodename=admin" in call for call in calls)  # neither drained again nor resumed
    assert bed["after_first"]["slurm"]["admin"] == {"drain": True, "reason": "disk swap", "jobs": []}
    said = _task_results(bed["first"], "admin")["Say the node keeps the drain it has"]["msg"]
    assert said.startswith("admin is drained already (disk swap): it keeps that drain")
    assert bed["after_first"]["gpus"]["admin"][0]["mig_mode"]["current"] == "Disabled"  # applied all the same


def test_an_unmanaged_node_is_not_read(bed):
    results = _task_results(bed["first"], "plain")
    assert results["Plan the layout against the GPUs"].get("skipped")
    assert results["Flag the node for the Slurm play"]["ansible_facts"]["mig_changed"] is False
    assert _changed(bed["first"], "plain") == []


def test_a_pending_mode_change_is_reported_like_the_drivers_reboot(bed):
    assert _failure(bed["first"], "resetpending") is None
    stats = bed["first"]["global_custom_stats"]["deepops_reboot_required"]
    assert set(stats) == {"resetpending"}
    assert "MIG mode change on GPU 1 is pending until a GPU reset or a reboot" in stats["resetpending"]
    results = _task_results(bed["first"], "resetpending")
    assert results["Flag the node for the Slurm play"]["ansible_facts"] == {"mig_changed": True, "mig_reset_required": [1]}
    gpu0, gpu1 = bed["after_first"]["gpus"]["resetpending"]
    assert gpu0["current"] == ["1g.10gb"] * 7
    assert (gpu1["mig_mode"], gpu1["current"]) == ({"current": "Disabled", "pending": "Enabled"}, [])
    assert bed["after_first"]["slurm"]["resetpending"]["drain"] is False  # consistent with its facts: resumed


def test_a_controller_that_does_not_answer_fails_the_node_before_any_change(bed):
    failure = _failure(bed["first"], "nocontact")
    assert failure is not None and failure[0] == "Assert slurmctld answered"
    assert "Unable to contact slurm controller" in failure[1] and "MIG layout is unchanged" in failure[1]
    assert bed["after_first"]["gpus"]["nocontact"][0]["mig_mode"]["current"] == "Enabled"


def test_a_layout_that_does_not_fit_fails_in_the_plan(bed):
    failure = _failure(bed["first"], "badlayout")
    assert failure is not None and failure[0] == "Plan the layout against the GPUs"
    assert "GPU 2: no such GPU, the node has 2 (0-1)" in failure[1]
    assert not any("nodename=badlayout" in call for call in bed["after_first"]["calls"])
    assert [gpu["current"] for gpu in bed["after_first"]["gpus"]["badlayout"]] == [[], []]


# --------------------------------------------------------------------------
# the second deploy


def test_the_second_deploy_changes_nothing_and_drains_nothing(bed):
    second, calls = bed["second"], bed["after_second"]["calls"]
    for host in ("same", "idle", "forced", "newnode", "admin", "plain", "resetpending"):
        assert _failure(second, host) is None, host
        assert _changed(second, host) == [], host
    # The busy node is still drained for us, and its job still runs: it fails again, untouched.
    assert _failure(second, "busy")[0] == "Fail the node while jobs still run on it"
    said = _task_results(second, "busy")["Say the node keeps the drain it has"]["msg"]
    assert said.startswith(f"busy is drained already ({REASON})")
    assert _mutations(calls) == []
    assert second["global_custom_stats"]["deepops_reboot_required"].keys() == {"resetpending"}


@pytest.mark.parametrize("check", [True, False])
def test_resume_on_a_controller_without_slurm_yet_resumes_nothing_and_does_not_fail(tmp_path, check):
    # deepops plan on a fresh cluster reaches the resume step before Slurm is
    # installed: no sinfo on the controller must not fail the run.
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "slurm_controller": {"hosts": {"ctl01": dict(local)}},
        "slurm_compute": {"hosts": {"gpu01": {**local, "mig_changed": False}}},
    }}}))
    playbook = tmp_path / "resume.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Resume", "hosts": "slurm_controller[0]", "gather_facts": False,
        "tasks": [{"name": "MIG | Resume", "ansible.builtin.import_role": {"name": "mig", "tasks_from": "resume.yml"}}],
    }]))
    empty = tmp_path / "bin"
    empty.mkdir()  # a PATH with ansible's Python and nothing of Slurm
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")},
        "PATH": f"{empty}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
    }
    assert shutil.which("sinfo", path=env["PATH"]) is None
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(playbook),
         *(["--check"] if check else [])],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "failed=0" in result.stdout and "changed=0" in result.stdout
