"""The foundation on a real 3-node virtual cluster: check, plan, deploy, re-run,
and a host that dies in the middle of a deploy.

Tests run in file order and build on each other's cluster state (one cluster
per session keeps the suite inside CI's time budget).
"""

from __future__ import annotations

import json
import subprocess
import time

from run_events import task_statuses

WARN_TASK = "Common | Warn about members without an address"
# Files the common role manages; plan must leave every one untouched.
MANAGED_FILES = [
    "/etc/hosts",
    "/etc/apt/apt.conf.d/01deepops-proxy",
    "/etc/chrony/chrony.conf",
    "/etc/timezone",
]


def managed_state(cluster, host: str) -> str:
    """Checksums of the managed files plus the installed package set."""
    files = " ".join(MANAGED_FILES)
    command = f"for f in {files}; do if [ -e $f ]; then sha256sum $f; else echo absent $f; fi; done; dpkg-query -W | sha256sum"
    return cluster.ssh(host, command).stdout


def host_rows(result) -> dict[str, dict]:
    return result.json()["hosts"]


def _ran_on(result, task: str) -> list[str]:
    """The hosts where TASK ran (not skipped, not failed) in a run."""
    return sorted(host for host, statuses in task_statuses(result.json(), task).items() if "ok" in statuses)


def test_check_passes_on_every_host(cluster):
    result = cluster.deepops("check", "--json")
    assert result.rc == 0, result.stderr
    rows = result.json()
    hosts = {row["host"]: row for row in rows["hosts"]} if isinstance(rows, dict) else {row["host"]: row for row in rows}
    assert sorted(hosts) == cluster.hosts
    assert all(row["ok"] for row in hosts.values())
    assert "Using inventory" in result.stderr and "virtual" in result.stderr


def test_plan_on_fresh_cluster_reports_changes_and_changes_nothing(cluster):
    before = {host: managed_state(cluster, host) for host in cluster.hosts}
    result = cluster.deepops("plan", "--json")
    assert result.rc == 0, result.stderr
    planned = host_rows(result)
    for host in cluster.hosts:
        assert planned[host]["changed"] > 0, f"plan should list work for fresh host {host}"
        assert planned[host]["changed_tasks"], planned[host]
    after = {host: managed_state(cluster, host) for host in cluster.hosts}
    assert after == before


def test_deploy_converges_and_second_run_changes_nothing(cluster):
    first = cluster.deepops("deploy", "--json")
    assert first.rc == 0, first.stdout + first.stderr
    assert all(row["failed"] == 0 and row["unreachable"] == 0 for row in host_rows(first).values())
    # Restarted for their new arguments, Prometheus and Alertmanager read their new configuration
    # then: no reload (SIGHUP) follows while they start.
    for label, name in (("Prometheus", "prometheus"), ("Alertmanager", "alertmanager")):
        assert _ran_on(first, f"{label} | Restart {name}"), f"the fresh deploy restarted no {name}"
        assert _ran_on(first, f"{label} | Reload {name}") == []

    second = cluster.deepops("deploy", "--json")
    assert second.rc == 0, second.stderr
    rows = host_rows(second)
    assert sorted(rows) == cluster.hosts
    assert {host: row["changed"] for host, row in rows.items()} == {host: 0 for host in cluster.hosts}


def test_deploy_did_real_work(cluster):
    hosts_file = cluster.ssh("ctl01", "cat /etc/hosts").stdout
    for host in cluster.hosts:
        assert host in hosts_file
    assert cluster.ssh("gpu01", "getent hosts ctl01").returncode == 0
    assert cluster.ssh("gpu01", "dpkg-query -W -f='${Status}' chrony").stdout.endswith("installed")
    proxy = cluster.ssh("gpu01", "cat /etc/apt/apt.conf.d/01deepops-proxy").stdout
    assert "Acquire::http::Proxy" in proxy


def test_apt_cache_serves_one_index_file_to_many_nodes_at_once(cluster):
    # As the nodes' first list refresh of a deploy asks for it: the same
    # InRelease, at the same moment, with apt's "Cache-Control: max-age=0".
    # apt-cacher-ng's freeze detection answered about a third of these 503.
    # After the deploy: it installs curl (common_base_packages).
    host = cluster.computes[0]
    proxy = cluster.hostvars()[host]["common_apt_proxy"]
    command = (
        "read -r _ url suite _ < <(grep -m1 '^deb ' /etc/apt/sources.list);"
        " for i in $(seq 20); do curl -s -m 60 -o /dev/null -w '%{http_code}\\n' -H 'Cache-Control: max-age=0'"
        f" -x {proxy} \"$url/dists/$suite/InRelease\" & done; wait"
    )
    result = cluster.ssh(host, command)
    assert result.stdout.split() == ["200"] * 20, result.stdout + result.stderr


def test_plan_after_deploy_changes_nothing(cluster):
    before = {host: managed_state(cluster, host) for host in cluster.hosts}
    result = cluster.deepops("plan", "--json")
    assert result.rc == 0, result.stderr
    assert all(row["changed"] == 0 for row in host_rows(result).values())
    assert {host: managed_state(cluster, host) for host in cluster.hosts} == before


def test_runs_lists_the_deploys(cluster):
    listing = cluster.deepops("runs", "--json")
    assert listing.rc == 0
    commands = [record["command"] for record in listing.json()]
    assert commands.count("deploy") >= 2 and "plan" in commands
    newest = listing.json()[0]["id"]
    shown = cluster.deepops("runs", "show", newest)
    assert shown.rc == 0 and "ctl01" in shown.stdout


def test_a_member_down_for_a_whole_run_keeps_its_address_in_the_others_etc_hosts(cluster):
    """Not reached at all (no facts): the others keep the line their block had for it, so slurmctld
    can reach its slurmd when it is back, instead of every host dropping it until the next run."""
    victim = "gpu02"
    line = next(line for line in cluster.ssh("ctl01", "cat /etc/hosts").stdout.splitlines()
                if line.endswith(f" {victim}"))
    subprocess.run(["docker", "stop", "-t", "0", cluster.container(victim)], check=True, capture_output=True)
    try:
        result = cluster.deepops("deploy", "--tags", "common_hosts", "--json")
        assert result.rc != 0 and host_rows(result)[victim]["unreachable"] > 0, result.stderr
        for host in cluster.hosts:
            if host != victim:
                assert host_rows(result)[host]["changed"] == 0, (host, host_rows(result)[host])
                assert line in cluster.ssh(host, "cat /etc/hosts").stdout.splitlines(), host
        # the user is told, once (on the play's first host), in the run's result
        warned = [warning for row in host_rows(result).values() for warning in row["warnings"]
                  if warning.startswith(WARN_TASK)]
        assert warned == [f"{WARN_TASK}: {victim}: not reachable in this run and no common_hosts_address;"
                          " /etc/hosts keeps the address its block gave them"]
    finally:
        cluster.deepops("virtual", "up", check=True)  # starts the stopped container again


def test_stopped_host_fails_alone_and_rerun_converges(cluster):
    victim = "gpu02"
    container = cluster.container(victim)
    deploy = cluster.popen("deploy", "--json")
    time.sleep(4)  # let the run start: validation and the first connections
    subprocess.run(["docker", "stop", "-t", "0", container], check=True, capture_output=True)
    stdout, stderr = deploy.communicate(timeout=1800)
    assert deploy.returncode != 0, stderr
    rows = json.loads(stdout)["hosts"]
    assert rows[victim]["unreachable"] > 0 or rows[victim]["failed"] > 0
    for host in cluster.hosts:
        if host != victim:
            assert rows[host]["failed"] == 0 and rows[host]["unreachable"] == 0, (host, rows[host])

    # the human summary names the host too
    summary = cluster.deepops("runs", "show", json.loads(stdout)["run_id"])
    assert victim in summary.stdout

    cluster.deepops("virtual", "up", check=True)  # starts the stopped container again
    rerun = cluster.deepops("deploy", "--json")
    assert rerun.rc == 0, rerun.stdout + rerun.stderr
    again = cluster.deepops("deploy", "--json")
    assert again.rc == 0
    assert all(row["changed"] == 0 for row in host_rows(again).values())
