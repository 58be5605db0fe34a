"""deepops mig show / mig apply: the requests they make, the table show
prints from the run's stats, and bad hosts refused before any run (runner
replaced; the playbooks' own behaviour is in test_mig_role.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from deepops_py import runner
from deepops_py.cli import main
from deepops_py.run_results import HostResult, RunResult

pytestmark = pytest.mark.usefixtures("test_specs")

INVENTORY = """\
all:
  children:
    slurm_controller:
      hosts:
        ctl01:
    slurm_compute:
      hosts:
        gpu01:
        gpu02:
"""

GPU = {
    "index": 0, "product_name": "NVIDIA A100-SXM4-80GB", "model": "A100 80GB",
    "mig_mode": {"current": "Enabled", "pending": "Enabled"}, "managed": True, "wanted_mig_mode": "Enabled",
}
STATS = {
    "deepops_mig": {
        "gpu01": {"layout": "unmanaged", "error": None, "gpus": [
            {**GPU, "managed": False, "wanted": None, "wanted_mig_mode": None, "current": ["7g.80gb"], "changed": False},
        ]},
        "gpu02": {"layout": {"all": ["3g.40gb"]}, "error": None, "gpus": [
            {**GPU, "current": ["3g.40gb"], "wanted": ["3g.40gb"], "changed": False},
            {**GPU, "index": 1, "current": [], "wanted": ["3g.40gb"], "changed": True},
            {**GPU, "index": 2, "mig_mode": {"current": "Disabled", "pending": "Enabled"}, "current": [],
             "wanted": ["3g.40gb"], "changed": False, "reset_required": True},
            {**GPU, "index": 3, "mig_mode": {"current": "Disabled", "pending": "Disabled"}, "current": [],
             "wanted_mig_mode": "Disabled", "wanted": [], "changed": False},
        ]},
    }
}


class FakeRuns(list):
    """The requests made, and the stats the fake run reports."""

    data = STATS

    def __call__(self, request, json_output=False, **kwargs):
        self.append(request)
        return RunResult(
            run_id="r1", command=request.command, playbook=request.playbook, inventory=str(request.inventory),
            start="s", artifacts="/tmp/a", status="ok", hosts={"gpu01": HostResult("gpu01", ok=3)}, data=self.data,
        )


@pytest.fixture
def runs(monkeypatch):
    made = FakeRuns()
    monkeypatch.setattr(runner, "run_playbook", made)
    return made


def test_show_lists_every_gpu_with_its_state(write_inventory, runs):
    result = CliRunner().invoke(main, ["mig", "show", "-i", str(write_inventory(INVENTORY)), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["gpus"]
    assert [(row["host"], row["gpu"], row["state"]) for row in rows] == [
        ("gpu01", 0, "unmanaged"), ("gpu02", 0, "ok"), ("gpu02", 1, "differs"),
        ("gpu02", 2, "reset pending"), ("gpu02", 3, "ok"),
    ]
    assert [row["declared"] for row in rows] == ["-", "3g.40gb", "3g.40gb", "3g.40gb", "disabled"]
    request = runs[0]
    assert (request.command, request.playbook, request.check) == ("mig-show", "mig_show.yml", False)
    assert request.playbook_path().is_file()


def test_show_table_and_a_layout_that_does_not_fit_exits_1(write_inventory, runs):
    runs.data = {"deepops_mig": {**STATS["deepops_mig"], "gpu01": {"layout": "all-3g.40gb", "gpus": [],
                                                                         "error": "GPU 0: 3g.40gb is not a profile of the L40S"}}}
    result = CliRunner().invoke(main, ["mig", "show", "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 1, result.output
    assert "gpu01: GPU 0: 3g.40gb is not a profile of the L40S" in result.output
    assert "MIG layouts" in result.output and "reset pending" in result.output


def test_apply_names_every_compute_node_by_default(write_inventory, runs):
    result = CliRunner().invoke(main, ["mig", "apply", "-i", str(write_inventory(INVENTORY)), "--wait"])
    assert result.exit_code == 0, result.output
    request = runs[0]
    assert (request.command, request.playbook, request.wait_for_lock) == ("mig-apply", "mig_apply.yml", True)
    assert request.extra_vars["deepops_new_nodes"] == ["gpu01", "gpu02"] and request.playbook_path().is_file()


def test_apply_on_named_nodes_only(write_inventory, runs):
    result = CliRunner().invoke(main, ["mig", "apply", "gpu02", "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 0, result.output
    assert runs[0].extra_vars["deepops_new_nodes"] == ["gpu02"]


@pytest.mark.parametrize(("host", "words"), [("ctl01", "ctl01 is not in slurm_compute"), ("gpu9", "gpu9 is not in")])
def test_apply_refuses_a_host_that_is_not_a_compute_node(write_inventory, runs, host, words):
    result = CliRunner().invoke(main, ["mig", "apply", host, "-i", str(write_inventory(INVENTORY))])
    assert result.exit_code == 2 and words in result.output and runs == []
