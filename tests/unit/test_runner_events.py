"""EventCollector on hand-made event sequences: the cases a quick local run cannot produce."""

from __future__ import annotations

from deepops_py.run_results import EventCollector, HostResult, RunResult, final_status


def event(kind: str, host: str = "", task: str = "", **data) -> dict:
    return {"event": kind, "event_data": {"host": host, "task": task, **data}}


def test_counts_come_from_stats_when_present():
    collector = EventCollector()
    collector.handle(event("runner_on_ok", "a", "Install", res={"changed": True}))
    collector.handle(
        event(
            "playbook_on_stats",
            ok={"a": 7}, changed={"a": 2}, failures={}, dark={}, skipped={"a": 3}, rescued={}, ignored={"a": 1},
        )
    )
    [host] = collector.host_results().values()
    assert (host.ok, host.changed, host.skipped, host.ignored, host.failed) == (7, 2, 3, 1, 0)
    assert host.changed_tasks == ["Install"]


def test_host_missing_from_stats_is_counted_from_events():
    collector = EventCollector()
    collector.handle(event("runner_on_ok", "a", "One", res={"changed": False}))
    collector.handle(event("runner_on_ok", "b", "One", res={"changed": True}))
    collector.handle(event("runner_on_failed", "b", "Two", res={"msg": "nope"}))
    collector.handle(event("playbook_on_stats", ok={"a": 1}, changed={}, failures={}, dark={}, skipped={}))
    results = collector.host_results()
    assert results["a"].ok == 1 and results["a"].succeeded
    assert (results["b"].ok, results["b"].changed, results["b"].failed) == (1, 1, 1)
    assert results["b"].failed_task == "Two" and results["b"].message == "nope"


def test_no_stats_at_all_after_cancel():
    collector = EventCollector()
    collector.handle(event("runner_on_unreachable", "c", "Gathering Facts", res={"msg": "ssh: connect refused"}))
    collector.handle(event("runner_on_skipped", "d", "Maybe"))
    results = collector.host_results()
    assert results["c"].unreachable == 1 and results["c"].message == "ssh: connect refused"
    assert results["d"].skipped == 1 and results["d"].succeeded
    assert not collector.saw_stats


def test_ignored_failure_is_not_a_failure():
    collector = EventCollector()
    collector.handle(event("runner_on_failed", "a", "Optional", res={"msg": "x"}, ignore_errors=True))
    host = collector.host_results()["a"]
    assert (host.ok, host.ignored, host.failed) == (1, 1, 0)
    assert host.failed_task is None


def test_rescued_failure_is_not_reported_as_the_failing_task():
    collector = EventCollector()
    collector.handle(event("runner_on_failed", "a", "Try", res={"msg": "first attempt"}))
    collector.handle(event("runner_on_ok", "a", "Rescue", res={"changed": False}))
    collector.handle(event("playbook_on_stats", ok={"a": 1}, failures={}, dark={}, rescued={"a": 1}))
    host = collector.host_results()["a"]
    assert host.succeeded and host.rescued == 1
    assert host.failed_task is None and host.message is None


def test_no_log_failure_keeps_the_censored_note_only():
    collector = EventCollector()
    censored = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
    collector.handle(event("runner_on_failed", "a", "Set password", res={"censored": censored, "changed": False}))
    host = collector.host_results()["a"]
    assert host.message == censored


def test_a_failed_command_says_what_it_printed_last():
    collector = EventCollector()
    collector.handle(event("runner_on_failed", "a", "Reconfigure", res={
        "msg": "non-zero return code", "rc": 1, "stdout": "",
        "stderr": "scontrol: note\nslurm_reconfigure error: Unable to contact slurm controller\n",
    }))
    collector.handle(event("runner_on_failed", "b", "Check", res={"msg": "non-zero return code", "stdout": "DOWN\n"}))
    collector.handle(event("runner_on_failed", "c", "Assert", res={"msg": "x is DOWN", "stdout": "DOWN"}))
    results = collector.host_results()
    assert results["a"].message == "non-zero return code: slurm_reconfigure error: Unable to contact slurm controller"
    assert results["b"].message == "non-zero return code: DOWN"
    assert results["c"].message == "x is DOWN"


def test_changed_task_names_are_unique_and_ordered():
    collector = EventCollector()
    for task in ("B", "A", "B"):
        collector.handle(event("runner_on_ok", "a", task, res={"changed": True}))
    assert collector.host_results()["a"].changed_tasks == ["B", "A"]


def test_final_status():
    good = {"a": HostResult("a", ok=1)}
    bad = {"a": HostResult("a", failed=1)}
    gone = {"a": HostResult("a", unreachable=1)}
    assert final_status(runner_status="successful", rc=0, hosts=good) == "ok"
    assert final_status(runner_status="successful", rc=0, hosts=bad) == "failed"
    assert final_status(runner_status="failed", rc=4, hosts=gone) == "failed"
    assert final_status(runner_status="failed", rc=2, hosts={}) == "failed"
    assert final_status(runner_status="canceled", rc=254, hosts=good) == "interrupted"


def test_run_result_round_trips_through_dict():
    result = RunResult(
        run_id="r", command="plan", playbook="p", inventory="i", start="s", artifacts="d", status="ok", check=True,
        hosts={"a": HostResult("a", ok=2, changed=1, changed_tasks=["X"])},
    )
    data = result.as_dict()
    assert data["ok"] is True
    assert RunResult.from_dict(data) == result


def test_print_summary_names_failing_task_and_would_change_tasks():
    import io

    from rich.console import Console

    from deepops_py.runner import print_summary

    result = RunResult(
        run_id="20261130-101502-plan-ab12", command="plan", playbook="p", inventory="i", start="s",
        artifacts="/state/runs/20261130-101502-plan-ab12", status="failed", check=True, duration=3.25,
        hosts={
            "gpu01": HostResult("gpu01", ok=5, changed=2, changed_tasks=["Slurm | Render gres.conf", "Driver | Install"]),
            "gpu02": HostResult("gpu02", unreachable=1, failed_task="Gathering Facts", message="ssh: timed out"),
        },
    )
    out = io.StringIO()
    print_summary(result, console=Console(file=out, width=200))
    text = out.getvalue()
    assert "would change" in text
    assert "Slurm | Render gres.conf" in text and "Driver | Install" in text
    assert "gpu02 unreachable at task Gathering Facts: ssh: timed out" in text
    assert "Would change on gpu01:\n  - Slurm | Render gres.conf\n  - Driver | Install" in text
    assert "20261130-101502-plan-ab12: failed in 3.2s, failed hosts: gpu02" in text
    assert "/state/runs/20261130-101502-plan-ab12" in text


def test_set_stats_data_comes_from_the_stats_event():
    collector = EventCollector()
    assert collector.artifact_data == {}
    collector.handle(
        event("playbook_on_stats", ok={"a": 1}, failures={}, dark={}, artifact_data={"checks": [{"name": "x"}]})
    )
    assert collector.artifact_data == {"checks": [{"name": "x"}]}
    assert collector.host_results()["a"].ok == 1


def test_run_result_data_round_trips():
    result = RunResult(run_id="r", command="validate", playbook="p", inventory="i", start="s", artifacts="a")
    result.data = {"validate_hostname": [{"check": "hostname", "passed": True}]}
    assert RunResult.from_dict(result.as_dict()).data == result.data
    assert RunResult.from_dict({k: v for k, v in result.as_dict().items() if k != "data"}).data == {}


def test_summary_names_nodes_that_need_a_reboot():
    import io

    from rich.console import Console

    from deepops_py.run_results import RunResult
    from deepops_py.runner import print_summary

    result = RunResult(run_id="r1", command="deploy", playbook="site.yml", inventory="inv", start="now",
                       artifacts="/tmp/r1", status="ok",
                       data={"deepops_reboot_required": {"gpu02": "driver 570 -> 580", "gpu01": "driver 570 -> 580"}})
    out = io.StringIO()
    print_summary(result, console=Console(file=out, width=120))
    text = out.getvalue()
    assert "Reboot required: gpu01, gpu02" in text
    assert "gpu02: driver 570 -> 580" in text


def test_a_changed_no_log_task_is_listed_as_changed():
    """Censored results carry no "changed"; the callback's line does (plan must
    list a replaced MUNGE key, whose task is no_log)."""
    censored = {"censored": "the output has been hidden due to the fact that 'no_log: true' was specified for this result"}
    collector = EventCollector()
    collector.handle({**event("runner_on_ok", "gpu02", "Munge | Install the cluster key", res=censored), "stdout": "changed: [gpu02]"})
    collector.handle({**event("runner_on_ok", "gpu01", "Munge | Install the cluster key", res=censored), "stdout": "ok: [gpu01]"})
    collector.handle({**event("runner_on_ok", "ctl01", "Munge | Install the cluster key", res=censored),
                      "stdout": "\x1b[0;33mchanged: [ctl01]\x1b[0m"})
    hosts = collector.host_results()
    assert hosts["gpu02"].changed_tasks == ["Munge | Install the cluster key"] and hosts["gpu02"].changed == 1
    assert hosts["gpu01"].changed_tasks == [] and hosts["gpu01"].changed == 0
    assert hosts["ctl01"].changed_tasks == ["Munge | Install the cluster key"]


def test_task_warnings_are_kept_per_host_once():
    collector = EventCollector()
    for _ in range(2):
        collector.handle(event("runner_on_ok", "ctl", "Accounts", res={"changed": False, "warnings": ["kept: bob@users "]}))
    collector.handle(event("playbook_on_stats", ok={"ctl": 2}, changed={}, failures={}, dark={}, skipped={}, rescued={}, ignored={}))
    assert collector.host_results()["ctl"].warnings == ["Accounts: kept: bob@users"]


def test_ansibles_notice_of_a_remote_tmp_made_is_not_a_warning_for_the_user():
    notice = ("Module remote_tmp /root/.ansible/tmp did not exist and was created with a mode of 0700, this may "
              "cause issues when running as another user. To avoid this, create the remote_tmp dir with the "
              "correct permissions manually")
    collector = EventCollector()
    collector.handle(event("runner_on_ok", "gpu01", "Common | Map cluster members in /etc/hosts",
                           res={"changed": True, "warnings": [notice, "gpu02: left out"]}))
    assert collector.host_results()["gpu01"].warnings == ["Common | Map cluster members in /etc/hosts: gpu02: left out"]
