"""The MIG profile table and the layout vocabulary (plugins/module_utils/mig_profiles.py).

For every model: the table's own invariants, every combination a source
documents as valid is accepted, and a set of impossible ones is rejected
with a message naming GPU and profile. ``place`` is checked exhaustively on
every model and, with random lists, against a brute-force search.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from itertools import combinations_with_replacement
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.deepops.cluster.plugins.module_utils import mig_profiles as mig
from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi
from ansible_collections.deepops.cluster.plugins.module_utils.mig_profiles import GpuInstanceProfile, LayoutError, MigModel

REPO = Path(__file__).resolve().parents[2]
MODELS = list(mig.MODELS.values())
KEYS = list(mig.MODELS)


def model(key: str) -> MigModel:
    return mig.MODELS[key]


def brute_force(model: MigModel, names: list[str]) -> bool:
    """Whether some choice of starts places NAMES apart, found by trying every start in the order given.

    Independent of ``place``: no sorting, no symmetry breaking, sets of slots
    instead of bit masks; the count rules are checked on their own.
    """
    profiles = [model.profile(name) for name in names]
    if any(profile is None for profile in profiles):
        return False
    counts = Counter(names)
    if any(count > model.profile(name).max_instances for name, count in counts.items()):
        return False
    if sum(p.compute_slices for p in profiles) > model.compute_slices:
        return False
    if sum(p.ofa for p in profiles) > max(p.ofa for p in model.profiles):
        return False

    def fits(index: int, taken: frozenset[int]) -> bool:
        if index == len(profiles):
            return True
        profile = profiles[index]
        for start in profile.placements:
            slots = frozenset(range(start, start + profile.placement_size))
            if not slots & taken and max(slots) < model.memory_slices and fits(index + 1, taken | slots):
                return True
        return False

    return fits(0, frozenset())


def assert_valid_placement(model: MigModel, names: list[str], placement: list[tuple[str, int]]) -> None:
    assert [name for name, _start in placement] == list(names)
    taken: set[int] = set()
    for name, start in placement:
        profile = model.profile(name)
        assert start in profile.placements, (name, start)
        slots = set(range(start, start + profile.placement_size))
        assert max(slots) < model.memory_slices
        assert not slots & taken, f"{name} at {start} overlaps {sorted(taken)}"
        taken |= slots
    for name, count in Counter(names).items():
        assert count <= model.profile(name).max_instances
    assert sum(model.profile(name).compute_slices for name in names) <= model.compute_slices
    assert sum(model.profile(name).memory_slices for name in names) <= model.memory_slices


# --------------------------------------------------------------------------
# the table's own invariants


@pytest.mark.parametrize("key", KEYS)
def test_key_ids_and_names_are_unique(key):
    m = model(key)
    assert m.key == key
    ids = [p.profile_id for p in m.profiles]
    names = [p.name for p in m.profiles]
    assert len(set(ids)) == len(ids), f"{key}: duplicate profile ids {ids}"
    assert len(set(names)) == len(names), f"{key}: duplicate profile names {names}"


@pytest.mark.parametrize("key", KEYS)
def test_names_say_their_compute_slices(key):
    for p in model(key).profiles:
        assert mig.PROFILE_NAME.fullmatch(p.name), p.name
        assert p.name.startswith(f"{p.compute_slices}g."), p.name
        assert 1 <= p.compute_slices <= model(key).compute_slices


@pytest.mark.parametrize("key", KEYS)
def test_every_placement_lies_within_the_memory_slices(key):
    m = model(key)
    for p in m.profiles:
        assert p.placements, p.name
        assert p.placement_size == p.memory_slices, p.name
        assert list(p.placements) == sorted(set(p.placements)), p.name
        for start in p.placements:
            assert 0 <= start and start + p.placement_size <= m.memory_slices, (p.name, start)


def most_apart(p: GpuInstanceProfile) -> int:
    """The largest number of this profile's placements that do not overlap (greedy on sorted starts)."""
    count, free_from = 0, 0
    for start in p.placements:
        if start >= free_from:
            count, free_from = count + 1, start + p.placement_size
    return count


@pytest.mark.parametrize("key", KEYS)
def test_max_instances_agree_with_the_placements(key):
    m = model(key)
    for p in m.profiles:
        # The +me profiles carry the GPU's one optical-flow engine: one instance, whatever the room.
        expected = 1 if "+me" in p.name else most_apart(p)
        assert p.max_instances == expected, p.name
        assert p.max_instances * p.compute_slices <= m.compute_slices, p.name
        assert mig.fit_count(m, p.name) == p.max_instances, p.name
        assert mig.place(m, [p.name] * p.max_instances) is not None, p.name
        assert mig.place(m, [p.name] * (p.max_instances + 1)) is None, p.name


@pytest.mark.parametrize("key", KEYS)
def test_the_whole_gpu_profile_takes_every_slice(key):
    m = model(key)
    (whole,) = [p for p in m.profiles if p.compute_slices == m.compute_slices]
    assert whole.placements == (0,) and whole.placement_size == m.memory_slices and whole.max_instances == 1
    # It holds every engine, so no other profile has more of any.
    for p in m.profiles:
        for engine in ("copy_engines", "decoders", "encoders", "jpeg", "ofa"):
            assert getattr(p, engine) <= getattr(whole, engine), (p.name, engine)
    assert whole.ofa == 1
    assert [p.name for p in m.profiles if p.ofa] == [p.name for p in m.profiles if "+me" in p.name] + [whole.name]


@pytest.mark.parametrize("key", KEYS)
def test_memory_grows_with_memory_slices(key):
    by_slices: dict[int, set[int]] = {}
    for p in model(key).profiles:
        assert p.memory_mib > 0 and p.memory_mib % 64 == 0, p.name
        by_slices.setdefault(p.memory_slices, set()).add(p.memory_mib)
    assert all(len(sizes) == 1 for sizes in by_slices.values()), by_slices  # same slices, same size
    sizes = [by_slices[slices].pop() for slices in sorted(by_slices)]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)


@pytest.mark.parametrize("key", KEYS)
def test_sms_grow_with_compute_slices(key):
    by_slices: dict[int, set[int]] = {}
    for p in model(key).profiles:
        by_slices.setdefault(p.compute_slices, set()).add(p.multiprocessors)
    ordered = [by_slices[slices] for slices in sorted(by_slices)]
    assert all(max(smaller) < min(larger) for smaller, larger in zip(ordered, ordered[1:])), by_slices


@pytest.mark.parametrize("key", KEYS)
def test_the_model_names_its_source(key):
    m = model(key)
    assert "Multi-Instance GPU User Guide" in m.source and "Supported MIG Profiles" in m.source
    assert "-lgip" in m.source
    assert m.label in m.source or m.label.split()[0] in m.source


@pytest.mark.parametrize("key", KEYS)
def test_product_names_and_gpu_type_agree_with_the_gpu_facts(key):
    m = model(key)
    for name in m.product_names:
        assert nvidia_smi.normalize_gpu_type(name) == m.gpu_type, name
        assert mig.model_for(product_name=name) is m


@pytest.mark.parametrize("key", KEYS)
def test_balanced_preset_is_placeable_and_uses_every_compute_slice(key):
    m = model(key)
    assert mig.place(m, m.balanced) is not None
    assert sum(m.profile(name).compute_slices for name in m.balanced) == m.compute_slices


def test_a100_80gb_agrees_with_the_recorded_capture():
    """The repository's real A100-SXM4-80GB capture with four 1g.20gb MIG devices (driver 535)."""
    path = REPO / "deepops_py" / "virtual" / "fixtures" / "a100-sxm4-80gb-mig-4x1g20gb-driver535.xml"
    gpu = ET.parse(path).getroot().find("gpu")
    assert mig.model_for(product_name=gpu.findtext("product_name")) is model("a100-80gb")
    profile = model("a100-80gb").profile("1g.20gb")
    devices = gpu.findall("mig_devices/mig_device")
    assert len(devices) == 4 == profile.max_instances
    for device in devices:
        shared = device.find("device_attributes/shared")
        assert int(shared.findtext("multiprocessor_count")) == profile.multiprocessors
        assert int(shared.findtext("copy_engine_count")) == profile.copy_engines
        assert int(shared.findtext("decoder_count")) == profile.decoders
        assert int(shared.findtext("encoder_count")) == profile.encoders
        assert int(shared.findtext("jpg_count")) == profile.jpeg
        assert int(shared.findtext("ofa_count")) == profile.ofa
        assert device.findtext("fb_memory_usage/total") == f"{profile.memory_mib} MiB"


def test_lgip_figures_convert_to_the_mib_the_driver_reports():
    # -lgip prints two decimals; the H100 NVL's MIG devices report these MiB in the same capture.
    assert [mig._mib(gib) for gib in (10.75, 21.62, 46.38)] == [11008, 22144, 47488]
    assert mig._mib(19.50) == 19968 and mig._mib(5.81) == 5952
    # B200: the MIG devices of NVIDIA/gpu-operator#2155 (1g.23gb, 2g.45gb); H20: a public 1g.12gb device.
    assert [mig._mib(gib) for gib in (20.50, 44.25)] == [20992, 45312]
    assert mig._mib(11.75) == 12032


@pytest.mark.parametrize(
    ("product", "sms", "mib", "engines", "expected"),
    [
        # nvidia-smi's MIG devices on B200s (NVIDIA/gpu-operator#2155) and an H20 (a public write-up).
        ("NVIDIA B200", 18, 20992, {"copy_engines": 2, "decoders": 1, "ofa": 0, "jpeg": 1}, "1g.23gb"),
        ("NVIDIA B200", 36, 45312, {"copy_engines": 4, "decoders": 2, "ofa": 0, "jpeg": 2}, "2g.45gb"),
        ("NVIDIA B200", 18, 20992, {"ofa": 1}, "1g.23gb+me"),
        ("NVIDIA H20", 8, 12032, {}, "1g.12gb"),
    ],
)
def test_the_gpu_facts_name_b200_and_h20_mig_devices_from_the_table(product, sms, mib, engines, expected):
    gpu_type = nvidia_smi.normalize_gpu_type(product)
    assert nvidia_smi.infer_mig_profile(gpu_type, product, None, sms, mib, engines) == expected


# --------------------------------------------------------------------------
# documented combinations are accepted


def presets(key: str) -> list[list[str]]:
    """NVIDIA mig-parted's default configuration: all-<profile> for each profile, and all-balanced."""
    m = model(key)
    return [[p.name] * p.max_instances for p in m.profiles] + [list(m.balanced)]


DOCUMENTED: dict[str, list[list[str]]] = {
    # The MIG user guide's own examples (Getting Started with MIG: creating GPU instances, instance
    # geometry); 4g.20gb + 3g.20gb is valid from R510 (Concepts, Partitioning).
    "a100-40gb": [
        ["3g.20gb", "3g.20gb"],
        ["1g.5gb", "2g.10gb", "4g.20gb"],
        ["3g.20gb", "1g.5gb", "2g.10gb", "1g.5gb"],
        ["2g.10gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"],
        ["4g.20gb", "3g.20gb"],
    ],
    # The same examples with the 80GB names (the guide's A100 note); three 2g.20gb and a
    # 1g.10gb+me (a public A100 80GB capture: nvidia-smi mig -cgi 14,14,14,20).
    "a100-80gb": [
        ["3g.40gb", "3g.40gb"],
        ["1g.10gb", "2g.20gb", "4g.40gb"],
        ["3g.40gb", "1g.10gb", "2g.20gb", "1g.10gb"],
        ["2g.20gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"],
        ["4g.40gb", "3g.40gb"],
        ["2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb+me"],
    ],
    # Two 2g.12gb (a public A30 -lgipp capture's note); the rest are presets.
    "a30-24gb": [["2g.12gb", "2g.12gb"], ["1g.6gb+me", "1g.6gb", "1g.6gb", "1g.6gb"]],
    # 4g.40gb + three 1g.10gb per GPU (a public H100 SXM5 cluster's slurmd -G listing).
    "h100-80gb": [["4g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"]],
    # nvidia-smi mig -cgi 9,15,19 on an H100 NVL (a public capture).
    "h100-94gb": [["3g.47gb", "1g.24gb", "1g.12gb"]],
    # A mig-parted mixed configuration for H200 (AWS SageMaker HyperPod): 1g.18gb x 5 + 2g.35gb.
    "h200-141gb": [["1g.18gb"] * 5 + ["2g.35gb"]],
    # Three 2g.45gb and a 1g.23gb on one B200 (the MIG devices of NVIDIA/gpu-operator#2155); the rest are
    # mig-parted's presets (all-balanced: 3g.90gb + 2g.45gb + 2 x 1g.23gb).
    "b200-180gb": [["2g.45gb", "2g.45gb", "2g.45gb", "1g.23gb"]],
    # 3g.48gb + 1g.24gb + 2 x 1g.12gb per GPU on 8x H20 nodes (a public nvidia-smi -L of a GPU Operator
    # cluster), and the two 1g.12gb of a public H20 -cgi session.
    "h20-96gb": [["3g.48gb", "1g.24gb", "1g.12gb", "1g.12gb"], ["1g.12gb", "1g.12gb"]],
}


def test_every_model_has_documented_combinations():
    assert set(DOCUMENTED) == set(KEYS)


@pytest.mark.parametrize(("key", "names"), [(key, names) for key in KEYS for names in DOCUMENTED[key] + presets(key)])
def test_documented_combinations_are_accepted(key, names):
    m = model(key)
    placement = mig.place(m, names)
    assert placement is not None, names
    assert_valid_placement(m, names, placement)
    assert mig.layout_problems(m, {0: names}, gpu_count=1) == []
    assert mig.expand_layout(m, {"all": names}, 2) == {0: names, 1: names}


@pytest.mark.parametrize(
    ("key", "names", "problem"),
    [
        ("b200-180gb", ["4g.90gb", "4g.90gb"], "2 x 4g.90gb, but at most 1 fit on one B200 180GB"),
        ("b200-180gb", ["3g.90gb", "3g.90gb", "1g.23gb"],
         "3g.90gb, 3g.90gb, 1g.23gb need 9 memory slices, and the B200 180GB has 8"),
        ("b200-180gb", ["4g.90gb", "2g.45gb", "1g.45gb", "1g.23gb"],
         "4g.90gb, 2g.45gb, 1g.45gb, 1g.23gb need 8 compute slices, and the B200 180GB has 7"),
        ("b200-180gb", ["1g.23gb+me", "7g.180gb"], "1g.23gb+me, 7g.180gb need 8 compute slices"),
        ("h20-96gb", ["3g.48gb", "4g.48gb", "1g.12gb"], "3g.48gb, 4g.48gb, 1g.12gb need 8 compute slices, and the H20 96GB has 7"),
        ("h20-96gb", ["3g.48gb", "2g.24gb", "1g.24gb", "1g.12gb"],
         "3g.48gb, 2g.24gb, 1g.24gb, 1g.12gb need 9 memory slices, and the H20 96GB has 8"),
        ("h20-96gb", ["2g.24gb"] * 4, "4 x 2g.24gb, but at most 3 fit on one H20 96GB"),
    ],
)
def test_b200_and_h20_layouts_that_cannot_fit_are_rejected(key, names, problem):
    m = model(key)
    assert mig.place(m, names) is None and not brute_force(m, names)
    (message,) = mig.layout_problems(m, {1: names}, gpu_count=8)
    assert message.startswith(f"GPU 1: {problem}"), message


def test_an_order_nvidia_smi_refuses_is_placed_anyway():
    # The guide: -cgi 19,19,14,9 fails (the driver puts the first 1g.5gb where 3g.20gb must go);
    # the same profiles in another order fit, and place finds that arrangement.
    m = model("a100-40gb")
    names = ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    placement = mig.place(m, names)
    assert_valid_placement(m, names, placement)
    assert dict(placement)["3g.20gb"] == 4


# --------------------------------------------------------------------------
# impossible combinations are rejected, naming GPU and profile


def shape(m: MigModel, compute: int, memory: int | None = None, me: bool = False) -> str:
    """The model's profile with these compute slices (and memory slices), with or without +me."""
    (name,) = [p.name for p in m.profiles
               if p.compute_slices == compute and (memory is None or p.memory_slices == memory) and ("+me" in p.name) == me]
    return name


def impossible(key: str) -> list[tuple[list[str], str]]:
    """(profiles, words the message must hold) that cannot share one GPU of the model."""
    m = model(key)
    whole, one, two = shape(m, m.compute_slices), shape(m, 1, 1), shape(m, 2, 2)
    cases = [([whole, one], "compute slices")]  # one compute slice too many
    if m.compute_slices == 7:
        cases += [
            ([shape(m, 4), two, two], "compute slices"),
            ([shape(m, 3), shape(m, 3), shape(m, 1, 2)], "memory slices"),  # 7 compute slices, 10 memory slices
        ]
    else:  # A30: four slices of each
        cases += [
            ([two, two, one], "compute slices"),
            ([shape(m, 1, 1, me=True), shape(m, 2, 2, me=True)], "optical-flow"),  # the GPU has one OFA
        ]
    for p in m.profiles:  # one more than fits
        cases.append(([p.name] * (p.max_instances + 1), f"at most {p.max_instances} fit"))
    return cases


@pytest.mark.parametrize(("key", "names", "words"), [(key, names, words) for key in KEYS for names, words in impossible(key)])
def test_impossible_combinations_are_rejected(key, names, words):
    m = model(key)
    assert mig.place(m, names) is None, names
    assert not brute_force(m, names)
    problems = mig.layout_problems(m, {3: names}, gpu_count=8)
    assert len(problems) == 1 and problems[0].startswith("GPU 3: "), problems
    assert words in problems[0]
    assert any(name in problems[0] for name in names)
    with pytest.raises(LayoutError) as error:
        mig.expand_layout(m, {3: names}, 8)
    assert error.value.problems == tuple(problems)
    assert isinstance(error.value, ValueError)


@pytest.mark.parametrize("key", KEYS)
def test_unknown_profiles_are_rejected_with_a_suggestion(key):
    m = model(key)
    near = m.profiles[0].name.replace("gb", "1gb")  # 1g.10gb -> 1g.101gb
    problems = mig.layout_problems(m, {0: [m.profiles[0].name, near], 1: ["5g.999gb"]})
    assert problems[0] == f"GPU 0: {near!r} is not a MIG profile of the {m.label} — did you mean {m.profiles[0].name}?"
    assert problems[1].startswith(f"GPU 1: '5g.999gb' is not a MIG profile of the {m.label}")
    assert mig.place(m, [near]) is None


def test_an_unknown_profile_with_no_near_name_lists_the_profiles():
    assert mig.layout_problems(model("a30-24gb"), {1: ["5g.999gb"]}) == [
        "GPU 1: '5g.999gb' is not a MIG profile of the A30 24GB (its profiles: 1g.6gb, 1g.6gb+me, 2g.12gb, 2g.12gb+me, 4g.24gb)"
    ]


def test_a_profile_of_another_model_is_unknown():
    problems = mig.layout_problems(model("a100-40gb"), "all-1g.20gb")
    assert problems == [
        "all GPUs: '1g.20gb' is not a MIG profile of the A100 40GB — did you mean 1g.10gb (the same slices; 1g.20gb is the A100 80GB's name)?"
    ]
    assert mig.layout_problems(model("h200-141gb"), {0: ["3g.40gb", "1g.10gb+me"]}) == [
        "GPU 0: '3g.40gb' is not a MIG profile of the H200 141GB — did you mean 3g.71gb (the same slices; 3g.40gb is the A100 80GB's name)?",
        "GPU 0: '1g.10gb+me' is not a MIG profile of the H200 141GB — did you mean 1g.18gb+me (the same slices; 1g.10gb+me is the A100 80GB's name)?",
    ]


def test_a_layout_that_fits_by_count_but_not_by_placement_says_so():
    # No real model has such a list (see the exhaustive test below), so a made-up one shows the message.
    def row(name, compute, memory, placements):
        return GpuInstanceProfile(name, 0, compute, memory, 1024, 2, 1, tuple(placements), memory, 0, 0, 0, 0, 0)

    made_up = MigModel("test", "Test GPU", "test", (), 4, 4, (row("2g.2gb", 2, 2, (1,)), row("1g.1gb", 1, 1, (0, 1))), (), "test")
    names = ["2g.2gb", "1g.1gb", "1g.1gb"]
    assert mig.place(made_up, names) is None and not brute_force(made_up, names)
    (problem,) = mig.layout_problems(made_up, {0: names})
    assert problem == (
        "GPU 0: 2g.2gb, 1g.1gb, 1g.1gb cannot be placed together: "
        "no choice of their start slots (2g.2gb at {1}:2; 1g.1gb at {0,1}:1) keeps them apart"
    )


@pytest.mark.parametrize("key", KEYS)
def test_place_agrees_with_brute_force_on_every_list_of_up_to_seven(key):
    """Every multiset of profiles a GPU could hold by its compute slices."""
    m = model(key)
    for size in range(m.compute_slices + 1):
        for combo in combinations_with_replacement(m.profile_names, size):
            names = list(combo)
            placement = mig.place(m, names)
            assert (placement is not None) == brute_force(m, names), names
            if placement is not None:
                assert_valid_placement(m, names, placement)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_place_is_valid_or_nothing_fits(data):
    m = data.draw(st.sampled_from(MODELS), label="model")
    names = data.draw(st.lists(st.sampled_from(m.profile_names), max_size=9), label="profiles")
    names = data.draw(st.permutations(names), label="order")
    placement = mig.place(m, names)
    if placement is not None:
        assert_valid_placement(m, names, placement)
        return
    fits_by_size = (
        sum(m.profile(n).compute_slices for n in names) <= m.compute_slices
        and sum(m.profile(n).memory_slices for n in names) <= m.memory_slices
    )
    if fits_by_size:
        assert not brute_force(m, names), names


# --------------------------------------------------------------------------
# the layout vocabulary


def test_named_layouts_expand_per_gpu():
    m = model("h100-80gb")
    assert mig.expand_layout(m, "unmanaged", 4) == {}
    assert mig.expand_layout(m, None, 4) == {}
    assert mig.expand_layout(m, "disabled", 2) == {0: None, 1: None}
    assert mig.expand_layout(m, "all-3g.40gb", 1) == {0: ["3g.40gb", "3g.40gb"]}
    assert mig.expand_layout(m, "all-1g.10gb+me", 1) == {0: ["1g.10gb+me"]}
    assert mig.expand_layout(m, "all-balanced", 1) == {0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}


def test_a_mapping_overrides_all_per_gpu_and_leaves_unnamed_gpus_alone():
    m = model("a100-80gb")
    layout = {"all": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"], 1: "disabled", "2": "all-7g.80gb", 3: "unmanaged"}
    assert mig.expand_layout(m, layout, 4) == {
        0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
        1: None,
        2: ["7g.80gb"],
    }
    assert mig.expand_layout(m, {0: ["1g.10gb"], 1: []}, 8) == {0: ["1g.10gb"], 1: []}


def test_gpu_indexes_beyond_the_node_are_rejected():
    with pytest.raises(LayoutError, match=r"GPU 4: no such GPU, the node has 4 \(0-3\)"):
        mig.expand_layout(model("a30-24gb"), {4: ["4g.24gb"]}, 4)
    assert mig.layout_problems(model("a30-24gb"), {4: ["4g.24gb"]}) == []  # count unknown: not checked


def test_a_gpu_without_mig_takes_only_unmanaged_or_disabled():
    assert mig.expand_layout(None, "unmanaged", 2) == {}
    assert mig.expand_layout(None, "disabled", 2) == {0: None, 1: None}
    with pytest.raises(LayoutError, match=r"^GPU 1: 1g.10gb needs MIG, and this GPU has no MIG table in deepops"):
        mig.expand_layout(None, {0: "disabled", 1: ["1g.10gb"]}, 2)


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ("all-1G.10GB", "'all-1G.10GB' is not a MIG layout"),
        ("balanced", "'balanced' is not a MIG layout"),
        (["1g.10gb"], "found list"),
        (7, "found int"),
        ({-1: ["1g.10gb"]}, "-1 is not a GPU index (0, 1, ...) or all"),
        ({True: ["1g.10gb"]}, "True is not a GPU index"),
        ({"gpu0": ["1g.10gb"]}, "'gpu0' is not a GPU index"),
        ({0: ["1g.10gb"], "0": ["2g.20gb"]}, "GPU 0 is given twice (0 and '0')"),
        ({"all": "1g.10gb"}, "all GPUs: '1g.10gb' is not a MIG layout: expected a list of profiles"),
        ({0: ["1g"]}, "GPU 0: '1g' is not a MIG profile name"),
        ({0: [1]}, "GPU 0: 1 is not a MIG profile name"),
        ({0: {"1g.10gb": 2}}, "GPU 0: expected a list of profiles or disabled, found dict"),
    ],
)
def test_malformed_layouts_are_described(layout, expected):
    problems = mig.shape_problems(layout)
    assert problems and expected in problems[0], problems
    assert mig.layout_problems(model("a100-80gb"), layout) == problems


@pytest.mark.parametrize("layout", [None, "unmanaged", "disabled", "all-balanced", "all-1g.24gb+me.all", {}, {0: []}, {"all": "all-2g.20gb", 3: "disabled"}])
def test_well_formed_layouts(layout):
    assert mig.shape_problems(layout) == []


# --------------------------------------------------------------------------
# finding the model


def test_model_for_product_names_and_types():
    assert mig.model_for(product_name="NVIDIA A100-SXM4-40GB").key == "a100-40gb"
    assert mig.model_for(product_name="A100-SXM4-40GB").key == "a100-40gb"  # drivers before R470 print no "NVIDIA"
    assert mig.model_for(product_name="nvidia  a100-sxm4-80gb").key == "a100-80gb"
    assert mig.model_for(product_name="NVIDIA H200 NVL").key == "h200-141gb"  # through its GPU type, h200
    assert mig.model_for(product_name="NVIDIA H100 PCIe") is None  # per-instance SMs undocumented: left out
    assert mig.model_for(product_name="NVIDIA L40S") is None
    assert mig.model_for(product_name="NVIDIA B200").key == "b200-180gb"
    assert mig.model_for(product_name="NVIDIA H20").key == "h20-96gb"
    assert mig.model_for(product_name="NVIDIA GB200") is None  # gb200: other profiles, no table
    assert mig.model_for(gpu_type="b200").key == "b200-180gb"
    assert mig.model_for(gpu_type="h20").key == "h20-96gb"
    assert mig.model_for(gpu_type="a30").key == "a30-24gb"
    assert mig.model_for(gpu_type="h100-94gb").key == "h100-94gb"
    assert mig.model_for(gpu_type="a100") is None  # 40 or 80GB
    assert [m.key for m in mig.models_for("a100")] == ["a100-40gb", "a100-80gb"]
    assert [m.key for m in mig.models_for("h100")] == ["h100-80gb", "h100-94gb"]
    assert mig.models_for("") == () and mig.models_for(None) == () and mig.models_for("l40s") == ()
    assert mig.model_for() is None


def test_profiles_are_found_by_name_and_id():
    m = model("a100-80gb")
    assert m.profile("MIG 3g.40gb") is m.profile("3g.40gb") is m.profile_by_id(9)
    assert m.profile("3g.20gb") is None and m.profile_by_id(99) is None


# --------------------------------------------------------------------------
# the inventory-only check


def test_offline_a_type_with_two_models_passes_what_fits_either():
    assert mig.offline_problems("all-1g.5gb", "a100") == []
    assert mig.offline_problems({0: ["4g.40gb", "3g.40gb"]}, "a100") == []
    (problem,) = mig.offline_problems({0: ["1g.5gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"]}, "a100")
    assert problem.startswith("GPU 0: 5 x 1g.10gb, but at most 4 fit on one A100 40GB")
    assert problem.endswith("(slurm_gpu_type a100: fits neither the A100 40GB nor the A100 80GB; shown for the A100 40GB)")


def test_offline_without_a_type_every_table_is_tried():
    assert mig.offline_problems({"all": ["3g.71gb", "4g.71gb"]}, None) == []
    (problem,) = mig.offline_problems({2: ["3g.47gb", "3g.47gb", "3g.47gb"]}, "")
    assert problem.startswith("GPU 2: 3 x 3g.47gb, but at most 2 fit on one H100 94GB")
    assert "no slurm_gpu_type: fits none of deepops' MIG tables" in problem


def test_offline_a_type_without_a_table_refuses_mig():
    assert mig.offline_problems("disabled", "l40s") == []
    assert mig.offline_problems("unmanaged", "gb200") == []
    assert mig.offline_problems({"all": "disabled", 0: "unmanaged"}, "t4") == []
    (problem,) = mig.offline_problems({0: ["1g.24gb"]}, "gb200")
    assert problem.startswith("GPU 0: 1g.24gb needs MIG, but slurm_gpu_type 'gb200' has no MIG table in deepops")
    assert "b200, h100, h20, h200" in problem  # the types that have one


def test_offline_b200_and_h20_are_checked_against_their_tables():
    assert mig.offline_problems("all-balanced", "b200") == []
    assert mig.offline_problems({"all": ["4g.90gb", "3g.90gb"]}, "b200") == []
    assert mig.offline_problems({0: ["3g.48gb", "1g.24gb", "1g.12gb", "1g.12gb"]}, "h20") == []
    assert mig.offline_problems({3: ["7g.180gb", "1g.23gb"]}, "b200") == [
        "GPU 3: 7g.180gb, 1g.23gb need 8 compute slices, and the B200 180GB has 7"
    ]
    assert mig.offline_problems({"all": ["1g.23gb+me", "1g.23gb+me"]}, "b200") == [
        "all GPUs: 2 x 1g.23gb+me, but at most 1 fit on one B200 180GB"
    ]
    # The H20 shares the H100 NVL's small names, not its 47gb ones.
    assert mig.offline_problems({0: ["3g.47gb"]}, "h20") == [
        "GPU 0: '3g.47gb' is not a MIG profile of the H20 96GB — did you mean 3g.48gb (the same slices; "
        "3g.47gb is the H100 94GB's name)?"
    ]
    assert mig.offline_problems({0: ["1g.24gb"] * 5}, "h20") == ["GPU 0: 5 x 1g.24gb, but at most 4 fit on one H20 96GB"]


def test_offline_one_model_reports_its_own_problems():
    assert mig.offline_problems({0: ["1g.6gb+me", "2g.12gb+me"]}, "a30") == [
        "GPU 0: 1g.6gb+me, 2g.12gb+me each need the A30 24GB's one optical-flow engine (the +me profiles); only one can have it"
    ]
