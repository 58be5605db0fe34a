"""The virtual cluster's stand-in nvidia-smi simulates MIG as the driver does.

Expected texts are what the real nvidia-smi prints for the same requests: the
sequences of NVIDIA's MIG user guide (Getting Started with MIG) on an A100 40GB,
and the table and message formats of recorded outputs (see the stand-in's
docstring). The stand-in runs as the script it is, against the files
'virtual up' renders for a node, in a temporary directory.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import mig_profiles
from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi as facts
from gpu_fixtures import A100_MIG_XML, FIXTURES
from hypothesis import HealthCheck, given, settings
from mig_standin import MIG_MODELS, STAND_IN, install_node, load_stand_in
from hypothesis import strategies as st

from deepops_py.virtual import payload
from deepops_py.virtual.gpus import GpuSpec

BOOT = payload.DATA_DIR / "deepops-simulated-gpus"
CAPS_MAJOR = 237
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root (CI runs as root)")


class Node:
    """One simulated node's files under a temporary root, and the stand-in run against them."""

    def __init__(self, root: Path, spec: GpuSpec):
        self.root = root
        self.env = {**os.environ, **install_node(root, spec), "DEEPOPS_SIMULATED_NVIDIA_SMI": str(STAND_IN)}

    def smi(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, str(STAND_IN), *args], capture_output=True, text=True, env=self.env)
        if ok:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def out(self, *args: str) -> str:
        return self.smi(*args).stdout

    def boot(self) -> None:
        subprocess.run([sys.executable, str(BOOT)], check=True, env=self.env)

    def modes(self) -> list[str]:
        return self.out("--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader").splitlines()

    @property
    def caps(self) -> Path:
        return self.root / "dev/nvidia-caps"

    @property
    def minors_file(self) -> Path:
        return self.root / "run/deepops/simulated-gpus/mig-minors"

    @property
    def state_file(self) -> Path:
        return self.root / "var/lib/deepops/simulated-gpus/mig-state.json"


@pytest.fixture
def a100(tmp_path):
    """Two A100 40GB (the 'a100' model: MIG off as recorded), booted, MIG enabled on GPU 0."""
    node = Node(tmp_path, GpuSpec("a100", 2))
    node.boot()
    assert node.out("-i", "0", "-mig", "1") == "Enabled MIG Mode for GPU 00000000:06:00.0\nAll done.\n"
    return node


def lines(text: str) -> list[str]:
    return text.splitlines()


# --------------------------------------------------------------------------
# MIG mode


def test_mig_mode_is_set_per_gpu_and_persists(a100):
    assert a100.modes() == ["0, Enabled, Enabled", "1, Disabled, Disabled"]
    assert a100.out("--multi-instance-gpu=1") == (
        "Enabled MIG Mode for GPU 00000000:06:00.0\nEnabled MIG Mode for GPU 00000000:17:00.0\nAll done.\n"
    )
    assert a100.modes() == ["0, Enabled, Enabled", "1, Enabled, Enabled"]
    assert a100.out("-mig", "0", "-i", "1") == "Disabled MIG Mode for GPU 00000000:17:00.0\nAll done.\n"
    saved = json.loads(a100.state_file.read_text())["gpus"]
    assert (saved["0"]["current"], saved["1"]["current"]) == ("Enabled", "Disabled")


def test_gpu_without_mig_refuses(tmp_path):
    node = Node(tmp_path, GpuSpec("l40s", 1))
    node.boot()
    assert not (node.root / "dev/nvidia-caps").exists()  # no MIG-capable GPU, no capabilities
    refused = node.smi("-mig", "1", ok=False)
    assert refused.returncode == 3
    assert refused.stdout == (
        "Unable to enable MIG Mode for GPU 00000000:30:00.0: Not Supported\nTreating as warning and moving on.\n"
        "All done.\n"
    )
    listed = node.smi("mig", "-lgi", ok=False)
    assert (listed.returncode, listed.stdout) == (6, "No MIG-supported devices found.\n")
    assert node.modes() == ["0, [N/A], [N/A]"]
    assert "<current_mig>N/A</current_mig>" in node.out("-q", "-x")


def test_mig_commands_need_mig_enabled(a100):
    result = a100.smi("mig", "-i", "1", "-lgi", ok=False)
    assert (result.returncode, result.stdout) == (6, "No MIG-enabled devices found.\n")
    result = a100.smi("mig", "-lgi", ok=False)
    assert (result.returncode, result.stdout) == (6, "No GPU instances found: Not Found\n")


def test_busy_gpu_keeps_the_change_pending_until_reboot(a100):
    clients = a100.root / "run/deepops/simulated-gpus/clients"
    clients.mkdir(parents=True)
    (clients / "1-test").write_text(f"{os.getpid()}\n")  # this test process "uses" GPU 1
    assert a100.out("-i", "1", "-mig", "1") == (
        "Warning: MIG mode is in pending enable state for GPU 00000000:17:00.0:In use by another client\n"
        "00000000:17:00.0 is currently being used by one or more other processes (e.g. CUDA application or a "
        "monitoring application such as another instance of nvidia-smi). Please first kill all processes using "
        "the device and retry the command or reboot the system to make MIG mode effective.\nAll done.\n"
    )
    assert a100.modes() == ["0, Enabled, Enabled", "1, Disabled, Enabled"]
    assert "No MIG-enabled devices found." in a100.smi("mig", "-i", "1", "-lgi", ok=False).stdout
    a100.boot()
    assert a100.modes() == ["0, Enabled, Enabled", "1, Enabled, Enabled"]


# --------------------------------------------------------------------------
# GPU instances: the driver's placements and IDs (MIG user guide, A100 40GB)


@pytest.mark.parametrize(
    ("profiles", "created"),
    [
        # "nvidia-smi mig -cgi 9,19,14,19" in the guide
        ("9,19,14,19", [(2, "3g.20gb", 9), (7, "1g.5gb", 19), (4, "2g.10gb", 14), (8, "1g.5gb", 19)]),
        # "nvidia-smi mig -cgi 14,19,19,19,19,19"
        ("14,19,19,19,19,19", [(5, "2g.10gb", 14), *[(gi, "1g.5gb", 19) for gi in (13, 7, 8, 9, 10)]]),
        # seven 1g.5gb (a recorded A100-PCIE-40GB run)
        ("19,19,19,19,19,19,19", [(gi, "1g.5gb", 19) for gi in (13, 11, 12, 7, 8, 9, 10)]),
    ],
)
def test_gpu_instances_are_placed_and_numbered_as_the_driver_does(a100, profiles, created):
    assert lines(a100.out("mig", "-cgi", profiles)) == [
        f"Successfully created GPU instance ID {gi:2d} on GPU  0 using profile MIG {name} (ID {pid:2d})"
        for gi, name, pid in created
    ]


def test_the_guides_known_issue_order_fails_as_on_the_driver(a100):
    result = a100.smi("mig", "-cgi", "19,19,14,9", ok=False)
    assert result.returncode != 0
    assert result.stdout == (
        "Successfully created GPU instance ID 13 on GPU  0 using profile MIG 1g.5gb (ID 19)\n"
        "Successfully created GPU instance ID 11 on GPU  0 using profile MIG 1g.5gb (ID 19)\n"
        "Successfully created GPU instance ID  3 on GPU  0 using profile MIG 2g.10gb (ID 14)\n"
        "Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources\n"
        "Failed to create GPU instances: Insufficient Resources\n"
    )
    # what was created before the failure stays
    assert [row.split()[5] for row in lines(a100.out("mig", "-lgi")) if row.startswith("|   0")] == ["11", "13", "3"]


def test_ids_and_names_both_name_profiles(a100):
    assert a100.out("mig", "-cgi", "9,3g.20gb", "-C") == (
        "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.20gb (ID  9)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile MIG 3g.20gb (ID  2)\n"
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.20gb (ID  9)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  1 using profile MIG 3g.20gb (ID  2)\n"
    )


@pytest.mark.parametrize(
    ("setup", "request_", "reason", "code"),
    [
        ("0", "1g.5gb", "Insufficient Resources", 255),  # the 7g.40gb holds every slice
        ("20", "1g.5gb+me", "Insufficient Resources", 255),  # at most one +me (1/1 in -lgip)
        ("3g.20gb,3g.20gb", "19", "Insufficient Resources", 255),
        (None, "1g.80gb", "Invalid Argument", 2),  # not a profile of this GPU
        (None, "42", "Invalid Argument", 2),
    ],
)
def test_what_does_not_fit_is_refused(a100, setup, request_, reason, code):
    if setup:
        a100.out("mig", "-cgi", setup)
    result = a100.smi("mig", "-cgi", request_, "-C", ok=False)
    assert result.returncode == code
    assert result.stdout == (
        f"Unable to create a GPU instance on GPU  0 using profile {request_}: {reason}\n"
        f"Failed to create GPU instances: {reason}\n"
    )


# --------------------------------------------------------------------------
# A mixed layout, listed every way nvidia-smi lists it

MIXED = "3g.20gb,2g.10gb,1g.5gb,1g.5gb"


def test_mixed_layout_listings(a100):
    assert a100.out("mig", "-i", "0", "-cgi", MIXED, "-C") == (
        "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.20gb (ID  9)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  2 using profile MIG 3g.20gb (ID  2)\n"
        "Successfully created GPU instance ID  3 on GPU  0 using profile MIG 2g.10gb (ID 14)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  3 using profile MIG 2g.10gb (ID  1)\n"
        "Successfully created GPU instance ID  9 on GPU  0 using profile MIG 1g.5gb (ID 19)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  9 using profile MIG 1g.5gb (ID  0)\n"
        "Successfully created GPU instance ID 10 on GPU  0 using profile MIG 1g.5gb (ID 19)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID 10 using profile MIG 1g.5gb (ID  0)\n"
    )
    rule = "+---------------------------------------------------------+"
    assert lines(a100.out("mig", "-lgi")) == [
        rule,
        "| GPU instances:                                          |",
        "| GPU   Name               Profile  Instance   Placement  |",
        "|                            ID       ID       Start:Size |",
        "|=========================================================|",
        "|   0  MIG 1g.5gb            19        9          2:1     |", rule,
        "|   0  MIG 1g.5gb            19       10          3:1     |", rule,
        "|   0  MIG 2g.10gb           14        3          0:2     |", rule,
        "|   0  MIG 3g.20gb            9        2          4:4     |", rule,
    ]
    rule = "+--------------------------------------------------------------------+"
    assert lines(a100.out("mig", "-lci", "-gi", "9,2")) == [
        rule,
        "| Compute instances:                                                 |",
        "| GPU     GPU       Name             Profile   Instance   Placement  |",
        "|       Instance                       ID        ID       Start:Size |",
        "|         ID                                                         |",
        "|====================================================================|",
        "|   0      9       MIG 1g.5gb           0         0          0:1     |", rule,
        "|   0      2       MIG 3g.20gb          2         0          0:3     |", rule,
    ]
    listing = lines(a100.out("-L"))
    uuid0 = a100.out("-i", "0", "--query-gpu=uuid", "--format=csv,noheader").strip()
    assert listing[0] == f"GPU 0: NVIDIA A100-SXM4-40GB (UUID: {uuid0})"
    assert [line[:30] for line in listing[1:5]] == [
        "  MIG 3g.20gb     Device  0: (", "  MIG 2g.10gb     Device  1: (",
        "  MIG 1g.5gb      Device  2: (", "  MIG 1g.5gb      Device  3: (",
    ]
    assert all(line.startswith("  MIG") and "(UUID: MIG-" in line for line in listing[1:5])
    assert len({line.split("UUID: ")[1] for line in listing[1:5]}) == 4
    assert listing[5].startswith("GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-")
    assert listing == lines(a100.out("-L")), "MIG UUIDs are stable"


def test_mixed_layout_in_the_xml_reads_back_with_the_projects_parser(a100):
    a100.out("mig", "-cgi", MIXED, "-C")
    parsed = facts.gpu_facts(a100.out("-q", "-x"))
    assert parsed["mig_enabled"] is True
    gpu0, gpu1 = parsed["gpus"]
    assert gpu0["mig_mode"] == {"current": "Enabled", "pending": "Enabled"}
    assert [(d["index"], d["gpu_instance_id"], d["compute_instance_id"], d["profile"], d["multiprocessor_count"])
            for d in gpu0["mig_devices"]] == [
        (0, 2, 0, "3g.20gb", 42), (1, 3, 0, "2g.10gb", 28), (2, 9, 0, "1g.5gb", 14), (3, 10, 0, "1g.5gb", 14),
    ]
    assert (gpu1["mig_mode"], gpu1["mig_devices"]) == ({"current": "Disabled", "pending": "Disabled"}, [])
    text = a100.out("-q")
    assert "    MIG Mode\n        Current                           : Enabled" in text
    assert text.count("    MIG Device\n") == 4


def test_lgip_counts_what_still_fits_and_lgipp_lists_placements(a100):
    a100.out("mig", "-cgi", "3g.20gb")
    table = lines(a100.out("mig", "-lgip"))
    assert table[:5] == [
        "+-------------------------------------------------------------------------------+",
        "| GPU instance profiles:                                                        |",
        "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|                                Free/Total   GiB              CE    JPEG  OFA  |",
        "|===============================================================================|",
    ]
    assert table[5:8] == [
        "|   0  MIG 1g.5gb          19     4/7        4.75       No     14     0     0   |",
        "|                                                               1     0     0   |",
        "+-------------------------------------------------------------------------------+",
    ]
    free = {row.split()[3]: row.split()[5] for row in table if row.startswith("|   0")}
    assert free == {"1g.5gb": "4/7", "1g.5gb+me": "1/1", "1g.10gb": "2/4", "2g.10gb": "2/3", "3g.20gb": "1/2",
                    "4g.20gb": "1/1", "7g.40gb": "0/1"}
    assert a100.out("mig", "-lgipp") == (  # the guide's own -lgipp listing
        "GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1\n"
        "GPU  0 Profile ID 20 Placements: {0,1,2,3,4,5,6}:1\n"
        "GPU  0 Profile ID 15 Placements: {0,2,4,6}:2\n"
        "GPU  0 Profile ID 14 Placements: {0,2,4}:2\n"
        "GPU  0 Profile ID  9 Placements: {0,4}:4\n"
        "GPU  0 Profile ID  5 Placement : {0}:4\n"
        "GPU  0 Profile ID  0 Placement : {0}:8\n"
    )


# --------------------------------------------------------------------------
# Compute instances and destroying


def test_destroy_compute_instances_before_their_gpu_instance(a100):
    a100.out("mig", "-cgi", "3g.20gb,1g.5gb", "-C")
    refused = a100.smi("mig", "-dgi", ok=False)
    assert refused.returncode != 0
    assert refused.stdout == (
        "Unable to destroy GPU instance ID  2 from GPU  0: In use by another client\n"
        "Failed to destroy GPU instances: In use by another client\n"
    )
    assert a100.smi("-mig", "0", "-i", "0", ok=False).stdout == (
        "Unable to disable MIG Mode for GPU 00000000:06:00.0: In use by another client\n"
        "Terminating early due to previous errors.\n"
    )
    assert a100.out("mig", "-dci", "-gi", "7", "-ci", "0") == (
        "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  7\n"
    )
    assert a100.out("mig", "-dgi", "-gi", "7") == "Successfully destroyed GPU instance ID  7 from GPU  0\n"
    assert a100.out("mig", "-dci") == "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  2\n"
    assert a100.smi("mig", "-dci", ok=False).stdout == "No compute instances found: Not Found\n"
    assert a100.out("mig", "-dgi") == "Successfully destroyed GPU instance ID  2 from GPU  0\n"
    assert a100.smi("mig", "-lgi", ok=False).stdout == "No GPU instances found: Not Found\n"
    assert a100.out("-mig", "0", "-i", "0") == "Disabled MIG Mode for GPU 00000000:06:00.0\nAll done.\n"


def test_compute_instances_inside_a_gpu_instance(a100):
    a100.out("mig", "-cgi", "3g.20gb")
    assert a100.smi("mig", "-lci", ok=False).stdout == "No compute instances found: Not Found\n"
    assert lines(a100.out("mig", "-gi", "2", "-cci", "0,1c.3g.20gb")) == [
        f"Successfully created compute instance ID  {ci} on GPU  0 GPU instance ID  2 using profile MIG 1c.3g.20gb (ID  0)"
        for ci in (0, 1)
    ]
    refused = a100.smi("mig", "-gi", "2", "-cci", "2", ok=False)  # the whole-GI 3c no longer fits
    assert refused.returncode != 0 and "Insufficient Resources" in refused.stdout
    assert [row.split()[3:] for row in lines(a100.out("mig", "-lci")) if row.startswith("|   0")] == [
        ["MIG", "1c.3g.20gb", "0", "0", "0:1", "|"], ["MIG", "1c.3g.20gb", "0", "1", "1:1", "|"],
    ]
    devices = facts.gpu_facts(a100.out("-q", "-x"))["gpus"][0]["mig_devices"]
    assert [(d["gpu_instance_id"], d["compute_instance_id"], d["multiprocessor_count"]) for d in devices] == [
        (2, 0, 14), (2, 1, 14),
    ]


# --------------------------------------------------------------------------
# Capability minors and device nodes


def test_minors_file_is_the_drivers_table(a100):
    table = a100.minors_file.read_text().splitlines()
    assert table[:5] == ["config 1", "monitor 2", "gpu0/gi0/access 3", "gpu0/gi0/ci0/access 4", "gpu0/gi0/ci1/access 5"]
    assert table[-2:] == ["gpu31/gi14/ci6/access 4321", "gpu31/gi14/ci7/access 4322"]  # the guide's last lines
    assert len(table) == 4322
    minors = dict(line.rsplit(" ", 1) for line in table)
    assert minors["gpu3/gi3/ci3/access"] == "439" and minors["gpu6/gi11/ci7/access"] == "920"  # recorded values


@needs_root
def test_capability_nodes_follow_the_instances(a100):
    def nodes():
        found = {path.name: path.stat() for path in a100.caps.iterdir()}
        return {name: (stat.S_ISCHR(st.st_mode), os.major(st.st_rdev), os.minor(st.st_rdev)) for name, st in found.items()}

    assert nodes() == {"nvidia-cap1": (True, CAPS_MAJOR, 1), "nvidia-cap2": (True, CAPS_MAJOR, 2)}
    assert stat.S_IMODE((a100.caps / "nvidia-cap1").stat().st_mode) == 0o400
    a100.out("mig", "-i", "0", "-cgi", "1g.5gb", "-C")  # GI 13, CI 0: minors 3 + 13 * 9 = 120 and 121
    minors = dict(line.rsplit(" ", 1) for line in a100.minors_file.read_text().splitlines())
    assert (minors["gpu0/gi13/access"], minors["gpu0/gi13/ci0/access"]) == ("120", "121")
    assert set(nodes()) == {"nvidia-cap1", "nvidia-cap2", "nvidia-cap120", "nvidia-cap121"}
    assert nodes()["nvidia-cap121"] == (True, CAPS_MAJOR, 121)
    a100.out("mig", "-dci")
    assert set(nodes()) == {"nvidia-cap1", "nvidia-cap2", "nvidia-cap120"}
    a100.out("mig", "-dgi")
    assert set(nodes()) == {"nvidia-cap1", "nvidia-cap2"}


@needs_root
def test_boot_keeps_the_mode_and_clears_the_instances(a100):
    a100.out("mig", "-cgi", MIXED, "-C")
    assert len(list(a100.caps.iterdir())) == 2 + 8
    a100.boot()
    assert a100.modes() == ["0, Enabled, Enabled", "1, Disabled, Disabled"]
    assert a100.smi("mig", "-lgi", ok=False).stdout == "No GPU instances found: Not Found\n"
    assert sorted(path.name for path in a100.caps.iterdir()) == ["nvidia-cap1", "nvidia-cap2"]
    assert (a100.root / "dev/nvidia0").is_char_device() and (a100.root / "dev/nvidiactl").is_char_device()
    assert len(lines(a100.out("mig", "-cgi", MIXED, "-C"))) == 8  # the same layout fits again


# --------------------------------------------------------------------------
# The A100 80GB model: the recorded MIG capture, booted with MIG on


def test_a100_80gb_boots_in_mig_mode_and_shows_devices_like_the_capture(tmp_path):
    node = Node(tmp_path, GpuSpec("a100-80gb", 4))
    node.boot()
    assert node.modes() == [f"{index}, Enabled, Enabled" for index in range(4)]
    assert facts.gpu_facts(node.out("-q", "-x"))["gpus"][0]["mig_devices"] == []
    node.out("mig", "-i", "1", "-cgi", "1g.20gb,1g.20gb,1g.20gb,1g.20gb", "-C")
    text = node.out("-q", "-x")
    gpu = facts.gpu_facts(text)["gpus"][1]
    assert [(d["gpu_instance_id"], d["profile"], d["memory_mib"], d["multiprocessor_count"])
            for d in gpu["mig_devices"]] == [(gi, "1g.20gb", 19968, 14) for gi in (3, 4, 5, 6)]  # as recorded
    simulated = ET.fromstring(text).findall("gpu")[1].find("mig_devices/mig_device")
    recorded = ET.fromstring((FIXTURES / A100_MIG_XML).read_text()).find("gpu/mig_devices/mig_device")

    def leaves(element, path=""):
        if len(element) == 0:
            return [(path, (element.text or "").strip())]
        return [leaf for child in element for leaf in leaves(child, f"{path}/{child.tag}")]

    # Same elements in the same order; the same values (GI 3, CI 0, 14 SMs, engines, 19968 MiB,
    # BAR1 32767 MiB) except memory in use: nothing runs on a simulated GPU.
    assert [path for path, _ in leaves(simulated)] == [path for path, _ in leaves(recorded)]
    in_use = ("/fb_memory_usage/used", "/fb_memory_usage/free")
    assert [leaf for leaf in leaves(simulated) if leaf[0] not in in_use] == \
        [leaf for leaf in leaves(recorded) if leaf[0] not in in_use]
    blocks = text.split("<gpu id=")
    assert "<mig_devices>\n            None\n        </mig_devices>" in blocks[1]  # the capture's indentation
    assert "None" not in blocks[2].split("<mig_devices>")[1].split("</mig_devices>")[0]


# --------------------------------------------------------------------------
# Property: what mig_profiles.place accepts, the stand-in creates; what it rejects, the stand-in refuses


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    """The stand-in loaded once, run in-process (hundreds of examples) against one node per model."""
    module = load_stand_in("simulated_nvidia_smi")
    nodes = {}
    for model in MIG_MODELS:
        node = Node(tmp_path_factory.mktemp(model), GpuSpec(model, 1))
        nodes[model] = node
    return module, nodes


def _point_at(module, node: Node) -> None:
    """What the environment variables do for a fresh process, on the loaded module."""
    for name, attribute in (("DEEPOPS_SIMULATED_GPUS", "MARKER"), ("DEEPOPS_SIMULATED_GPUS_DATA", "DATA"),
                            ("DEEPOPS_SIMULATED_MIG_STATE", "MIG_STATE"), ("DEEPOPS_SIMULATED_MIG_RUN", "RUN_DIR"),
                            ("DEEPOPS_SIMULATED_DEV", "DEV")):
        setattr(module, attribute, node.env[name])
    module.MIG_MINORS = os.path.join(module.RUN_DIR, "mig-minors")
    module.CLIENTS_DIR = os.path.join(module.RUN_DIR, "clients")


def _run(module, node: Node, *args: str) -> tuple[int, str]:
    _point_at(module, node)
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            module.main(list(args))
        except SystemExit as exit_:
            code = exit_.code or 0
    return code, out.getvalue()


def _fresh(module, node: Node) -> None:
    """A rebooted node (no instances) with MIG on."""
    _point_at(module, node)
    with contextlib.redirect_stderr(io.StringIO()):  # not root: capability nodes are warned about
        module.boot(module.load_marker())
    _run(module, node, "-mig", "1")
    assert _run(module, node, "mig", "-lgi")[1] == "No GPU instances found: Not Found\n"


@st.composite
def layouts(draw):
    """(virtual model, MIG model, profiles) where place() accepts the profiles."""
    model = draw(st.sampled_from(sorted(MIG_MODELS)))
    mig_model = mig_profiles.MODELS[MIG_MODELS[model]]
    names = [profile.name for profile in mig_model.profiles]
    chosen: list[str] = []
    for _ in range(draw(st.integers(1, 7))):
        fitting = [name for name in names if mig_profiles.place(mig_model, [*chosen, name]) is not None]
        if not fitting:
            break
        chosen.append(draw(st.sampled_from(fitting)))
    return model, mig_model, chosen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layouts())
def test_every_layout_place_accepts_is_created_largest_first(in_process, layout):
    """Created in non-increasing placement size, an accepted layout always fits.

    In other orders it may not, on the driver as here: the MIG user guide's
    -cgi 19,19,14,9 fails although 9,19,14,19 fits (see the test above).
    """
    module, nodes = in_process
    model, mig_model, names = layout
    node = nodes[model]
    _fresh(module, node)
    size = {profile.name: profile.placement_size for profile in mig_model.profiles}
    ordered = sorted(names, key=lambda name: -size[name])
    code, out = _run(module, node, "mig", "-cgi", ",".join(ordered), "-C")
    assert code == 0, out
    assert out.count("Successfully created GPU instance") == out.count("Successfully created compute") == len(names)
    rows = [row.split() for row in _run(module, node, "mig", "-lgi")[1].splitlines() if row.startswith("|   0")]
    assert sorted(row[3] for row in rows) == sorted(names)
    spans = [(int(row[6].split(":")[0]), int(row[6].split(":")[1])) for row in rows]
    slots = [slot for start, length in spans for slot in range(start, start + length)]
    assert len(slots) == len(set(slots)), "instances overlap"
    assert len({row[5] for row in rows}) == len(rows), "GPU instance IDs repeat"
    devices = facts.gpu_facts(_run(module, node, "-q", "-x")[1])["gpus"][0]["mig_devices"]
    assert len(devices) == len(names)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layouts(), st.data())
def test_what_place_rejects_is_refused_in_any_order(in_process, layout, data):
    module, nodes = in_process
    model, mig_model, names = layout
    extra = [p.name for p in mig_model.profiles if mig_profiles.place(mig_model, [*names, p.name]) is None]
    if not extra:
        return  # nothing more can be rejected after this layout: another example
    rejected = data.draw(st.permutations([*names, data.draw(st.sampled_from(extra))]))
    node = nodes[model]
    _fresh(module, node)
    code, out = _run(module, node, "mig", "-cgi", ",".join(rejected), "-C")
    assert code != 0 and "Insufficient Resources" in out, out


# --------------------------------------------------------------------------
# the stand-in dcgm-exporter reads the same MIG state


def _exporter(a100, tmp_path, monkeypatch) -> str:
    """The stand-in dcgm-exporter's /metrics for A100's node, as Prometheus would scrape it."""
    for key in ("DEEPOPS_SIMULATED_GPUS", "DEEPOPS_SIMULATED_MIG_STATE"):
        monkeypatch.setenv(key, a100.env[key])
    module = load_stand_in("dcgm_exporter_standin", payload.DATA_DIR / "dcgm-exporter")
    counters = tmp_path / "counters.csv"
    counters.write_text("DCGM_FI_DEV_FB_USED, gauge, used\nDCGM_FI_DEV_GPU_TEMP, gauge, temperature\n"
                        "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, active\n")
    marker = json.loads(Path(a100.env["DEEPOPS_SIMULATED_GPUS"]).read_text())
    return module.render(module.parse_args(["-f", str(counters)]), marker, {})


def _series(text: str, field: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(field + "{")]


def test_the_exporter_reports_each_mig_instance_with_its_profile_and_the_gpu_once(a100, tmp_path, monkeypatch):
    a100.out("mig", "-i", "0", "-cgi", MIXED, "-C")
    text = _exporter(a100, tmp_path, monkeypatch)
    used = _series(text, "DCGM_FI_DEV_FB_USED")
    instances = sorted(re.search(r'GPU_I_PROFILE="([^"]+)",GPU_I_ID="(\d+)"', line).groups()
                       for line in used if 'gpu="0"' in line)
    assert instances == [("1g.5gb", "10"), ("1g.5gb", "9"), ("2g.10gb", "3"), ("3g.20gb", "2")]
    assert [line for line in used if 'gpu="1"' in line and "GPU_I_" not in line]  # GPU 1 is whole
    assert len(_series(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")) == 5
    # device-wide fields stay once per GPU, without instance labels
    temperature = _series(text, "DCGM_FI_DEV_GPU_TEMP")
    assert len(temperature) == 2 and not any("GPU_I_" in line for line in temperature)


def test_the_exporter_reports_no_instances_once_mig_is_off(a100, tmp_path, monkeypatch):
    a100.out("-i", "0", "-mig", "0")
    assert not any("GPU_I_" in line for line in _exporter(a100, tmp_path, monkeypatch).splitlines())


@pytest.mark.parametrize("tool", ["nvidia-smi", "dcgmi", "all_reduce_perf"])
def test_loading_a_stand_in_leaves_sigpipe_ignored(tool):
    """Tests load the stand-ins as modules: resetting SIGPIPE at import once let a later test's
    write to a closed socket kill the whole pytest run (exit 141)."""
    import signal

    try:
        load_stand_in(f"standin_{tool}", payload.DATA_DIR / tool)
        assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    finally:
        # A regression fails this test rather than the run.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def test_a_stand_in_run_as_a_command_still_ends_quietly_when_its_reader_goes(tmp_path):
    env = install_node(tmp_path, GpuSpec("h100", 8))
    done = subprocess.run(f"'{sys.executable}' '{STAND_IN}' -q | head -c1", shell=True, capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
