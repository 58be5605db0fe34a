"""Slurm-style hostlist helpers and the filter plugin that exposes them.

Covers plugins/module_utils/hostlist.py and plugins/filter/hostlist.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter import hostlist as filters
from ansible_collections.deepops.cluster.plugins.module_utils import hostlist as hl
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]




@pytest.mark.parametrize(
    ("hosts", "expected"),
    [
        (["gpu01", "gpu02", "gpu03", "gpu05", "cpu1"], "cpu1,gpu[01-03,05]"),
        (["gpu03", "gpu01", "gpu02", "gpu01"], "gpu[01-03]"),  # sorted, duplicates dropped
        (["gpu01"], "gpu01"),
        (["login"], "login"),
        (["gpu9", "gpu10"], "gpu[9-10]"),  # unpadded: Slurm joins them
        (["gpu09", "gpu10"], "gpu[09-10]"),
        (["gpu9", "gpu010"], "gpu[9,010]"),  # widths that change the text stay apart
        (["gpu99", "gpu100"], "gpu[99-100]"),
        (["gpu1", "gpu01", "gpu2", "gpu02"], "gpu[1-2,01-02]"),
        (["gpu", "gpu1", "gpu2"], "gpu,gpu[1-2]"),
        (["dgx-a100-01", "dgx-a100-02", "dgx-h100-01"], "dgx-a100-[01-02],dgx-h100-01"),
        (["node1-ib", "node2-ib"], "node1-ib,node2-ib"),  # only trailing digits count
        (["n0", "n1", "n2", "n4", "n6", "n7"], "n[0-2,4,6-7]"),
        ([], ""),
    ],
)
def test_compress(hosts, expected):
    assert hl.hostlist_compress(hosts) == expected


def test_compress_is_order_independent():
    hosts = ["b2", "a10", "b1", "a9", "c"]
    assert (
        hl.hostlist_compress(hosts)
        == hl.hostlist_compress(list(reversed(hosts)))
        == "a[9-10],b[1-2],c"
    )


def test_compress_accepts_a_ranged_string():
    assert hl.hostlist_compress("gpu[03-04],gpu01,gpu02") == "gpu[01-04]"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("gpu[01-03,05],cpu1", ["gpu01", "gpu02", "gpu03", "gpu05", "cpu1"]),
        ("gpu[9-10]", ["gpu9", "gpu10"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("gpu[99-100]", ["gpu99", "gpu100"]),
        ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
        ("a1 a2,,a3", ["a1", "a2", "a3"]),
        ("login", ["login"]),
        ("", []),
    ],
)
def test_expand(expression, expected):
    assert hl.hostlist_expand(expression) == expected


def test_expand_a_list():
    assert hl.hostlist_expand(["a[1-2]", "b"]) == ["a1", "a2", "b"]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("gpu[1-", "unbalanced '\\['"),
        ("gpu]", "unbalanced '\\]'"),
        ("gpu[x]", "bad range"),
        ("gpu[]", "bad range"),
        ("gpu[3-1]", "runs backwards"),
        ("gpu[[1]]", "nested"),
        ("gpu[0-99999999]", "more than"),
    ],
)
def test_expand_rejects_bad_expressions(expression, message):
    with pytest.raises(hl.HostlistError, match=message):
        hl.hostlist_expand(expression)


@pytest.mark.parametrize("name", ["", "gpu 1", "gpu[1]"])
def test_compress_rejects_bad_names(name):
    with pytest.raises(hl.HostlistError):
        hl.hostlist_compress([name])


def test_ten_thousand_nodes_round_trip():
    names = [f"gpu{i:05d}" for i in range(10_000) if i % 7] + [f"cpu{i}" for i in range(1, 3000)]
    compressed = hl.hostlist_compress(names)
    assert compressed.startswith("cpu[1-2999],gpu[00001-00006,00008-00013,")
    expanded = hl.hostlist_expand(compressed)
    assert sorted(expanded) == sorted(names)
    assert len(expanded) == len(set(expanded))


host_names = st.builds(
    lambda prefix, number, pad: (
        f"{prefix}{str(number).zfill(pad)}" if number is not None else prefix or "h"
    ),
    st.sampled_from(["gpu", "cpu", "dgx-a100-", "n", "rack1-node", ""]),
    st.one_of(st.none(), st.integers(min_value=0, max_value=1200)),
    st.integers(min_value=0, max_value=5),
)


@given(st.lists(host_names, max_size=80))
def test_round_trip_property(names):
    compressed = hl.hostlist_compress(names)
    expanded = hl.hostlist_expand(compressed)
    assert sorted(expanded) == sorted(set(names))
    assert (
        hl.hostlist_compress(expanded) == compressed
    )  # canonical: compressing again changes nothing


def test_group_hosts_with_identical_attributes():
    mapping = {
        "gpu01": {"gres": "gpu:h100:8", "cpus": 224},
        "gpu02": {"cpus": 224, "gres": "gpu:h100:8"},  # same content, other key order
        "gpu03": {"gres": "gpu:h100:8", "cpus": 224},
        "gpu04": {"gres": "gpu:l40s:4", "cpus": 64},
        "cpu1": {"gres": None, "cpus": 64},
    }
    assert hl.hostlist_group(mapping) == [
        ("cpu1", {"gres": None, "cpus": 64}),
        ("gpu04", {"gres": "gpu:l40s:4", "cpus": 64}),
        ("gpu[01-03]", {"gres": "gpu:h100:8", "cpus": 224}),
    ]


def test_filter_plugin_exposes_the_three_filters():
    found = filters.FilterModule().filters()
    assert sorted(found) == ["hostlist_compress", "hostlist_expand", "hostlist_group"]
    assert found["hostlist_compress"](["gpu02", "gpu01"]) == "gpu[01-02]"
    assert found["hostlist_group"]({"a1": 1, "a2": 1}) == [["a[1-2]", 1]]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("hostlist_expand", "gpu[1-"),
        ("hostlist_compress", ["bad name"]),
        ("hostlist_group", ["not", "a", "dict"]),
    ],
)
def test_filter_errors_are_ansible_filter_errors(name, value):
    with pytest.raises(AnsibleFilterError, match=name):
        filters.FilterModule().filters()[name](value)


def test_filters_in_a_playbook(tmp_path):
    out = tmp_path / "out.json"
    (tmp_path / "play.yml").write_text(
        f"""\
- name: Use the hostlist filters
  hosts: localhost
  gather_facts: false
  vars:
    nodes: {{gpu01: h100, gpu02: h100, gpu03: l40s, cpu1: none}}
  tasks:
    - name: Save the filter results
      ansible.builtin.copy:
        dest: "{out}"
        mode: "0644"
        content: >-
          {{{{ {{'compressed': nodes.keys() | deepops.cluster.hostlist_compress,
                'expanded': 'gpu[01-02],cpu1' | deepops.cluster.hostlist_expand,
                'groups': nodes | deepops.cluster.hostlist_group}} | to_json }}}}
"""
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
    }
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", "play.yml"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(out.read_text()) == {
        "compressed": "cpu1,gpu[01-03]",
        "expanded": ["gpu01", "gpu02", "cpu1"],
        "groups": [["cpu1", "none"], ["gpu03", "l40s"], ["gpu[01-02]", "h100"]],
    }
