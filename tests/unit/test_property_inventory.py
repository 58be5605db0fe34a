"""Property: whatever the files hold, loading gives a cluster or an InputError, never a traceback."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepops_py import inventory as inv
from deepops_py.cli import main
from deepops_py.errors import InputError

pytestmark = pytest.mark.usefixtures("test_specs")

GROUP_WORDS = ["all", "ungrouped", "slurm_controller", "slurm_compute", "slurm_login", "slurm_dbd", "monitoring",
               "slurm-compute", "gpu_h100", "rack1"]
SECTION_WORDS = ["hosts", "children", "vars", "host"]
HOST_WORDS = ["ctl01", "gpu01", "gpu02", "gpu[01:03]", "gpu_01", "-x", "a:22", "10.0.0.1", "[", "h o"]
VAR_WORDS = ["slurm_port", "slurm_partitions", "slurm_partitons", "ansible_host", "ansible_port", "ansible_become",
             "testbase_packages", "slurm-port", "my_var"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(["{{ x }}", "abc", "yes", "23.11"]),
)
keys = st.one_of(st.sampled_from(GROUP_WORDS + SECTION_WORDS + HOST_WORDS + VAR_WORDS), st.text(max_size=8), st.integers())
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=20,
)

host_entries = st.dictionaries(st.sampled_from(HOST_WORDS), st.one_of(st.none(), st.dictionaries(st.sampled_from(VAR_WORDS), values, max_size=3)), max_size=3)
groups = st.deferred(
    lambda: st.fixed_dictionaries(
        {},
        optional={
            "hosts": st.one_of(host_entries, values),
            "vars": st.one_of(st.dictionaries(st.sampled_from(VAR_WORDS), values, max_size=3), values),
            "children": st.dictionaries(st.sampled_from(GROUP_WORDS), st.one_of(st.none(), groups), max_size=3),
        },
    )
)
var_maps = st.one_of(st.none(), st.dictionaries(st.sampled_from(VAR_WORDS), values, max_size=2))
# A valid skeleton with random variables: reaches the variable checks and, often enough, success.
near_valid = st.builds(
    lambda all_vars, controller_vars, compute_vars: {
        "all": {
            "vars": all_vars,
            "children": {
                "slurm_controller": {"hosts": {"ctl01": controller_vars}},
                "slurm_compute": {"hosts": {"gpu01": None, "gpu02": compute_vars}},
            },
        }
    },
    var_maps, var_maps, var_maps,
)
# Mostly inventory-shaped documents (to reach Ansible and the checks), some anything at all.
inventory_documents = st.one_of(
    near_valid,
    st.dictionaries(st.sampled_from(GROUP_WORDS), st.one_of(st.none(), groups), max_size=4),
    st.fixed_dictionaries({"all": st.fixed_dictionaries({"children": st.dictionaries(st.sampled_from(GROUP_WORDS), st.one_of(st.none(), groups), max_size=4)})}),
    values,
)
file_contents = st.one_of(
    inventory_documents.map(lambda document: yaml.safe_dump(document).encode()),
    st.dictionaries(st.sampled_from(VAR_WORDS), values, max_size=4).map(lambda document: yaml.safe_dump(document).encode()),
    st.binary(max_size=64),
    st.text(max_size=64).map(str.encode),
)
vars_files = st.dictionaries(
    st.sampled_from(["group_vars/all.yml", "group_vars/slurm_compute.yaml", "group_vars/rack1.yml", "group_vars/all/x.yml",
                     "host_vars/gpu01.yml", "host_vars/gpu09", "group_vars/slurm-compute.yml"]),
    file_contents,
    max_size=3,
)

# DEEPOPS_HYPOTHESIS_EXAMPLES raises the count for a longer bug hunt.
SETTINGS = settings(max_examples=int(os.environ.get("DEEPOPS_HYPOTHESIS_EXAMPLES", "100")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _write(directory: Path, inventory: bytes, files: dict[str, bytes]) -> Path:
    for relative, content in {"inventory.yml": inventory, **files}.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return directory / "inventory.yml"


@SETTINGS
@given(inventory=file_contents, files=vars_files)
def test_load_cluster_gives_a_cluster_or_an_input_error(inventory: bytes, files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as temp:
        path = _write(Path(temp), inventory, files)
        try:
            cluster = inv.load_cluster(path)
        except InputError as error:
            assert error.problems or error.message
            assert error.exit_code == 2
        else:
            assert cluster.hosts and cluster.groups["slurm_controller"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inventory=file_contents, files=vars_files)
def test_cli_check_exits_0_or_2_without_traceback(inventory: bytes, files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as temp:
        path = _write(Path(temp), inventory, files)
        result = CliRunner().invoke(main, ["check", "-i", str(path), "--no-ssh"])
        assert result.exit_code in (0, 2), result.output
        assert isinstance(result.exception, (SystemExit, type(None))), repr(result.exception)
        assert "Traceback" not in result.output
