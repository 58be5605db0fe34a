"""The accounting tree from the inventory (issue 14): accounts, parents,
fair-share, QOS and users' associations in slurmdbd, through sacctmgr's own
view; a re-run changes nothing; plan reports an edit and changes nothing;
prune takes the tree out again, so later modules find the cluster as before.

Runs only the accounting task (--tags slurm_accounting) on the session's
deployed cluster, with the tree passed as -e: four short runs.
"""

from __future__ import annotations

import yaml
from run_events import task_statuses

CONTROLLER = "ctl01"
TASK = "Slurm | QOS, accounts and users in accounting"
TREE = {
    "slurm_accounts": [
        {"name": "physics", "fairshare": 40, "qos": ["normal", "low"], "default_qos": "normal"},
        {"name": "theory", "parent": "physics", "fairshare": 10},
    ],
    "slurm_account_users": [
        {"name": "alice", "accounts": ["theory", "physics"], "default_account": "theory", "fairshare": 5},
        {"name": "bob"},
    ],
}


def _associations(cluster) -> dict[tuple[str, str], dict[str, str]]:
    out = cluster.ssh(CONTROLLER, "sacctmgr --noheader --parsable2 show association where cluster=deepops "
                                  "format=account,user,parentname,share,qos,defaultqos").stdout
    found = {}
    for line in out.splitlines():
        account, user, parent, share, qos, default_qos = line.split("|")
        found[(account, user)] = {"parent": parent, "share": share, "qos": ",".join(sorted(qos.split(","))),
                                  "default_qos": default_qos}
    return found


def _default_account(cluster, user: str) -> str:
    return cluster.ssh(CONTROLLER, f"sacctmgr --noheader --parsable2 show user {user} format=defaultaccount").stdout.strip()


def _run(cluster, command: str, tree: dict, tmp_path, *extra: str) -> dict:
    path = tmp_path / f"tree-{len(list(tmp_path.iterdir()))}.yml"
    path.write_text(yaml.safe_dump(tree))
    result = cluster.deepops(command, "--json", "--tags", "slurm_accounting", "-e", f"@{path}", *extra, timeout=900)
    assert result.rc == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.json()["hosts"]


def test_tree_is_applied_kept_planned_and_pruned(cluster, tmp_path):
    cluster.ensure_deployed()

    rows = _run(cluster, "deploy", TREE, tmp_path)
    assert TASK in rows[CONTROLLER]["changed_tasks"], rows[CONTROLLER]
    tree = _associations(cluster)
    assert tree[("physics", "")] == {"parent": "root", "share": "40", "qos": "low,normal", "default_qos": "normal"}
    assert tree[("theory", "")]["parent"] == "physics" and tree[("theory", "")]["share"] == "10"
    assert tree[("theory", "alice")]["share"] == "5" and tree[("physics", "alice")]["share"] == "5"
    assert ("users", "bob") in tree and _default_account(cluster, "alice") == "theory"

    again = _run(cluster, "deploy", TREE, tmp_path)
    assert {host: row["changed"] for host, row in again.items()} == {host: 0 for host in again}

    edited = {
        "slurm_accounts": [dict(TREE["slurm_accounts"][0], fairshare=60), TREE["slurm_accounts"][1]],
        "slurm_account_users": [dict(TREE["slurm_account_users"][0], accounts=["theory"]), TREE["slurm_account_users"][1]],
    }
    planned = _run(cluster, "plan", edited, tmp_path)
    assert TASK in planned[CONTROLLER]["changed_tasks"], planned[CONTROLLER]
    assert any("alice@physics" in warning and "does not declare" in warning for warning in planned[CONTROLLER]["warnings"])
    assert _associations(cluster) == tree

    # Prune with the default (empty) tree: back to the session cluster as it was.
    _run(cluster, "deploy", {"slurm_accounts_prune": True}, tmp_path)
    left = _associations(cluster)
    assert sorted(left) == [("root", ""), ("root", "root"), ("users", "")], left


def test_a_deploy_puts_back_a_drifted_tree_and_a_rerun_skips_the_module(cluster):
    """The full deploy (not --tags) decides from the controller's first read:
    drift in slurmdbd is found and undone; on the re-run the tree read at the
    start is as declared and the module does not run."""
    cluster.ensure_deployed()
    cluster.ssh(CONTROLLER, "sacctmgr --immediate modify account users set fairshare=7", check=True)

    first = cluster.deepops("deploy", "--json")
    assert first.rc == 0, first.stdout[-4000:] + first.stderr[-4000:]
    assert TASK in first.json()["hosts"][CONTROLLER]["changed_tasks"]
    assert _associations(cluster)[("users", "")]["share"] == "1"

    again = cluster.deepops("deploy", "--json")
    assert again.rc == 0, again.stdout[-4000:] + again.stderr[-4000:]
    assert task_statuses(again.json(), TASK).get(CONTROLLER) == ["skipped"]
