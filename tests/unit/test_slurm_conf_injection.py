"""No value can add a line, a key or a comment to slurm.conf or gres.conf:
the renderers refuse any value that is not one slurm.conf word (the second
line of defence behind the inventory check), and every value they accept
comes out inside exactly one line."""

from __future__ import annotations

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import slurm_conf
from ansible_collections.deepops.cluster.plugins.module_utils.slurm_conf import SlurmConfError
from hypothesis import given, settings
from hypothesis import strategies as st

ATTACKS = [
    "x\nAuthType=auth/none",
    "x\rAuthType=auth/none",
    "x AuthType=auth/none",
    "x\tAuthType=auth/none",
    "x #rest",
    "evil\nPartitionName=evil Nodes=ALL",
    "x\x00y",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_setting_value_cannot_break_out_of_its_line(attack):
    with pytest.raises(SlurmConfError, match="ClusterName"):
        slurm_conf.slurm_conf_lines({"ClusterName": attack})
    with pytest.raises(SlurmConfError):
        slurm_conf.slurm_conf_lines({"SlurmctldParameters": ["enable_configless", attack]})


@pytest.mark.parametrize("key", ["Auth Type", "x\nAuthType", "1Key", "Key=x", ""])
def test_a_setting_key_must_be_a_key(key):
    with pytest.raises(SlurmConfError, match="not a slurm.conf key"):
        slurm_conf.slurm_conf_lines({key: "x"})


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("field", ["name", "nodes", "max_time"])
def test_a_partition_field_cannot_break_out_of_its_line(attack, field):
    partition = {"name": "gpu", "nodes": "gpu01", field: attack}
    with pytest.raises(SlurmConfError):
        slurm_conf.slurm_partition_lines([partition])


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_partition_option_cannot_break_out_of_its_line(attack):
    with pytest.raises(SlurmConfError, match="partition gpu: AllowAccounts"):
        slurm_conf.slurm_partition_lines([{"name": "gpu", "options": {"AllowAccounts": attack}}])
    with pytest.raises(SlurmConfError, match="not a slurm.conf key"):
        slurm_conf.slurm_partition_lines([{"name": "gpu", "options": {attack: "x"}}])


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_gpu_type_cannot_break_out_of_its_line(attack):
    record = {"cpus": 8, "sockets": 1, "cores_per_socket": 8, "threads_per_core": 1, "real_memory": 1000,
              "gpus": [{"type": attack, "device": "/dev/nvidia0", "cores": None}]}
    with pytest.raises(SlurmConfError, match="GPU type"):
        slurm_conf.slurm_node_lines({"gpu01": record})
    with pytest.raises(SlurmConfError, match="GPU type"):
        slurm_conf.slurm_gres_lines({"gpu01": record})


def test_ordinary_values_still_render():
    assert slurm_conf.slurm_conf_lines({"ClusterName": "deepops", "SchedulerParameters": ["bf_continue", "bf_window=2880"],
                                        "Prolog": "/etc/slurm/prolog.d/*", "Unset": None, "Empty": ""}) == [
        "ClusterName=deepops", "SchedulerParameters=bf_continue,bf_window=2880", "Prolog=/etc/slurm/prolog.d/*"]


@settings(max_examples=300, deadline=None)
@given(value=st.text(), key=st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,12}", fullmatch=True))
def test_any_text_is_refused_or_stays_one_key_on_one_line(value, key):
    try:
        lines = slurm_conf.slurm_conf_lines({key: value})
    except SlurmConfError:
        return
    assert lines in ([], [f"{key}={value}"])
    for line in lines:
        assert len(line.splitlines()) == 1 and len(line.split()) == 1 and "#" not in line


@settings(max_examples=200, deadline=None)
@given(name=st.text(min_size=1), option=st.text())
def test_any_partition_text_is_refused_or_stays_one_line(name, option):
    try:
        lines = slurm_conf.slurm_partition_lines([{"name": name, "options": {"AllowQos": option}}])
    except SlurmConfError:
        return
    [line] = lines
    assert len(line.splitlines()) == 1 and "#" not in line
    assert [part.split("=", 1)[0] for part in line.split()] == ["PartitionName", "Nodes", "Default", "MaxTime", "State", "AllowQos"][
        : len(line.split())]
