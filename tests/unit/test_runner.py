"""The ansible-runner wrapper, run for real against localhost (connection local).

Each test writes a tiny content dir (playbooks/ + the project's ansible.cfg)
and an inventory with two aliases of localhost, 'first' and 'second'.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deepops_py import history, runner
from deepops_py.errors import DeepopsError, InputError
from deepops_py.progress import PlainProgress, SilentProgress

REPO = Path(__file__).resolve().parents[2]

SITE = """\
- name: Test play
  hosts: all
  gather_facts: false
  tasks:
    - name: Write marker
      ansible.builtin.copy:
        dest: "{{ marker_dir }}/{{ inventory_hostname }}.txt"
        content: "hello\\n"
        mode: "0644"
    - name: Always ok
      ansible.builtin.command: "true"
      changed_when: false
    - name: Ignored failure
      ansible.builtin.fail:
        msg: ignored boom
      ignore_errors: true
    - name: Use the secret
      ansible.builtin.debug:
        msg: "{{ secret_value }}"
      no_log: true
    - name: Fail on second
      ansible.builtin.fail:
        msg: "boom on {{ inventory_hostname }}"
      when: inventory_hostname == 'second'
    - name: After the failure
      ansible.builtin.command: "true"
      changed_when: false
"""

SECRET = "s3cr3t-Value-never-stored"


def make_workspace(root: Path) -> tuple[Path, Path, Path, Path]:
    content = root / "content"
    (content / "playbooks").mkdir(parents=True)
    shutil.copy(REPO / "ansible.cfg", content / "ansible.cfg")
    (content / "playbooks" / "site.yml").write_text(SITE)
    inventory = root / "inventory.yml"
    local = '{ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}"}'
    inventory.write_text(f"all:\n  hosts:\n    first: {local}\n    second: {local}\n")
    markers = root / "markers"
    markers.mkdir()
    return root, content, inventory, markers


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    # The local modules' temporary files (TMPDIR reaches them through the
    # runner): a module killed by a stop test cannot remove its own.
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    return make_workspace(tmp_path)


def _request(workspace, **overrides) -> runner.RunRequest:
    _, content, inventory, markers = workspace
    values = dict(
        command="deploy",
        playbook="site.yml",
        inventory=inventory,
        extra_vars={"marker_dir": str(markers), "secret_value": SECRET},
        content_dir=content,
    )
    values.update(overrides)
    return runner.RunRequest(**values)


class Scenario:
    """Three real runs shared by the tests below (each playbook run costs seconds):
    plan (check mode) on 'first', a full deploy ('second' fails), then a deploy of 'first' alone."""

    def __init__(self, root: Path):
        self.workspace = make_workspace(root)
        self.root, _, self.inventory, self.markers = self.workspace
        self.progress = io.StringIO()
        self.plan = runner.run_playbook(
            _request(self.workspace, command="plan", check=True, diff=True, limit="first"), progress=SilentProgress()
        )
        self.markers_after_plan = sorted(path.name for path in self.markers.iterdir())
        self.deploy = runner.run_playbook(
            _request(self.workspace, inventory_hosts=("first", "second")), progress=PlainProgress(self.progress)
        )
        self.markers_after_deploy = sorted(path.name for path in self.markers.iterdir())
        self.again = runner.run_playbook(_request(self.workspace, limit="first"), progress=SilentProgress())
        self.records = history.list_runs()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    root = tmp_path_factory.mktemp("runner")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPOPS_STATE_DIR", str(root / "state"))
        patch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-pass")
        patch.setenv("ANSIBLE_NOCOLOR", "1")
        scenario = Scenario(root)
        yield scenario


def test_deploy_reports_per_host_counts_failures_and_changes(scenario):
    result = scenario.deploy
    assert not result.ok
    assert result.status == "failed"
    assert result.rc != 0
    first, second = result.hosts["first"], result.hosts["second"]
    # first: write, always ok, ignored failure (ok + ignored), secret, after; 'Fail on second' skipped
    assert (first.ok, first.changed, first.failed, first.unreachable, first.skipped, first.ignored) == (5, 1, 0, 0, 1, 1)
    assert (second.ok, second.changed, second.failed, second.ignored) == (4, 1, 1, 1)
    assert first.failed_task is None and first.message is None
    assert second.failed_task == "Fail on second"
    assert second.message == "boom on second"
    assert first.changed_tasks == ["Write marker"] and second.changed_tasks == ["Write marker"]
    assert result.failed_hosts == ["second"]
    assert scenario.markers_after_deploy == ["first.txt", "second.txt"]


def test_second_run_changes_nothing_and_ok_run_is_ok(scenario):
    result = scenario.again
    assert result.ok and result.status == "ok" and result.rc == 0
    assert list(result.hosts) == ["first"]
    assert result.hosts["first"].changed == 0
    assert result.hosts["first"].changed_tasks == []


def test_check_mode_reports_would_change_and_changes_nothing(scenario):
    result = scenario.plan
    assert result.ok, result.as_dict()
    assert result.check is True and result.command == "plan"
    assert result.hosts["first"].changed_tasks == ["Write marker"]
    assert result.hosts["first"].changed == 1
    assert scenario.markers_after_plan == []
    assert result.request["check"] is True and result.request["diff"] is True


def test_run_json_and_history(scenario):
    first = scenario.deploy
    run_dir = Path(first.artifacts)
    assert run_dir == scenario.root / "state" / "runs" / first.run_id
    assert first.run_id.split("-")[2] == "deploy"
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["status"] == "failed" and stored["command"] == "deploy"
    assert stored["inventory"] == str(scenario.inventory)
    assert stored["request"]["extra_vars"] == ["marker_dir", "secret_value"]  # names, never values
    assert stored["hosts"]["second"]["failed_task"] == "Fail on second"
    assert stored["duration"] > 0 and stored["rc"] == first.rc
    assert (run_dir / "job_events").is_dir() and (run_dir / "stdout").is_file()  # ansible-runner's artifacts

    assert [record.id for record in scenario.records] == [scenario.again.run_id, first.run_id, scenario.plan.run_id]
    assert [record.result for record in scenario.records] == ["ok", "failed", "ok"]
    assert [record.command for record in scenario.records] == ["deploy", "deploy", "plan"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPOPS_STATE_DIR", str(scenario.root / "state"))
        assert history.load_run(first.run_id).as_dict() == first.as_dict()


def test_no_secret_anywhere_on_disk(scenario):
    for path in (scenario.root / "state").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_env_passes_only_ansible_vars_and_uses_this_venv(scenario):
    command = json.loads((Path(scenario.deploy.artifacts) / "command").read_text())
    env = command["env"]
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["ANSIBLE_NOCOLOR"] == "1"
    assert env["ANSIBLE_CONFIG"].endswith("content/ansible.cfg")
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert env["PATH"] == os.environ["PATH"]  # passed through, not steered
    assert command["command"][0] == str(Path(sys.executable).parent / "ansible-playbook")
    assert env["DEEPOPS_INVENTORY_CHECKED"] == str(scenario.inventory)
    assert not any(SECRET in arg for arg in command["command"])  # extra vars went through a temp file
    extra_vars_file = next(arg for arg in command["command"] if arg.startswith("@"))[1:]
    assert not Path(extra_vars_file).exists()  # and that file is gone


def test_plain_progress_is_one_line_per_task_and_notable_result(scenario):
    lines = scenario.progress.getvalue().splitlines()
    assert "  task: Write marker" in lines
    assert "    changed: first" in lines
    assert "    FAILED: second: boom on second" in lines
    assert not any(SECRET in line for line in lines)
    assert sum(line.startswith("  task:") for line in lines) == 6
    assert sorted(line for line in lines if line.startswith("    changed:")) == ["    changed: first", "    changed: second"]


def test_syntax_error_fails_run_with_explanation(workspace):
    _, content, _, _ = workspace
    (content / "playbooks" / "broken.yml").write_text("- name: Broken\n  hosts: all\n  tasks:\n    - nosuchmodule_xyz: {}\n")
    result = runner.run_playbook(_request(workspace, playbook="broken.yml"), progress=SilentProgress())

    assert not result.ok
    assert result.hosts == {}
    assert "rc=" in result.error and "nosuchmodule_xyz" in result.error


def test_unreachable_host_is_counted_and_named(workspace):
    tmp_path, _, _, _ = workspace
    inventory = tmp_path / "unreachable.yml"
    inventory.write_text(
        "all:\n  hosts:\n    gone:\n      ansible_host: 127.0.0.1\n      ansible_port: 1\n"
        "      ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null\n"
        "      ansible_ssh_timeout: 5\n"
    )
    result = runner.run_playbook(_request(workspace, inventory=inventory), progress=SilentProgress())

    assert not result.ok
    host = result.hosts["gone"]
    assert host.unreachable == 1 and host.failed == 0
    assert host.failed_task == "Write marker"
    assert host.message


def test_missing_playbook_and_inventory_are_clear_errors(workspace):
    tmp_path, _, _, _ = workspace
    with pytest.raises(DeepopsError, match="Playbook .*nope.yml not found"):
        runner.run_playbook(_request(workspace, playbook="nope.yml"), progress=SilentProgress())
    with pytest.raises(InputError, match="Inventory .* not found"):
        runner.run_playbook(_request(workspace, inventory=tmp_path / "missing.yml"), progress=SilentProgress())
    assert history.list_runs() == []  # nothing started, nothing recorded


def test_missing_ansible_playbook_is_a_clear_error(workspace, monkeypatch, tmp_path):
    monkeypatch.setattr(runner.sys, "executable", str(tmp_path / "python"))  # nothing installed beside it
    monkeypatch.setattr(runner.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(DeepopsError, match="ansible-playbook not found"):
        runner.run_playbook(_request(workspace), progress=SilentProgress())


def _processes_with(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(f"{cmdline.parent.name}: {args}")
    return found


def _slow_run_script(workspace, seconds: str) -> str:
    _, content, inventory, _ = workspace
    (content / "playbooks" / "slow.yml").write_text(
        "- name: Slow\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        f"    - name: Sleep\n      ansible.builtin.command: sleep {seconds}\n"
    )
    return textwrap.dedent(
        f"""
        import signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from pathlib import Path
        from deepops_py import runner
        from deepops_py.progress import PlainProgress
        request = runner.RunRequest(command="deploy", playbook="slow.yml", inventory=Path({str(inventory)!r}),
                                    content_dir=Path({str(content)!r}))
        try:
            runner.run_playbook(request, progress=PlainProgress(sys.stdout))
        except KeyboardInterrupt as stop:
            print("INTERRUPTED", getattr(stop, "exit_code", None), flush=True)
        """
    )


def test_an_exception_while_handling_events_ends_every_child(workspace, monkeypatch):
    seconds = f"39.{os.getpid() % 1000:03d}"
    script = _slow_run_script(workspace, seconds).replace(
        "from deepops_py.progress import PlainProgress",
        "from deepops_py.progress import PlainProgress\n"
        "from deepops_py import run_results\n"
        "handle = run_results.EventCollector.handle\n"
        "def broken(self, event):\n"
        "    if event.get('event') == 'runner_on_start':\n"
        "        import time; time.sleep(1); raise RuntimeError('broken event handling')\n"
        "    return handle(self, event)\n"
        "run_results.EventCollector.handle = broken",
    ).replace("except KeyboardInterrupt as stop:", "except Exception as stop:")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "INTERRUPTED 1" in result.stdout, result.stdout + result.stderr  # DeepopsError: exit 1
    assert _processes_with(f"sleep {seconds}") == [] and _processes_with("slow.yml") == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_ends_every_child_and_records_interrupted(workspace, signum):
    # A sleep no other test runs: whatever is left of this run is found by it.
    seconds = f"{40 + signum}.{os.getpid() % 1000:03d}"
    process = subprocess.Popen(
        [sys.executable, "-c", _slow_run_script(workspace, seconds)], stdout=subprocess.PIPE, text=True
    )
    for line in process.stdout:
        if "task: Sleep" in line:
            break
    for _ in range(100):  # until both hosts' sleep has started
        if len(_processes_with(f"sleep {seconds}")) >= 2:
            break
        time.sleep(0.1)
    assert _processes_with("slow.yml") and _processes_with(f"sleep {seconds}")
    process.send_signal(signum)
    output, _ = process.communicate(timeout=30)

    assert f"INTERRUPTED {128 + signum}" in output
    assert _processes_with(f"sleep {seconds}") == [] and _processes_with("slow.yml") == []
    [record] = history.list_runs()
    assert record.result == "interrupted"
    loaded = history.load_run(record.id)
    assert loaded.status == "interrupted" and not loaded.ok
    assert loaded.error == f"interrupted by {signal.Signals(signum).name}: ansible-playbook was stopped"


def test_runs_show_after_sigkill_shows_what_the_events_recorded(workspace):
    from click.testing import CliRunner

    from deepops_py.cli import main

    seconds = f"38.{os.getpid() % 1000:03d}"
    _, content, _, _ = workspace
    script = _slow_run_script(workspace, seconds)
    (content / "playbooks" / "slow.yml").write_text(
        "- name: Slow\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Quick\n      ansible.builtin.command: 'true'\n      changed_when: false\n"
        f"    - name: Sleep\n      ansible.builtin.command: sleep {seconds}\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:
            if "task: Sleep" in line:
                break
        time.sleep(1)
        process.kill()  # SIGKILL: deepops cannot record anything
        process.wait(timeout=10)
    finally:
        for leftover in _processes_with(f"sleep {seconds}") + _processes_with("slow.yml"):
            os.kill(int(leftover.split(":")[0]), signal.SIGKILL)  # orphans a SIGKILL leaves by nature

    [record] = history.list_runs()
    loaded = history.load_run(record.id)
    assert loaded.status == "interrupted"
    assert {name: host.ok for name, host in loaded.hosts.items()} == {"first": 1, "second": 1}
    assert loaded.error.startswith("interrupted: its process ended before the run finished")
    shown = CliRunner().invoke(main, ["runs", "show", record.id])
    assert "No host ran any task" not in shown.output
    assert "first" in shown.output and "second" in shown.output and "interrupted" in shown.output
