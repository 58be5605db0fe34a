"""Shared storage (shared_mounts): the declaration's checks, each host's plan, the
mount units, exports and drop-ins the roles write, the mounted-or-not check,
and the one host that makes each home on a shared /home. The virtual cluster
cannot run NFS (no NFS in the test machines' kernel), so what the roles write
for NFS is checked here, byte for byte where it matters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ansible_collections.deepops.cluster.plugins.filter import shared_mounts as filters
from ansible_collections.deepops.cluster.plugins.module_utils import cluster_users, shared_mounts
from deepops_py.cli import main

REPO = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((REPO / "roles/shared_mounts/defaults/main.yml").read_text())["shared_mounts"]
GROUPS = {"nfs_server": ["nfs01"], "slurm_compute": ["gpu01", "gpu02"]}


def by_path(plan):
    return {mount["path"]: mount for mount in plan}


# --------------------------------------------------------------------------
# the default and the plan


def test_default_is_home_and_the_software_tree_and_shares_nothing_without_a_server():
    assert DEFAULT == [{"path": "/home"}, {"path": "/sw", "modulefiles": "modulefiles"}]
    assert shared_mounts.plan(DEFAULT, [], "gpu01") == []
    assert filters.shared_mounts_plan(DEFAULT, {"slurm_compute": ["gpu01"]}, "gpu01") == []


def test_default_with_an_nfs_server_mounts_both_with_hpc_options():
    plan = by_path(shared_mounts.plan(DEFAULT, ["nfs01"], "gpu01"))
    assert list(plan) == ["/home", "/sw"]
    home = plan["/home"]
    assert home["source"] == "nfs01:/home" and home["fstype"] == "nfs" and home["mount"] and home["served"]
    assert home["unit"] == "home.mount" and home["writer"] == "nfs01"
    options = home["options"].split(",")
    for option in ("hard", "noatime", "vers=4.2", "rsize=1048576", "wsize=1048576", "_netdev"):
        assert option in options
    assert "soft" not in options
    assert plan["/sw"]["modulefiles"] == "/sw/modulefiles"


def test_the_server_mounts_nothing_it_serves_at_the_same_path_and_binds_another():
    entries = [{"path": "/home"}, {"path": "/sw", "export": "/export/sw", "modulefiles": "modulefiles"}]
    plan = by_path(shared_mounts.plan(entries, ["nfs01"], "nfs01"))
    assert not plan["/home"]["mount"]
    assert plan["/sw"]["mount"] and (plan["/sw"]["fstype"], plan["/sw"]["options"], plan["/sw"]["source"]) == (
        "none", "bind", "/export/sw")
    assert shared_mounts.export_directories(list(plan.values()), "nfs01") == [
        {"path": "/export/sw", "state": "directory"}, {"path": "/export/sw/modulefiles", "state": "directory"},
        {"path": "/home", "state": "directory"}]
    assert shared_mounts.export_directories(list(plan.values()), "gpu01") == []


def test_a_site_nfs_server_is_mounted_not_served_and_site_mounts_are_only_checked():
    entries = [{"path": "/data", "server": "nas.example.org", "export": "/vol/data", "options": ["ro", "hard"]},
               {"path": "/lustre", "managed": False, "fstype": "lustre"}, {"path": "/gpfs", "managed": False}]
    plan = by_path(shared_mounts.plan(entries, [], "gpu01"))
    data = plan["/data"]
    assert (data["source"], data["options"], data["served"], data["mount"], data["writer"]) == (
        "nas.example.org:/vol/data", "ro,hard", False, True, None)
    assert not plan["/lustre"]["mount"] and plan["/lustre"]["fstype"] == "lustre" and plan["/lustre"]["source"] == ""
    assert plan["/gpfs"]["fstype"] == ""
    assert shared_mounts.unit_files(list(plan.values())) == [
        {"path": "/etc/systemd/system/data.mount", "content": shared_mounts.mount_unit(data)}]


def test_an_ipv6_server_is_bracketed():
    [mount] = shared_mounts.plan([{"path": "/home", "server": "fd00::5"}], [], "gpu01")
    assert mount["source"] == "[fd00::5]:/home"


def test_the_plan_filter_refuses_a_bad_list():
    with pytest.raises(Exception, match="item 1: needs a path"):
        filters.shared_mounts_plan([{"server": "x"}], GROUPS, "gpu01")


# --------------------------------------------------------------------------
# what the roles write


def test_mount_unit_text():
    [home, _] = shared_mounts.plan(DEFAULT, ["nfs01"], "gpu01")
    assert shared_mounts.mount_unit(home) == (
        "# Managed by deepops (shared_mounts): edits are overwritten.\n"
        "[Unit]\n"
        "Description=Shared file system /home (nfs01:/home)\n"
        "Documentation=man:systemd.mount(5)\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Mount]\n"
        "What=nfs01:/home\n"
        "Where=/home\n"
        "Type=nfs\n"
        "Options=rw,hard,noatime,vers=4.2,rsize=1048576,wsize=1048576,timeo=600,retrans=2,_netdev\n"
        "TimeoutSec=90\n"
        "\n"
        "[Install]\n"
        "WantedBy=remote-fs.target\n"
    )


@pytest.mark.parametrize(
    ("path", "unit"),
    [("/home", "home.mount"), ("/sw", "sw.mount"), ("/opt/deepops/shared", "opt-deepops-shared.mount"),
     ("/mnt/my-data", "mnt-my\\x2ddata.mount"), ("/srv/a+b", "srv-a\\x2bb.mount"), ("/", "-.mount")],
)
def test_mount_unit_names_are_systemd_escape_paths(path, unit):
    assert shared_mounts.mount_unit_name(path) == unit


def test_exports_name_every_client_with_the_export_options():
    entries = [{"path": "/home"}, {"path": "/sw", "export_options": ["ro", "no_subtree_check"]},
               {"path": "/data", "server": "nas"}]
    plan = shared_mounts.plan(entries, ["nfs01"], "nfs01")
    assert shared_mounts.exports(plan, "nfs01", ["gpu01", "10.0.0.0/16"]) == (
        "# Managed by deepops (shared_mounts, nfs_server): edits are overwritten.\n"
        "/home gpu01(rw,sync,no_subtree_check,root_squash) 10.0.0.0/16(rw,sync,no_subtree_check,root_squash)\n"
        "/sw gpu01(ro,no_subtree_check) 10.0.0.0/16(ro,no_subtree_check)\n"
    )
    with pytest.raises(Exception, match="no NFS clients"):
        filters.shared_mounts_exports(plan, "nfs01", [])


def test_slurm_drop_ins_require_every_mount_and_go_when_there_are_none():
    plan = shared_mounts.plan([{"path": "/home"}, {"path": "/lustre", "managed": False}], ["nfs01"], "gpu01")
    files = shared_mounts.dropin_files(plan, ["slurmd.service"])
    assert files[0] == {"path": "/etc/systemd/system/slurmd.service.d", "state": "directory"}
    assert files[1]["path"] == "/etc/systemd/system/slurmd.service.d/deepops-shared-mounts.conf"
    assert "[Unit]\nRequiresMountsFor=/home /lustre\n" in files[1]["content"]
    assert shared_mounts.dropin_files([], ["slurmd.service", "sackd.service"]) == [
        {"path": "/etc/systemd/system/slurmd.service.d/deepops-shared-mounts.conf", "state": "absent"},
        {"path": "/etc/systemd/system/sackd.service.d/deepops-shared-mounts.conf", "state": "absent"},
    ]


def test_unit_states_start_what_is_not_mounted_and_enabled():
    plan = shared_mounts.plan(DEFAULT, ["nfs01"], "gpu01")
    shown = {"stdout": "Id=home.mount\nActiveState=active\nSubState=mounted\nUnitFileState=enabled\n\n"
                       "Id=sw.mount\nActiveState=inactive\nSubState=dead\nUnitFileState=\n", "rc": 0}
    assert filters.shared_mounts_unit_states(plan, shown) == {"start": ["sw.mount"], "active": ["home.mount"]}
    assert filters.shared_mounts_unit_states(plan, {"skipped": True}) == {"start": ["home.mount", "sw.mount"], "active": []}


# --------------------------------------------------------------------------
# mounted or not (findmnt --json --list --output TARGET,SOURCE,FSTYPE)


def _findmnt(*rows):
    return json.dumps({"filesystems": [dict(zip(("target", "source", "fstype"), row)) for row in rows]})


def test_a_missing_site_mount_is_named_with_the_host():
    plan = shared_mounts.plan([{"path": "/home", "managed": False}, {"path": "/lustre", "managed": False, "fstype": "lustre"}],
                              [], "gpu01")
    table = _findmnt(("/", "/dev/sda1", "ext4"), ("/home", "/dev/sdb1", "xfs"))
    assert shared_mounts.mount_problems("gpu01", plan, table) == [
        "gpu01: /lustre is not mounted (site-managed: deepops does not mount it; "
        "mount it on the node, or remove it from shared_mounts)"]
    wrong = _findmnt(("/home", "h", "xfs"), ("/lustre", "/dev/sdc", "ext4"))
    assert shared_mounts.mount_problems("gpu01", plan, wrong) == [
        "gpu01: /lustre is mounted as ext4 from /dev/sdc, expected lustre (site-managed: deepops does not mount it; "
        "mount it on the node, or remove it from shared_mounts)"]
    assert shared_mounts.mount_problems("gpu01", plan, "not json")[0].startswith("gpu01: cannot read")


def test_nfs4_satisfies_nfs_and_the_server_is_not_checked_for_its_own_exports():
    client = shared_mounts.plan(DEFAULT, ["nfs01"], "gpu01")
    assert shared_mounts.mount_problems("gpu01", client, _findmnt(("/home", "nfs01:/home", "nfs4"),
                                                                  ("/sw", "nfs01:/sw", "nfs4"))) == []
    server = shared_mounts.plan(DEFAULT, ["nfs01"], "nfs01")
    assert shared_mounts.mount_problems("nfs01", server, _findmnt(("/", "/dev/sda1", "ext4"))) == []


# --------------------------------------------------------------------------
# homes on a shared /home: made by one host


def test_homes_are_made_by_the_nfs_server_or_else_the_first_host_of_the_run():
    entries = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "home": "/local/bob"}]
    hosts = ["ctl01", "gpu01", "nfs01"]
    served = shared_mounts.plan(DEFAULT, ["nfs01"], "gpu01")
    assert cluster_users.homes_written_here(entries, "/home", served, hosts, "nfs01") == ["alice", "bob"]
    assert cluster_users.homes_written_here(entries, "/home", served, hosts, "gpu01") == ["bob"]
    site = shared_mounts.plan([{"path": "/home", "managed": False}], [], "gpu01")
    assert cluster_users.homes_written_here(entries, "/home", site, hosts, "ctl01") == ["alice", "bob"]
    assert cluster_users.homes_written_here(entries, "/home", site, hosts, "gpu01") == ["bob"]
    assert cluster_users.homes_written_here(entries, "/home", [], hosts, "gpu01") == ["alice", "bob"]


def test_the_longest_covering_mount_decides():
    plan = shared_mounts.plan([{"path": "/home", "managed": False}, {"path": "/home/projects", "server": "nfs01"}],
                              ["nfs01"], "gpu01")
    assert shared_mounts.writes_path(plan, "/home/projects/x", ["ctl01", "gpu01"], "nfs01")
    assert not shared_mounts.writes_path(plan, "/home/projects/x", ["ctl01", "gpu01"], "ctl01")
    assert shared_mounts.writes_path(plan, "/home/alice", ["ctl01", "gpu01"], "ctl01")
    assert shared_mounts.writes_path(plan, "/homework/alice", ["ctl01"], "gpu01")  # not under /home


# --------------------------------------------------------------------------
# the inventory check (deepops check: exit 2, nothing touched)


def check(write_inventory, group_vars: str, more_hosts: str = ""):
    base = write_inventory().read_text()
    path = write_inventory(base + more_hosts, files={"group_vars/all.yml": group_vars})
    return CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])


NFS_SERVER = "    nfs_server:\n      hosts:\n        nfs01:\n"


@pytest.mark.parametrize(
    ("group_vars", "more_hosts", "expected"),
    [
        ("shared_mounts: [{path: /home/}]", "", "shared_mounts: item 1 (/home/): path '/home/' is not an absolute path"),
        ("shared_mounts: [{path: home}]", "", "path 'home' is not an absolute path"),
        ("shared_mounts: [{path: /usr/local, managed: false}]", "", "/usr/local is a system directory"),
        ("shared_mounts: [{path: /, managed: false}]", "", "/ is a system directory"),
        ("shared_mounts: [{path: /a, managed: false}, {path: /a, managed: false}]", "", "item 2 (/a): path /a is already item 1 (/a)'s"),
        ("shared_mounts: [{path: /s, fstype: lustre}]", NFS_SERVER, "fstype lustre: deepops mounts NFS only; set managed: false"),
        ("shared_mounts: [{path: /s, managed: false, fstype: 'lu stre'}]", "", "is not a file system type"),
        ("shared_mounts: [{path: /s, options: ['rw,hard']}]", NFS_SERVER, "options item 1 'rw,hard' is not one mount option"),
        ("shared_mounts: [{path: /s, export: 'x y'}]", NFS_SERVER, "export 'x y' is not an absolute path"),
        ("shared_mounts: [{path: /s, server: 'a b'}]", "", "server 'a b' is not a host name or an IP address"),
        ("shared_mounts: [{path: /s, modulefiles: ../x}]", NFS_SERVER, "modulefiles '../x' is not a directory relative"),
        ("shared_mounts: [{path: /s, mountpoint: /x}]", NFS_SERVER, "unknown key 'mountpoint'"),
        ("shared_mounts: [{path: /s, managed: 'no'}]", NFS_SERVER, "managed: expected bool"),
        ("shared_mounts: [{server: nas}]", "", "missing required key 'path'"),
        ("shared_mounts: /home", "", "shared_mounts: expected list"),
        ("shared_mounts: [{path: /data}]", "", "item 1 (/data): no server, and the group nfs_server has no host"),
        ("shared_mounts: [{path: /data, server: gpu01}]", "", "server gpu01 is a host of this inventory but not in nfs_server"),
        ("nfs_server_clients: ['10.0.0.0/16(rw)']", NFS_SERVER, "nfs_server_clients: item 1: '10.0.0.0/16(rw)' is not an exports(5) client"),
        ("nfs_server_threads: 0", NFS_SERVER, "nfs_server_threads: must be at least 1"),
        ("nfs_client_lmod_modulespath_file: etc/lmod", "", "nfs_client_lmod_modulespath_file: 'etc/lmod' is not an absolute path"),
    ],
)
def test_bad_shared_mounts_are_exit_2(write_inventory, group_vars, more_hosts, expected):
    result = check(write_inventory, group_vars, more_hosts)
    assert result.exit_code == 2, result.output
    assert expected in result.output


@pytest.mark.parametrize(
    ("group_vars", "more_hosts"),
    [
        ("shared_mounts: [{path: /home}, {path: /sw, modulefiles: modulefiles}]", NFS_SERVER),
        ("shared_mounts: [{path: /home, server: nas.example.org, export: /vol/home, options: [rw, hard, vers=4.1]}]", ""),
        ("shared_mounts: [{path: /lustre, managed: false, fstype: lustre}, {path: /apps, managed: false, modulefiles: modules/all}]", ""),
        ("shared_mounts: []", ""),
        ("nfs_client_lmod_enabled: false\nnfs_server_threads: 64\nnfs_server_clients: [10.0.0.0/16, '*.cluster.example']", NFS_SERVER),
        ("slurm_node_features: [ib]", ""),  # the default shared_mounts, no nfs_server host: nothing shared, no error
    ],
)
def test_good_shared_mounts_pass(write_inventory, group_vars, more_hosts):
    result = check(write_inventory, group_vars, more_hosts)
    assert result.exit_code == 0, result.output


def test_nfs_server_is_a_deepops_group(write_inventory):
    # A host only in nfs_server is a cluster member (a dedicated storage host), not "in no deepops group".
    result = check(write_inventory, "shared_mounts: [{path: /home}]", NFS_SERVER)
    assert result.exit_code == 0, result.output


def test_the_role_finds_the_units_it_wrote_by_their_first_line():
    role_vars = yaml.safe_load((REPO / "roles/nfs_client/vars/main.yml").read_text())
    [home, _] = shared_mounts.plan(DEFAULT, ["nfs01"], "gpu01")
    assert role_vars["_nfs_client_unit_marker"] in shared_mounts.mount_unit(home).splitlines()[0]
