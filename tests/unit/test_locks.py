"""One playbook run per inventory: a second run exits 75 naming the one that
holds the lock, or waits with --wait; a holder that died leaves no lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepops_py import locks, runner
from deepops_py.cli import main
from deepops_py.errors import EXIT_BUSY, DeepopsError


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def hold_lock(inventory: Path, *, seconds: float = 60) -> subprocess.Popen:
    """Another process that takes INVENTORY's lock as deploy, says so, then sleeps."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from deepops_py import locks
        with locks.inventory_lock(Path({str(inventory)!r}), "deploy") as lock:
            lock.record_run("20261201-000000-deploy-abcd")
            print("HELD", flush=True)
            time.sleep({seconds})
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert process.stdout.readline().strip() == "HELD"
    return process


def taken_elsewhere(inventory: Path) -> bool:
    """Whether another process would find INVENTORY's lock taken."""
    script = "import fcntl, sys; fcntl.flock(open(sys.argv[1], 'a'), fcntl.LOCK_EX | fcntl.LOCK_NB)"
    return subprocess.run([sys.executable, "-c", script, str(locks.lock_path(inventory))],
                          capture_output=True).returncode != 0


def test_a_second_run_on_the_same_inventory_is_refused_naming_the_holder(tmp_path):
    inventory = tmp_path / "inventory.yml"
    holder = hold_lock(inventory)
    try:
        with pytest.raises(DeepopsError) as raised, locks.inventory_lock(inventory, "plan"):
            pass
        assert raised.value.exit_code == EXIT_BUSY == 75
        message = raised.value.message
        assert "deploy run 20261201-000000-deploy-abcd" in message and f"pid {holder.pid}" in message
        assert str(inventory.resolve()) in message and "--wait" in message
        with locks.inventory_lock(tmp_path / "other.yml", "plan"):
            pass  # another inventory is not in the way
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_whose_holder_was_killed_is_free(tmp_path):
    inventory = tmp_path / "inventory.yml"
    holder = hold_lock(inventory)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with locks.inventory_lock(inventory, "deploy") as lock:
        lock.record_run("mine")
        assert '"run_id": "mine"' in locks.lock_path(inventory).read_text()
        assert f'"pid": {os.getpid()}' in locks.lock_path(inventory).read_text()


def test_wait_queues_behind_the_holder(tmp_path, capfd):
    inventory = tmp_path / "inventory.yml"
    holder = hold_lock(inventory, seconds=2)
    started = time.monotonic()
    with locks.inventory_lock(inventory, "deploy", wait=True):
        waited = time.monotonic() - started
    holder.wait(timeout=10)
    assert waited > 1.5  # the holder kept it 2 s after saying so
    assert "Waiting for deepops deploy run 20261201-000000-deploy-abcd" in capfd.readouterr().err


def test_the_lock_is_released_after_a_run_and_not_inherited(tmp_path):
    inventory = tmp_path / "inventory.yml"
    with locks.inventory_lock(inventory, "deploy"):
        # a child process (ansible-playbook) does not get the lock's descriptor
        child = subprocess.run(["ls", f"/proc/{os.getpid()}/fd"], capture_output=True, text=True)
        assert child.returncode == 0
        opened = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.listdir('/proc/self/fd')))"], capture_output=True, text=True
        )
        assert opened.stdout.strip() == "['0', '1', '2', '3']"  # 3: the listing itself
    assert locks.lock_path(inventory).read_text() == ""
    with locks.inventory_lock(inventory, "deploy"):
        pass


def test_taking_the_lock_again_in_the_holding_process_is_the_held_lock(tmp_path):
    # deepops upgrade holds it around its steps, each of which takes it again to run
    inventory = tmp_path / "inventory.yml"
    with locks.inventory_lock(inventory, "upgrade") as outer:
        with locks.inventory_lock(inventory, "upgrade") as inner:
            assert inner is outer
            inner.record_run("20261206-000000-upgrade-0001")
        assert taken_elsewhere(inventory)  # the inner release released nothing
        assert '"run_id": "20261206-000000-upgrade-0001"' in locks.lock_path(inventory).read_text()
    assert not taken_elsewhere(inventory)
    assert locks.lock_path(inventory).read_text() == ""


def test_deploy_on_a_locked_inventory_exits_75_and_starts_nothing(write_inventory, monkeypatch):
    started: list = []
    monkeypatch.setattr(runner.ansible_runner, "Runner", lambda *args, **kwargs: started.append(args))
    inventory = write_inventory()
    holder = hold_lock(inventory)
    try:
        result = CliRunner().invoke(main, ["deploy", "-i", str(inventory)])
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 75, result.output
    assert "in use by deepops deploy run 20261201-000000-deploy-abcd" in result.output
    assert started == [] and "Traceback" not in result.output
