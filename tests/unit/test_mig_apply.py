"""Applying MIG layouts (module_utils/mig_apply.py, the nvidia_mig module's logic).

Driven against the virtual cluster's stand-in nvidia-smi with a temporary MIG
state, as tests/unit/test_mig_standin.py runs it: the stand-in places and
numbers instances as the driver does, and keeps a mode change pending while a
simulated client uses the GPU. Most tests load the stand-in once and run it
in-process (hundreds of calls); one runs it as the script it is.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import mig_apply, mig_profiles
from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi as facts
from hypothesis import HealthCheck, given, settings
from mig_standin import MIG_MODELS, STAND_IN, install_node, load_stand_in
from hypothesis import strategies as st

from deepops_py.virtual.gpus import GpuSpec

SMI = "nvidia-smi"
CHANGING = {"-mig", "--multi-instance-gpu", "-cgi", "-cci", "-dci", "-dgi"}
MIXED_80GB = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]


STAND_IN_MODULE = load_stand_in("simulated_nvidia_smi_apply")


class Node:
    """One simulated node's files under a temporary root; every nvidia-smi call is recorded."""

    def __init__(self, root: Path, model: str, count: int):
        self.root, self.count = root, count
        self.model = mig_profiles.MODELS.get(MIG_MODELS.get(model, ""))  # None: a GPU without MIG
        self.env = install_node(root, GpuSpec(model, count))
        self.calls: list[list[str]] = []
        self.boot()

    def _point(self) -> None:
        """What the environment variables do for a fresh process, on the loaded stand-in."""
        module = STAND_IN_MODULE
        for variable, attribute in (("DEEPOPS_SIMULATED_GPUS", "MARKER"), ("DEEPOPS_SIMULATED_GPUS_DATA", "DATA"),
                                    ("DEEPOPS_SIMULATED_MIG_STATE", "MIG_STATE"),
                                    ("DEEPOPS_SIMULATED_MIG_RUN", "RUN_DIR"), ("DEEPOPS_SIMULATED_DEV", "DEV")):
            setattr(module, attribute, self.env[variable])
        module.MIG_MINORS = os.path.join(module.RUN_DIR, "mig-minors")
        module.CLIENTS_DIR = os.path.join(module.RUN_DIR, "clients")

    def boot(self) -> None:
        """A reboot: pending modes take effect, no instance survives."""
        self._point()
        with contextlib.redirect_stderr(io.StringIO()):  # not root: capability nodes are warned about
            STAND_IN_MODULE.boot(STAND_IN_MODULE.load_marker())

    def run(self, argv) -> tuple[int, str, str]:
        """The runner mig_apply takes: the stand-in in-process."""
        assert argv[0] == SMI
        self.calls.append(list(argv))
        self._point()
        out, err, code = io.StringIO(), io.StringIO(), 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                STAND_IN_MODULE.main(list(argv[1:]))
            except SystemExit as exit_:
                code = exit_.code or 0
        return code, out.getvalue(), err.getvalue()

    def smi(self, *args: str) -> str:
        code, out, err = self.run([SMI, *args])
        assert code == 0, (args, out, err)
        return out

    def apply(self, layout, check_mode: bool = False) -> mig_apply.Result:
        self.calls = []
        return mig_apply.apply_layout(self.run, SMI, layout, check_mode=check_mode)

    def changing_calls(self) -> list[list[str]]:
        return [argv for argv in self.calls if CHANGING & set(argv)]

    def instances(self) -> dict[int, list[str]]:
        """GPU index -> profiles of its GPU instances (largest first, as mig_apply orders them), from -lgi."""
        code, out, _err = self.run([SMI, "mig", "-lgi"])
        found: dict[int, list[str]] = {index: [] for index in range(self.count)}
        for gi in mig_apply.parse_gpu_instances(out if code == 0 else ""):
            found[gi.gpu].append(gi.profile)
        return {index: mig_apply.sorted_profiles(self.model, names) for index, names in found.items()}

    def devices(self) -> dict[int, list[str]]:
        """GPU index -> profiles of its MIG devices, as the GPU facts (-q -x) that feed gres.conf see them."""
        gpus = facts.gpu_facts(self.smi("-q", "-x"))["gpus"]
        return {gpu["index"]: mig_apply.sorted_profiles(self.model, [d["profile"] for d in gpu["mig_devices"]])
                for gpu in gpus}

    def gpu_instances(self, index: int) -> list[tuple[str, int, int]]:
        """(profile, GPU instance id, start) of GPU INDEX, from -lgi."""
        code, out, _err = self.run([SMI, "mig", "-i", str(index), "-lgi"])
        return sorted((gi.profile, gi.instance_id, gi.start) for gi in mig_apply.parse_gpu_instances(out if code == 0 else ""))

    def modes(self) -> list[str]:
        return self.smi("--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader").splitlines()

    def state_bytes(self) -> bytes:
        path = Path(self.env["DEEPOPS_SIMULATED_MIG_STATE"])
        return path.read_bytes() if path.exists() else b""

    def busy(self, index: int) -> None:
        """A live process (this test) uses GPU INDEX: a mode change on it stays pending."""
        clients = Path(self.env["DEEPOPS_SIMULATED_MIG_RUN"]) / "clients"
        clients.mkdir(parents=True, exist_ok=True)
        (clients / f"{index}-test").write_text(f"{os.getpid()}\n")


@pytest.fixture
def a100_80gb(tmp_path) -> Node:
    """Four A100 80GB, booted: MIG on (as recorded), no instances."""
    return Node(tmp_path, "a100-80gb", 4)


@pytest.fixture
def h100(tmp_path) -> Node:
    """Two H100 80GB HBM3, booted: MIG off (as recorded)."""
    return Node(tmp_path, "h100", 2)


# --------------------------------------------------------------------------
# applying, and applying again


def test_mixed_layout_on_a_fresh_a100_80gb(a100_80gb):
    layout = {"all": MIXED_80GB, 1: ["7g.80gb"], 2: "all-1g.10gb", 3: "disabled"}
    result = a100_80gb.apply(layout)
    assert result.changed
    # Largest first, ids from -lgip; GPU 3 is turned off (idle: at once).
    assert result.actions == [
        "nvidia-smi mig -i 0 -cgi 9,14,19,19 -C",
        "nvidia-smi mig -i 1 -cgi 0 -C",
        "nvidia-smi mig -i 2 -cgi 19,19,19,19,19,19,19 -C",
        "nvidia-smi -i 3 -mig 0",
    ]
    assert result.reset_required == []
    assert a100_80gb.instances() == {0: MIXED_80GB, 1: ["7g.80gb"], 2: ["1g.10gb"] * 7, 3: []}
    assert a100_80gb.devices() == a100_80gb.instances()  # one MIG device (compute instance) per GPU instance
    assert a100_80gb.modes() == ["0, Enabled, Enabled", "1, Enabled, Enabled", "2, Enabled, Enabled",
                                 "3, Disabled, Disabled"]
    gpu0 = result.gpus[0]
    assert (gpu0["model"], gpu0["current"], gpu0["wanted"], gpu0["changed"]) == ("A100 80GB", [], MIXED_80GB, True)
    assert result.gpus[3]["wanted_mig_mode"] == "Disabled" and result.gpus[3]["wanted"] == []

    again = a100_80gb.apply(layout)
    assert (again.changed, again.actions, again.reset_required) == (False, [], [])
    assert a100_80gb.changing_calls() == []
    assert [gpu["current"] for gpu in again.gpus] == [MIXED_80GB, ["7g.80gb"], ["1g.10gb"] * 7, []]
    assert not any(gpu["changed"] for gpu in again.gpus)


def test_balanced_layout_on_an_h100_turns_mig_on_first(tmp_path):
    """The stand-in run as the script it is, as the module runs nvidia-smi on a host."""
    node = Node(tmp_path, "h100", 2)
    env = {**os.environ, **node.env}
    calls = []

    def run(argv):
        calls.append(list(argv))
        done = subprocess.run([sys.executable, str(STAND_IN), *argv[1:]], capture_output=True, text=True, env=env)
        return done.returncode, done.stdout, done.stderr

    result = mig_apply.apply_layout(run, SMI, "all-balanced")
    assert result.actions == [
        "nvidia-smi -i 0 -mig 1", "nvidia-smi mig -i 0 -cgi 9,14,19,19 -C",
        "nvidia-smi -i 1 -mig 1", "nvidia-smi mig -i 1 -cgi 9,14,19,19 -C",
    ]
    assert [gpu["model"] for gpu in result.gpus] == ["H100 80GB", "H100 80GB"]
    assert node.instances() == {0: MIXED_80GB, 1: MIXED_80GB}
    calls.clear()
    again = mig_apply.apply_layout(run, SMI, "all-balanced")
    assert (again.changed, again.actions) == (False, [])
    assert [argv for argv in calls if CHANGING & set(argv)] == []
    assert [argv[1:] for argv in calls] == [["-q", "-x"], ["mig", "-lgi"], ["mig", "-lci"]]  # reads only


def test_changing_one_gpus_layout_touches_only_that_gpu(a100_80gb):
    a100_80gb.apply({"all": MIXED_80GB})
    untouched = {index: a100_80gb.gpu_instances(index) for index in (0, 2, 3)}
    result = a100_80gb.apply({"all": MIXED_80GB, 1: ["4g.40gb", "3g.40gb"]})
    # Every instance of GPU 1 goes, the new list comes largest first (4g.40gb fits only at slot 0).
    assert result.actions == [
        "nvidia-smi mig -i 1 -dci", "nvidia-smi mig -i 1 -dgi", "nvidia-smi mig -i 1 -cgi 5,9 -C",
    ]
    assert [gpu["changed"] for gpu in result.gpus] == [False, True, False, False]
    assert all(argv[argv.index("-i") + 1] == "1" for argv in a100_80gb.changing_calls())
    assert {index: a100_80gb.gpu_instances(index) for index in (0, 2, 3)} == untouched  # same ids, same places
    assert a100_80gb.instances()[1] == ["3g.40gb", "4g.40gb"]
    assert not a100_80gb.apply({"all": MIXED_80GB, 1: ["4g.40gb", "3g.40gb"]}).changed


def test_a_gpu_whose_compute_instances_differ_is_recreated(a100_80gb):
    a100_80gb.smi("mig", "-i", "0", "-cgi", "3g.40gb")  # a GPU instance without a compute instance
    result = a100_80gb.apply({0: ["3g.40gb"]})
    assert result.actions == ["nvidia-smi mig -i 0 -dgi", "nvidia-smi mig -i 0 -cgi 9 -C"]
    a100_80gb.smi("mig", "-i", "1", "-cgi", "3g.40gb")
    a100_80gb.smi("mig", "-i", "1", "-gi", "2", "-cci", "1c.3g.40gb")  # a compute instance that does not span it
    result = a100_80gb.apply({0: ["3g.40gb"], 1: ["3g.40gb"]})
    assert result.actions == ["nvidia-smi mig -i 1 -dci", "nvidia-smi mig -i 1 -dgi", "nvidia-smi mig -i 1 -cgi 9 -C"]
    assert not a100_80gb.apply({0: ["3g.40gb"], 1: ["3g.40gb"]}).changed


def test_disabled_destroys_the_instances_and_turns_mig_off(a100_80gb):
    a100_80gb.apply({"all": MIXED_80GB})
    result = a100_80gb.apply("disabled")
    assert result.actions == [
        command for index in range(4)
        for command in (f"nvidia-smi mig -i {index} -dci", f"nvidia-smi mig -i {index} -dgi", f"nvidia-smi -i {index} -mig 0")
    ]
    assert a100_80gb.modes() == [f"{index}, Disabled, Disabled" for index in range(4)]
    assert a100_80gb.instances() == {index: [] for index in range(4)}
    again = a100_80gb.apply("disabled")
    assert (again.changed, again.actions) == (False, [])
    assert a100_80gb.changing_calls() == []


def test_gpus_the_layout_does_not_manage_are_untouched(a100_80gb):
    a100_80gb.smi("mig", "-i", "1", "-cgi", "1g.20gb", "-C")  # by hand, outside deepops
    a100_80gb.smi("-i", "2", "-mig", "0")
    before = {index: a100_80gb.gpu_instances(index) for index in range(4)}
    result = a100_80gb.apply({0: MIXED_80GB, 3: "unmanaged"})
    assert result.actions == ["nvidia-smi mig -i 0 -cgi 9,14,19,19 -C"]
    assert [gpu["managed"] for gpu in result.gpus] == [True, False, False, False]
    assert [gpu["wanted"] for gpu in result.gpus] == [MIXED_80GB, None, None, None]
    assert {index: a100_80gb.gpu_instances(index) for index in (1, 2, 3)} == {index: before[index] for index in (1, 2, 3)}
    assert a100_80gb.modes()[2] == "2, Disabled, Disabled"
    # "unmanaged" for the whole node reads nothing it does not need, and changes nothing
    assert not a100_80gb.apply("unmanaged").changed and a100_80gb.changing_calls() == []
    # an index overrides "all": GPU 1 is left as it is
    result = a100_80gb.apply({"all": "disabled", 1: "unmanaged"})
    assert sorted({argv[argv.index("-i") + 1] for argv in a100_80gb.changing_calls()}) == ["0", "3"]  # 2 is off already
    assert a100_80gb.gpu_instances(1) == before[1]


@pytest.mark.parametrize(
    ("layout", "messages"),
    [
        ({0: MIXED_80GB, 4: ["1g.10gb"]}, ["GPU 4: no such GPU, the node has 4 (0-3)"]),
        ({"all": ["3g.20gb", "1g.5gb"]}, ["all GPUs: '3g.20gb' is not a MIG profile of the A100 80GB",
                                           "all GPUs: '1g.5gb' is not a MIG profile of the A100 80GB"]),
        ({0: MIXED_80GB, 1: ["4g.40gb", "4g.40gb"]}, ["GPU 1: 2 x 4g.40gb, but at most 1 fit on one A100 80GB"]),
        ("all-1g.12gb", ["all GPUs: '1g.12gb' is not a MIG profile of the A100 80GB"]),
        ({"0": "everything"}, ["GPU 0: 'everything' is not a MIG layout"]),
    ],
)
def test_a_layout_that_does_not_fit_the_gpus_changes_nothing(a100_80gb, layout, messages):
    a100_80gb.smi("mig", "-i", "3", "-cgi", "2g.20gb", "-C")
    before = a100_80gb.state_bytes()
    with pytest.raises(mig_profiles.LayoutError) as raised:
        a100_80gb.apply(layout)
    for message in messages:
        assert any(problem.startswith(message) for problem in raised.value.problems), raised.value.problems
    assert a100_80gb.changing_calls() == []
    assert a100_80gb.state_bytes() == before


def test_a_gpu_in_use_keeps_its_mode_change_pending_and_is_reported(h100):
    h100.busy(1)
    result = h100.apply({"all": MIXED_80GB})
    assert result.reset_required == [1]
    assert result.actions == [
        "nvidia-smi -i 0 -mig 1", "nvidia-smi mig -i 0 -cgi 9,14,19,19 -C",
        "nvidia-smi -i 1 -mig 1",  # asked once; pending until a reset or a reboot
    ]
    assert [(gpu["changed"], gpu["reset_required"]) for gpu in result.gpus] == [(True, False), (True, True)]
    assert h100.modes() == ["0, Enabled, Enabled", "1, Disabled, Enabled"]
    assert h100.instances() == {0: MIXED_80GB, 1: []}
    # Again: reported, not asked again, nothing else changes.
    again = h100.apply({"all": MIXED_80GB})
    assert (again.changed, again.actions, again.reset_required) == (False, [], [1])
    assert h100.changing_calls() == []
    # The check says the same.
    assert h100.apply({"all": MIXED_80GB}, check_mode=True).reset_required == [1]
    # After the reboot the mode is current and the next run creates GPU 1's instances.
    h100.boot()
    after = h100.apply({"all": MIXED_80GB})
    assert after.reset_required == []
    assert after.actions == ["nvidia-smi mig -i 0 -cgi 9,14,19,19 -C", "nvidia-smi mig -i 1 -cgi 9,14,19,19 -C"]
    assert h100.instances() == {0: MIXED_80GB, 1: MIXED_80GB}


def test_turning_mig_off_on_a_gpu_in_use_is_reported_too(a100_80gb):
    a100_80gb.apply({0: ["7g.80gb"]})
    a100_80gb.busy(0)
    result = a100_80gb.apply({0: "disabled"})
    assert result.actions == ["nvidia-smi mig -i 0 -dci", "nvidia-smi mig -i 0 -dgi", "nvidia-smi -i 0 -mig 0"]
    assert result.reset_required == [0]
    assert a100_80gb.modes()[0] == "0, Enabled, Disabled"
    assert a100_80gb.apply({0: "disabled"}).actions == []
    # Asked for a list again before the reset: -mig 1 cancels the pending change (no reset needed).
    back = a100_80gb.apply({0: ["7g.80gb"]})
    assert (back.actions, back.reset_required) == (["nvidia-smi -i 0 -mig 1", "nvidia-smi mig -i 0 -cgi 0 -C"], [])
    assert a100_80gb.modes()[0] == "0, Enabled, Enabled"
    assert a100_80gb.instances()[0] == ["7g.80gb"]


def test_a_gpu_without_mig_takes_disabled_and_refuses_profiles(tmp_path):
    l40s = Node(tmp_path, "l40s", 2)
    result = l40s.apply("disabled")
    assert (result.changed, result.actions) == (False, [])
    assert [(gpu["model"], gpu["mig_mode"]["current"], gpu["managed"]) for gpu in result.gpus] == [(None, "N/A", True)] * 2
    with pytest.raises(mig_profiles.LayoutError) as raised:
        l40s.apply({1: "all-1g.10gb"})
    assert raised.value.problems[0].startswith("GPU 1: all-1g.10gb needs MIG, and this GPU has no MIG table in deepops")
    assert l40s.changing_calls() == []


def test_check_mode_reports_what_would_run_and_runs_none_of_it(h100, a100_80gb):
    for node, layout in ((h100, {"all": MIXED_80GB, 1: "all-1g.10gb"}), (a100_80gb, {0: MIXED_80GB, 1: "disabled"})):
        before = node.state_bytes()
        planned = node.apply(layout, check_mode=True)
        assert planned.changed
        assert node.changing_calls() == []
        assert node.state_bytes() == before
        applied = node.apply(layout)
        assert planned.actions == applied.actions  # the table's profile ids are the driver's here
        assert [gpu["changed"] for gpu in planned.gpus] == [gpu["changed"] for gpu in applied.gpus]
        assert not node.apply(layout, check_mode=True).changed


def test_a_failing_command_names_itself_and_what_was_done(a100_80gb):
    def failing(argv):
        if "-cgi" in argv and argv[argv.index("-i") + 1] == "1":
            return 255, "Unable to create a GPU instance on GPU  1 using profile 9: Insufficient Resources\n", ""
        return a100_80gb.run(argv)

    with pytest.raises(mig_apply.MigApplyError) as raised:
        mig_apply.apply_layout(failing, SMI, {"all": ["3g.40gb"]})
    assert str(raised.value) == (
        "'nvidia-smi mig -i 1 -cgi 9 -C' failed (rc=255): Unable to create a GPU instance on GPU 1 using profile 9: "
        "Insufficient Resources"
    )
    assert raised.value.actions == ["nvidia-smi mig -i 0 -cgi 9 -C", "nvidia-smi mig -i 1 -cgi 9 -C"]


def test_a_host_without_nvidia_smi_has_no_gpus():
    result = mig_apply.apply_layout(lambda argv: pytest.fail(f"ran {argv}"), None, "all-1g.10gb")
    assert (result.changed, result.gpus) == (False, [])
    assert result.warnings == ["mig_layout is set, and this host has no GPUs (nvidia-smi not found)"]
    with pytest.raises(mig_profiles.LayoutError, match="GPU 0: no such GPU, the node has no GPUs"):
        mig_apply.apply_layout(lambda argv: pytest.fail(f"ran {argv}"), None, {0: ["1g.10gb"]})


def test_unreadable_nvidia_smi_fails_without_changing_anything():
    def broken(argv):
        return 9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."

    with pytest.raises(mig_apply.MigApplyError, match=r"'nvidia-smi -q -x' failed \(rc=9\): NVIDIA-SMI has failed"):
        mig_apply.apply_layout(broken, SMI, "disabled")


# --------------------------------------------------------------------------
# nodes mixing GPU models, and the listings


def _gpu(index: int, product: str | None, mode: str = "Disabled") -> mig_apply.Gpu:
    return mig_apply.Gpu(index, product, mig_profiles.model_for(product_name=product), mode, mode)


def test_a_node_mixing_models_checks_each_gpu_against_its_own_model():
    gpus = [_gpu(0, "NVIDIA A100-SXM4-80GB"), _gpu(1, "NVIDIA H100 NVL"), _gpu(2, "NVIDIA L40S", "N/A")]
    assert mig_apply.wanted_layouts(gpus, {0: ["3g.40gb"], 1: ["3g.47gb"], 2: "disabled"}) == {
        0: ["3g.40gb"], 1: ["3g.47gb"], 2: None,
    }
    assert mig_apply.wanted_layouts(gpus, None) == mig_apply.wanted_layouts(gpus, "unmanaged") == {}
    assert mig_apply.wanted_layouts(gpus, {"all": "all-balanced", 2: "unmanaged"}) == {
        0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], 1: ["3g.47gb", "2g.24gb", "1g.12gb", "1g.12gb"],
    }
    with pytest.raises(mig_profiles.LayoutError) as raised:
        mig_apply.wanted_layouts(gpus, {"all": ["3g.40gb"], 5: "disabled"})
    problems = raised.value.problems
    assert problems[0] == "GPU 5: no such GPU, the node has 3 (0-2)"
    assert any(problem.startswith("GPU 1: '3g.40gb' is not a MIG profile of the H100 94GB") for problem in problems)
    assert any(problem.startswith("GPU 2: 3g.40gb needs MIG") for problem in problems)
    assert not any(problem.startswith("GPU 0") for problem in problems)


def test_listings_parse_every_row_and_nothing_else():
    lgi = (
        "+---------------------------------------------------------+\n"
        "| GPU instances:                                          |\n"
        "| GPU   Name               Profile  Instance   Placement  |\n"
        "|                            ID       ID       Start:Size |\n"
        "|=========================================================|\n"
        "|   0  MIG 1g.5gb            19        9          2:1     |\n"
        "+---------------------------------------------------------+\n"
        "|   1  MIG 1g.10gb+me        20       13          6:1     |\n"
        "+---------------------------------------------------------+\n"
    )
    assert [(gi.gpu, gi.profile, gi.profile_id, gi.instance_id, gi.start, gi.size)
            for gi in mig_apply.parse_gpu_instances(lgi)] == [(0, "1g.5gb", 19, 9, 2, 1), (1, "1g.10gb+me", 20, 13, 6, 1)]
    lci = "|   0      2       MIG 3g.20gb          2         0          0:3     |\n"
    ((gpu, ci),) = mig_apply.parse_compute_instances(lci)
    assert (gpu, ci.gpu_instance_id, ci.name, ci.profile_id, ci.instance_id, ci.start, ci.size) == (0, 2, "3g.20gb", 2, 0, 0, 3)
    lgip = "|   0  MIG 1g.5gb          19     4/7        4.75       No     14     0     0   |\n" \
           "|                                                               1     0     0   |\n"
    assert mig_apply.parse_profile_ids(lgip) == {"1g.5gb": 19}


# --------------------------------------------------------------------------
# property: what the checker accepts is applied, and applying it again changes nothing

GPUS = 2


@st.composite
def gpu_values(draw, model: mig_profiles.MigModel):
    """One GPU's entry: a word, all-<profile>, or a list place() accepts."""
    kind = draw(st.sampled_from(["list", "list", "list", "all-profile", "word"]))
    if kind == "word":
        return draw(st.sampled_from(["unmanaged", "disabled", "all-balanced"]))
    names = [profile.name for profile in model.profiles]
    if kind == "all-profile":
        return "all-" + draw(st.sampled_from(names))
    chosen: list[str] = []
    for _ in range(draw(st.integers(0, 7))):
        fitting = [name for name in names if mig_profiles.place(model, [*chosen, name]) is not None]
        if not fitting:
            break
        chosen.append(draw(st.sampled_from(fitting)))
    return draw(st.permutations(chosen))


@st.composite
def node_layouts(draw, model: mig_profiles.MigModel):
    if draw(st.integers(0, 3)) == 0:  # a word for the whole node
        words = ["unmanaged", "disabled", "all-balanced", *(f"all-{profile.name}" for profile in model.profiles)]
        return draw(st.sampled_from(words))
    keys = draw(st.lists(st.sampled_from(["all", *range(GPUS)]), min_size=1, max_size=GPUS + 1, unique=True))
    return {key: draw(gpu_values(model)) for key in keys}


@st.composite
def cases(draw):
    virtual = draw(st.sampled_from(sorted(MIG_MODELS)))
    model = mig_profiles.MODELS[MIG_MODELS[virtual]]
    return virtual, model, draw(node_layouts(model)), draw(node_layouts(model))


@pytest.fixture(scope="module")
def property_nodes(tmp_path_factory):
    return {virtual: Node(tmp_path_factory.mktemp(virtual), virtual, GPUS) for virtual in MIG_MODELS}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cases())
def test_any_layout_the_checker_accepts_is_applied_and_reapplying_changes_nothing(property_nodes, case):
    virtual, model, first, second = case
    node = property_nodes[virtual]
    node.boot()
    for layout in (first, second):  # the second starts from whatever the first left
        wanted = mig_profiles.expand_layout(model, layout, GPUS)  # the checker accepts it
        before = node.instances()
        modes_before = node.modes()
        result = node.apply(layout)
        assert result.reset_required == []
        after = node.instances()
        for index in range(GPUS):
            if index not in wanted:
                assert after[index] == before[index] and node.modes()[index] == modes_before[index]
            elif wanted[index] is None:
                assert after[index] == [] and node.modes()[index] == f"{index}, Disabled, Disabled"
            else:
                assert Counter(after[index]) == Counter(wanted[index])
                assert node.modes()[index] == f"{index}, Enabled, Enabled"
        again = node.apply(layout)
        assert (again.changed, again.actions) == (False, []), (layout, again.actions)
        assert node.changing_calls() == []


def test_the_property_cases_cover_every_kind_of_entry():
    """The strategy reaches what it should (a property over too narrow a space cannot fail)."""
    seen: set[str] = set()

    def kind(value) -> str:
        if isinstance(value, list):
            return "list" if value else "empty list"
        return value if value in ("unmanaged", "disabled", "all-balanced") else "all-profile"

    @settings(max_examples=200, deadline=None, database=None)
    @given(cases())
    def collect(case):
        for layout in case[2:]:
            seen.update(kind(value) for value in (layout.values() if isinstance(layout, dict) else [layout]))
            seen.add("mapping" if isinstance(layout, dict) else "word")

    collect()
    assert seen == {"list", "empty list", "unmanaged", "disabled", "all-balanced", "all-profile", "mapping", "word"}
