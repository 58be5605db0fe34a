"""The accounting tree's difference logic (plugins/module_utils/slurm_accounting.py)
against sacctmgr output recorded on the virtual cluster, and its input checks
in the inventory check (issue 14: cluster users and accounts).

tests/support/sacctmgr/<image>/ holds the three reads the module makes
(``qos``, ``assoc``, ``user``), recorded on the controller ``fresh`` (after a
deploy with the default tree) and ``tree`` (after the module applied TREE
below): debian12 is Slurm 22.05, debian13 is 24.11 (SOURCES.md there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ansible_collections.deepops.cluster.plugins.module_utils import slurm_accounting as sa
from deepops_py.cli import main

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "tests" / "support" / "sacctmgr"
IMAGES = sorted(path.name for path in RECORDED.iterdir() if path.is_dir())
DEFAULTS = yaml.safe_load((REPO / "roles" / "slurm" / "defaults" / "main.yml").read_text())
CLUSTER = "deepops"

# What the recorded "tree" state was made from (the integration test declares the same).
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


def wanted(accounts=(), users=(), qos=None):
    return sa.wanted_tree(DEFAULTS["slurm_qos"] if qos is None else qos, accounts, users,
                          DEFAULTS["slurm_default_account"], DEFAULTS["slurm_default_qos"])


def recorded(image: str, state: str) -> tuple[str, str, str]:
    return tuple((RECORDED / image / f"{read}-{state}.txt").read_text() for read in ("qos", "assoc", "user"))


def changes(tree, shown, prune=False):
    return sa.changes(tree, CLUSTER, *shown, prune=prune)


def test_recordings_are_complete():
    assert "debian12" in IMAGES
    for image in IMAGES:
        assert sorted(path.name for path in (RECORDED / image).glob("*.txt")) == [
            f"{read}-{state}.txt" for read in ("assoc", "qos", "user") for state in ("fresh", "tree")
        ], image


@pytest.mark.parametrize("image", IMAGES)
def test_recorded_fresh_tree_parses(image):
    qos, assoc, user = recorded(image, "fresh")
    assert sa.parse_qos(qos) == {
        "high": {"priority": 1000, "preempt": ("low",), "preempt_mode": "cluster"},
        "normal": {"priority": 100, "preempt": (), "preempt_mode": "cluster"},
        "low": {"priority": 10, "preempt": (), "preempt_mode": "cluster"},
    }
    accounts, users = sa.parse_associations(assoc)
    assert set(accounts) == {"root", "users"}
    assert accounts["users"]["parent"] == "root" and accounts["users"]["qos"] == ("high", "low", "normal")
    assert accounts["users"]["default_qos"] == "normal" and accounts["users"]["fairshare"] == 1
    assert set(users) == {("root", "root")}
    assert users[("root", "root")]["qos"] == ("high", "low", "normal")
    assert sa.parse_default_accounts(user)["root"] == "root"


@pytest.mark.parametrize("image", IMAGES)
def test_default_tree_on_a_deployed_cluster_changes_nothing(image):
    assert changes(wanted(), recorded(image, "fresh"))["actions"] == []


@pytest.mark.parametrize("image", IMAGES)
def test_a_declared_tree_is_added_parents_first(image):
    found = changes(wanted(TREE["slurm_accounts"], TREE["slurm_account_users"]), recorded(image, "fresh"))
    assert [action["argv"] for action in found["actions"]] == [
        ["add", "account", "physics", "cluster=deepops", "parent=root", "fairshare=40", "qos=low,normal", "defaultqos=normal"],
        ["add", "account", "theory", "cluster=deepops", "parent=physics", "fairshare=10"],
        ["add", "user", "alice", "account=theory", "cluster=deepops", "defaultaccount=theory", "fairshare=5"],
        ["add", "user", "alice", "account=physics", "cluster=deepops", "fairshare=5"],
        ["add", "user", "bob", "account=users", "cluster=deepops", "defaultaccount=users", "fairshare=1"],
    ]
    assert found["undeclared"] == {"accounts": [], "users": []}


@pytest.mark.parametrize("image", IMAGES)
def test_the_applied_tree_as_slurm_shows_it_changes_nothing(image):
    """The commands above, run by the module on the virtual cluster, leave what it declares."""
    shown = recorded(image, "tree")
    accounts, users = sa.parse_associations(shown[1])
    assert accounts["theory"]["parent"] == "physics" and accounts["theory"]["fairshare"] == 10
    assert accounts["physics"]["fairshare"] == 40 and accounts["physics"]["qos"] == ("low", "normal")
    assert {key for key in users} == {("root", "root"), ("alice", "theory"), ("alice", "physics"), ("bob", "users")}
    assert users[("alice", "physics")]["fairshare"] == 5
    assert sa.parse_default_accounts(shown[2])["alice"] == "theory"
    assert changes(wanted(TREE["slurm_accounts"], TREE["slurm_account_users"]), shown)["actions"] == []


@pytest.mark.parametrize("image", IMAGES)
def test_an_edit_changes_only_what_differs(image):
    accounts = [dict(TREE["slurm_accounts"][0], fairshare=50), dict(TREE["slurm_accounts"][1], parent="root")]
    users = [dict(TREE["slurm_account_users"][0], default_account="physics"), {"name": "bob", "qos": ["low"]}]
    found = changes(wanted(accounts, users), recorded(image, "tree"))
    assert [action["change"] for action in found["actions"]] == [
        "set account physics: fairshare 40 -> 50",
        "set account theory: parent physics -> root",
        "set user alice: default account theory -> physics",
        "set user bob in account users: qos high,low,normal -> low",
    ]
    assert found["actions"][1]["argv"] == ["modify", "account", "where", "name=theory", "cluster=deepops", "set", "parent=root"]
    assert found["actions"][3]["argv"] == ["modify", "user", "where", "name=bob", "account=users", "cluster=deepops", "set", "qos=low"]


@pytest.mark.parametrize("image", IMAGES)
def test_what_is_no_longer_declared_is_reported_and_kept(image):
    users = [{"name": "alice", "accounts": ["physics"], "fairshare": 5}]
    found = changes(wanted(TREE["slurm_accounts"][:1], users), recorded(image, "tree"))
    assert [action["change"] for action in found["actions"]] == ["set user alice: default account theory -> physics"]
    assert found["undeclared"] == {"accounts": ["theory"], "users": ["alice@theory", "bob@users"]}


@pytest.mark.parametrize("image", IMAGES)
def test_prune_removes_users_then_accounts_children_first(image):
    found = changes(wanted(), recorded(image, "tree"), prune=True)
    assert [action["argv"] for action in found["actions"]] == [
        ["remove", "user", "where", "name=alice", "account=physics", "cluster=deepops"],
        ["remove", "user", "where", "name=alice", "account=theory", "cluster=deepops"],  # her default: last
        ["remove", "user", "where", "name=bob", "account=users", "cluster=deepops"],
        ["remove", "account", "where", "name=theory", "cluster=deepops"],
        ["remove", "account", "where", "name=physics", "cluster=deepops"],
    ]


QOS_SHOWN = "normal|100||cluster\nhigh|1000|low|cluster\nlow|10||cluster\n"


def test_a_moved_subtree_is_modified_top_down():
    """b was under a; now a is under b: b must move first or Slurm sees a cycle."""
    assoc = "\n".join([
        "root||||1|high,low,normal|", "a|||root|1|high,low,normal|", "b|||a|1|high,low,normal|",
        "users|||root|1|high,low,normal|normal", "root|root|||1|high,low,normal|normal",
    ])
    found = sa.changes(wanted([{"name": "a", "parent": "b"}, {"name": "b"}]), CLUSTER, QOS_SHOWN, assoc, "root|root\n")
    assert [action["change"] for action in found["actions"]] == ["set account b: parent a -> root", "set account a: parent root -> b"]


def test_new_qos_are_added_then_set():
    qos = [{"name": "gold", "priority": 500, "preempt": ["low"]}, {"name": "low", "priority": 10}]
    tree = sa.wanted_tree(qos, [], [], "users", "low")
    found = sa.changes(tree, CLUSTER, "low|10||cluster\n", "", "")
    assert [action["argv"] for action in found["actions"]][:2] == [
        ["add", "qos", "gold"],
        ["modify", "qos", "where", "name=gold", "set", "priority=500", "preempt=low", "preemptmode=cluster"],
    ]


@pytest.mark.parametrize(
    ("accounts", "users", "expected"),
    [
        ([{"name": "a", "parent": "nowhere"}], [], "account a: parent 'nowhere' is not a declared account (nor root)"),
        ([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}], [], "account a: its parents lead back to it (a cycle)"),
        ([{"name": "a", "qos": ["gold"]}], [], "account a: QOS 'gold' is not one of slurm_qos (high, low, normal)"),
        ([{"name": "a", "qos": ["low"], "default_qos": "high"}], [], "account a: default_qos 'high' is not one of its qos (low)"),
        ([{"name": "a", "fairshare": -3}], [], "account a: fairshare must be a whole number of at least 0 or 'parent'"),
        ([{"name": "a"}, {"name": "a"}], [], "account a: declared twice"),
        ([{"name": "root"}], [], "account root: is Slurm's own root"),
        ([{"name": "a"}], [{"name": "u", "accounts": ["a"], "default_account": "users"}],
         "user u: default_account 'users' is not one of its accounts (a)"),
        ([], [{"name": "u", "accounts": ["ghost"]}], "user u: account 'ghost' is not declared"),
        ([], [{"name": "root"}], "user root: is managed by deepops"),
    ],
)
def test_inconsistent_trees_are_refused(accounts, users, expected):
    with pytest.raises(sa.AccountingError) as error:
        wanted(accounts, users)
    assert any(problem.startswith(expected) for problem in error.value.problems), error.value.problems


class Sacctmgr:
    """Answers the three reads with recorded output (AFTER once something was written);
    records (and fails, if asked) the writes."""

    def __init__(self, shown, fail_on: str = "", after=None):
        self.shown, self.fail_on, self.after, self.calls = shown, fail_on, after, []

    def __call__(self, argv):
        self.calls.append(argv)
        if "show" in argv:
            wrote = any("--immediate" in call for call in self.calls)
            shown = self.after if wrote and self.after else self.shown
            return 0, shown[["qos", "association", "user"].index(argv[argv.index("show") + 1])], ""
        if self.fail_on and self.fail_on in argv:
            return 1, "", " Nothing added: bad\n"
        return 0, " Adding Account(s)\n", ""


@pytest.mark.parametrize("image", IMAGES)
def test_apply_then_reads_again_to_confirm(image):
    fake = Sacctmgr(recorded(image, "fresh"), after=recorded(image, "tree"))
    result = sa.apply(fake, "sacctmgr", CLUSTER, wanted(TREE["slurm_accounts"], TREE["slurm_account_users"]))
    writes = [call for call in fake.calls if "--immediate" in call]
    assert result["changed"] and len(writes) == 5 and len(fake.calls) == 3 + 5 + 3
    assert result["commands"][0][:4] == ["sacctmgr", "--immediate", "add", "account"]
    assert result["warnings"] == []


def test_a_change_sacctmgr_accepts_but_does_not_make_fails():
    """sacctmgr exits 0 when it refuses, e.g., a QOS list without the current default QOS."""
    fake = Sacctmgr(recorded("debian12", "tree"))
    accounts = [dict(TREE["slurm_accounts"][0], qos=["low"], default_qos=None), TREE["slurm_accounts"][1]]
    with pytest.raises(sa.AccountingError) as error:
        sa.apply(fake, "sacctmgr", CLUSTER, wanted(accounts, TREE["slurm_account_users"]))
    assert "sacctmgr accepted but slurmdbd does not show: set account physics: qos low,normal -> low" in str(error.value)
    assert error.value.applied == ["set account physics: qos low,normal -> low"]


@pytest.mark.parametrize("image", IMAGES)
def test_declared_qos_below_a_changed_account_is_set_again(image):
    """Slurm copies an account's new QOS list down to its associations."""
    users = [dict(TREE["slurm_account_users"][0], qos=["low", "normal"]), TREE["slurm_account_users"][1]]
    accounts = [dict(TREE["slurm_accounts"][0], qos=["normal", "low", "high"]), TREE["slurm_accounts"][1]]
    found = changes(wanted(accounts, users), recorded(image, "tree"))
    assert [action["change"] for action in found["actions"]] == [
        "set account physics: qos low,normal -> high,low,normal",
        "set user alice in account theory: QOS set again (Slurm copied an account's above it down)",
        "set user alice in account physics: QOS set again (Slurm copied an account's above it down)",
    ]
    assert found["actions"][1]["argv"][-1] == "qos=low,normal"


def test_check_mode_only_reads():
    fake = Sacctmgr(recorded("debian12", "fresh"))
    result = sa.apply(fake, "/usr/bin/sacctmgr", CLUSTER, wanted(TREE["slurm_accounts"]), check_mode=True)
    assert result["changed"] and result["changes"][0] == "add account physics under root"
    assert len(fake.calls) == 3 and all("show" in call for call in fake.calls)
    # The three reads run at once, so in any order.
    assert ["/usr/bin/sacctmgr", "--noheader", "--parsable2", "show", "association", "where",
            "cluster=deepops", sa.ASSOC_FORMAT] in fake.calls


def test_apply_runs_each_change_once_and_warns_about_undeclared():
    fake = Sacctmgr(recorded("debian12", "tree"))
    result = sa.apply(fake, "sacctmgr", CLUSTER, wanted(TREE["slurm_accounts"][:1]))
    assert not result["changed"] and len(fake.calls) == 3
    assert result["warnings"] == [
        "slurmdbd (cluster deepops) has accounts theory and user associations alice@physics, alice@theory, bob@users "
        "that the inventory does not declare; kept (slurm_accounts_prune: true removes them)"
    ]


def test_a_failing_write_names_what_was_applied():
    fake = Sacctmgr(recorded("debian12", "fresh"), fail_on="theory")
    with pytest.raises(sa.AccountingError) as error:
        sa.apply(fake, "sacctmgr", CLUSTER, wanted(TREE["slurm_accounts"]))
    assert error.value.applied == ["add account physics under root"]
    assert "add account theory under physics: sacctmgr add account theory" in str(error.value)
    assert "Nothing added: bad" in str(error.value)


# --------------------------------------------------------------------------
# the inventory check refuses the same, before any host is touched


def check(write_inventory, group_vars: str):
    base = write_inventory().read_text()
    path = write_inventory(base, files={"group_vars/all.yml": group_vars})
    return CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])


@pytest.mark.parametrize(
    ("group_vars", "expected"),
    [
        ("slurm_accounts: [{name: a, parent: b}]", "slurm_accounts: account a: parent 'b' is not a declared account"),
        ("slurm_accounts: [{name: a, parent: b}, {name: b, parent: a}]", "account a: its parents lead back to it (a cycle)"),
        ("slurm_accounts: [{name: a, qos: [gold]}]", "account a: QOS 'gold' is not one of slurm_qos"),
        ("slurm_accounts: [{name: a}]\nslurm_account_users: [{name: u, accounts: [a], default_account: users}]",
         "slurm_account_users: user u: default_account 'users' is not one of its accounts (a)"),
        ("slurm_account_users: [{name: u, accounts: [nope]}]", "user u: account 'nope' is not declared"),
        ("slurm_accounts: [{name: 'a;b'}]", "slurm_accounts: item 1: name 'a;b' is not a Slurm name"),
        ("slurm_accounts: [{name: a, fairshare: lots}]", "slurm_accounts: item 1: fairshare must be a whole number"),
        ("slurm_account_users: [{accounts: [users]}]", "slurm_account_users: item 1: needs a name"),
        ("slurm_accounts: [{name: a, fairshar: 3}]", "unknown key 'fairshar'"),
    ],
)
def test_bad_trees_are_exit_2(write_inventory, group_vars, expected):
    result = check(write_inventory, group_vars)
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split()), result.output


def test_a_good_tree_passes(write_inventory):
    result = check(write_inventory, yaml.safe_dump(TREE))
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------
# the re-run's shortcut: the controller's first read decides whether the module runs

def _reads(shown, rc=0):
    return {name: {"rc": rc, "stdout": text} for name, text in zip(
        ("accounting_qos", "accounting_associations", "accounting_users"), shown)}


def _settled(commands, accounts=(), users=(), prune=False):
    from ansible_collections.deepops.cluster.plugins.filter.slurm_accounting import slurm_accounting_settled

    return slurm_accounting_settled(commands, CLUSTER, DEFAULTS["slurm_qos"], list(accounts), list(users),
                                    DEFAULTS["slurm_default_account"], DEFAULTS["slurm_default_qos"], prune)


def test_reads_are_the_modules_own_commands():
    from ansible_collections.deepops.cluster.plugins.filter.slurm_accounting import slurm_accounting_reads

    reads = slurm_accounting_reads(CLUSTER)
    assert [read["argv"][1:] for read in reads] == sa.read_commands(CLUSTER)
    assert all(read["argv"][0] == "sacctmgr" and read["may_fail"] for read in reads)
    assert len({read["name"] for read in reads}) == 3


@pytest.mark.parametrize("image", IMAGES)
def test_settled_only_where_the_module_would_do_and_say_nothing(image):
    fresh, tree = recorded(image, "fresh"), recorded(image, "tree")
    assert _settled(_reads(fresh))
    assert _settled(_reads(tree), TREE["slurm_accounts"], TREE["slurm_account_users"])
    # Something to add: the module runs.
    assert not _settled(_reads(fresh), TREE["slurm_accounts"], TREE["slurm_account_users"])
    # Undeclared entries: kept and warned of (the module runs to say so), or pruned.
    assert not _settled(_reads(tree))
    assert not _settled(_reads(tree), prune=True)


@pytest.mark.parametrize("image", IMAGES)
def test_any_doubt_runs_the_module(image):
    fresh = recorded(image, "fresh")
    assert not _settled(_reads(fresh, rc=1))
    assert not _settled({k: v for k, v in _reads(fresh).items() if k != "accounting_users"})
    assert not _settled(None)
    # A declaration the module rejects (an unknown parent) is its to report.
    assert not _settled(_reads(fresh), [{"name": "theory", "parent": "nowhere"}])
