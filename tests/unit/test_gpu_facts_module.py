"""The nvidia_gpu_facts module run as Ansible runs it (ansible-playbook, local).

Stand-in nvidia-smi scripts print real captures. One playbook runs the module
once per case and saves every registered result to a JSON file, so nothing
parses Ansible's text output; a second run of the same playbook uses --check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpu_fixtures import A100_MIG_XML, A100_NOMIG_XML, B200_TOPO, FIXTURES, H100_XML, L40S_XML, PCIE_TOPO

ROOT = Path(__file__).resolve().parents[2]
BROKEN_XML = '<?xml version="1.0" ?>\n<nvidia_smi_log>\n<gpu id="00000000:53:00.0">\n'
DRIVER_ERROR = "NVIDIA-SMI has failed: could not communicate with the NVIDIA driver."

# Placeholders in module args, made paths under the test's directory by _build.
MINORS, NO_MINORS = "<mig-minors>", "<no-mig-minors>"
# The driver's MIG minors lines for the capture's GPU (minor number 1): NVIDIA's numbering,
# 3 + 135 per GPU minor + 9 per GPU instance, + 1 + the compute instance.
MINORS_TEXT = "config 1\nmonitor 2\n" + "".join(
    f"gpu1/gi{gi}/access {138 + 9 * gi}\n" + "".join(f"gpu1/gi{gi}/ci{ci}/access {139 + 9 * gi + ci}\n" for ci in range(8))
    for gi in range(15)
)

# case -> (XML fixture or literal, topo fixture, exit code of -q -x, module args)
CASES: dict[str, tuple[str | None, str | None, int, dict[str, Any]]] = {
    "h100": (H100_XML, B200_TOPO, 0, {}),
    "l40s": (L40S_XML, PCIE_TOPO, 0, {}),
    "on_path": (A100_NOMIG_XML, None, 0, {"topology": False}),
    "absent": (None, None, 0, {}),
    "malformed": (BROKEN_XML, None, 0, {}),
    "driver_error": (None, None, 9, {}),
    "topo_fails": (H100_XML, None, 0, {}),
    "truncated": (A100_MIG_XML, None, 0, {"topology": False}),
    # The capture's 4x 1g.20gb with a MIG minors file, and with none where the option points.
    "mig_minors": (A100_MIG_XML, None, 0, {"topology": False, "mig_minors_path": MINORS}),
    "mig_no_minors": (A100_MIG_XML, None, 0, {"topology": False, "mig_minors_path": NO_MINORS}),
}

TASK = """\
    - name: GPU | Gather facts ({case})
      deepops.cluster.nvidia_gpu_facts: {args}
      register: gpu_{case}
      ignore_errors: true

    - name: GPU | Keep the fact ({case})
      ansible.builtin.set_fact:
        fact_{case}: "{{{{ ansible_facts['deepops_gpus'] | default(None) }}}}"
      when: gpu_{case} is succeeded
"""


def _script(path: Path, xml: Path | None, topo: Path | None, xml_rc: int) -> Path:
    """Write an nvidia-smi that prints captures and rejects unexpected arguments."""
    xml_cmd = f"cat '{xml}'" if xml else f"echo '{DRIVER_ERROR}' >&2"
    topo_cmd = f"cat '{topo}'" if topo else "echo 'topo not supported' >&2; exit 4"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$*" = "-q -x" ]; then {xml_cmd}; exit {xml_rc}; fi\n'
        f'if [ "$*" = "topo -m" ]; then {topo_cmd}; exit 0; fi\n'
        'echo "unexpected arguments: $*" >&2; exit 3\n'
    )
    path.chmod(0o755)
    return path


def _source(workdir: Path, case: str, value: str | None) -> Path | None:
    if value is None:
        return None
    if value.lstrip().startswith("<"):
        literal = workdir / f"{case}.xml"
        literal.write_text(value)
        return literal
    return FIXTURES / value


def _build(workdir: Path) -> tuple[Path, set[str]]:
    """Write stand-ins and the playbook; cases whose fixture is missing are left out."""
    tasks, missing = [], set()
    for case, (xml, topo, xml_rc, extra) in CASES.items():
        xml_path, topo_path = _source(workdir, case, xml), _source(workdir, case, topo)
        if any(path is not None and not path.is_file() for path in (xml_path, topo_path)):
            missing.add(case)
            continue
        script = _script(workdir / case / "nvidia-smi", xml_path, topo_path, xml_rc)
        args = dict(extra)
        if args.get("mig_minors_path") == MINORS:
            (workdir / "mig-minors").write_text(MINORS_TEXT)
            args["mig_minors_path"] = str(workdir / "mig-minors")
        elif args.get("mig_minors_path") == NO_MINORS:
            args["mig_minors_path"] = str(workdir / "nowhere" / "mig-minors")
        if case == "absent":
            args["nvidia_smi_path"] = str(workdir / "nowhere" / "nvidia-smi")
        elif case != "on_path":  # found through PATH, see _run
            args["nvidia_smi_path"] = str(script)
        tasks.append(TASK.format(case=case, args=json.dumps(args)))
    saved = ", ".join(f"'{case}': [gpu_{case}, fact_{case} | default(None)]" for case in CASES)
    playbook = workdir / "play.yml"
    playbook.write_text(
        "- name: Run nvidia_gpu_facts once per case\n"
        "  hosts: localhost\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        + "".join(tasks)
        + "    - name: GPU | Save the results for the test\n"
        "      ansible.builtin.copy:\n"
        f"        content: \"{{{{ {{{saved}}} | to_json }}}}\"\n"
        f"        dest: \"{{{{ playbook_dir }}}}/results{{{{ '-check' if ansible_check_mode else '' }}}}.json\"\n"
        "        mode: \"0644\"\n"
        "      check_mode: false\n"
    )  # fmt: skip
    for case in missing:  # keep the saved dict well-defined
        playbook.write_text(playbook.read_text().replace(f"gpu_{case}, ", "None, "))
    return playbook, missing


def _run(playbook: Path, *, check: bool) -> dict[str, Any]:
    workdir = playbook.parent
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_LOCAL_TEMP": str(workdir / "ansible-tmp"),
        "PATH": f"{workdir / 'on_path'}:{os.environ['PATH']}",
    }
    command = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        *("-i", "localhost,", "-c", "local"),
        *("-e", f"ansible_python_interpreter={sys.executable}"),
        str(playbook),
        *(["--check"] if check else []),
    ]
    proc = subprocess.run(
        command, env=env, cwd=workdir, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    name = "results-check.json" if check else "results.json"
    return json.loads((workdir / name).read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    playbook, missing = _build(tmp_path_factory.mktemp("gpu_facts"))
    return {
        "normal": _run(playbook, check=False),
        "check": _run(playbook, check=True),
        "missing": missing,
    }


def outcome(runs: dict[str, Any], case: str, mode: str = "normal") -> tuple[dict, dict | None]:
    if case in runs["missing"]:
        pytest.fail(f"a fixture of case {case!r} is missing from {FIXTURES}")
    result, fact = runs[mode][case]
    return result, fact


def test_h100_with_topology(runs):
    result, facts = outcome(runs, "h100")
    assert result["changed"] is False
    assert not result.get("failed")
    assert not result.get("warnings")
    assert result["ansible_facts"]["deepops_gpus"] == facts  # set as a host fact
    assert (facts["present"], facts["count"], facts["attached_gpus"]) == (True, 8, 8)
    assert (facts["driver_version"], facts["cuda_version"]) == ("580.105.08", "13.0")
    assert (facts["types"], facts["by_type"]) == (["h100"], {"h100": 8})
    assert (facts["nvlink"], facts["nvswitch"], facts["mig_enabled"]) == (True, True, False)
    assert [gpu["numa_node"] for gpu in facts["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert facts["gpus"][7]["cpu_affinity"] == "56-111,168-223"
    assert facts["gpus"][5]["pci_bus_id"] == "00000000:A8:00.0"
    assert facts["gpus"][5]["device"] == "/dev/nvidia5"
    assert facts["gpus"][0]["power_limits_w"]["max"] == 700.0


def test_check_mode_returns_the_same_facts(runs):
    for case in ("h100", "l40s", "absent"):
        assert outcome(runs, case, "check")[1] == outcome(runs, case)[1], case
    assert outcome(runs, "l40s", "check")[1]["types"] == ["l40s"]


def test_found_on_path_by_default(runs):
    _, facts = outcome(runs, "on_path")
    assert facts["present"] is True
    assert facts["gpus"][0]["pci_bus_id"] == "00000000:06:00.0"
    assert facts["topology"]["available"] is False


def test_host_without_nvidia_smi(runs):
    result, facts = outcome(runs, "absent")
    assert not result.get("failed")
    assert (facts["present"], facts["count"], facts["gpu_count"], facts["gpus"]) == (
        False,
        0,
        0,
        [],
    )


def test_malformed_xml_fails_cleanly(runs):
    result, facts = outcome(runs, "malformed")
    assert result["failed"] is True
    assert "malformed XML" in result["msg"]
    # ansible-core 2.19 adds an "exception" key to every failure; a crash would
    # show up as module_stderr or a real traceback.
    assert "module_stderr" not in result
    assert "Traceback" not in json.dumps(result)
    assert facts is None


def test_nvidia_smi_error_fails_with_its_message(runs):
    result, _ = outcome(runs, "driver_error")
    assert result["failed"] is True
    assert "rc=9" in result["msg"]
    assert DRIVER_ERROR in result["msg"]


def test_failing_topo_only_warns(runs):
    result, facts = outcome(runs, "topo_fails")
    assert not result.get("failed")
    assert any("topo -m" in warning for warning in result["warnings"])
    assert facts["count"] == 8
    assert facts["nvswitch"] is True  # still known from the fabric state
    assert all(gpu["numa_node"] is None for gpu in facts["gpus"])


def test_truncated_capture_warns_but_succeeds(runs):
    result, facts = outcome(runs, "truncated")
    assert not result.get("failed")
    assert (facts["attached_gpus"], facts["count"]) == (4, 1)
    assert any("attached_gpus=4" in warning for warning in result["warnings"])
    assert [device["profile"] for device in facts["gpus"][0]["mig_devices"]] == ["1g.20gb"] * 4


def test_mig_devices_get_their_device_files_from_the_minors_file(runs):
    result, facts = outcome(runs, "mig_minors")
    assert not result.get("failed")
    devices = facts["gpus"][0]["mig_devices"]
    assert [(device["profile"], device["gpu_instance_id"], device["compute_instance_id"]) for device in devices] == [
        ("1g.20gb", gi, 0) for gi in (3, 4, 5, 6)
    ]
    # The parent is /dev/nvidia1 (minor number 1, index 0), and so are the capabilities: gpu1/...
    assert [device["device_files"] for device in devices] == [
        ["/dev/nvidia1", f"/dev/nvidia-caps/nvidia-cap{138 + 9 * gi}", f"/dev/nvidia-caps/nvidia-cap{139 + 9 * gi}"]
        for gi in (3, 4, 5, 6)
    ]
    assert (facts["mig_device_files_known"], facts["mig_problems"], facts["gres_by_type"]) == (True, [], {"1g.20gb": 4})
    assert facts["mig_minors_path"].endswith("/mig-minors")
    assert outcome(runs, "mig_minors", "check")[1] == facts


def test_missing_minors_file_is_reported_in_the_facts_not_a_failure(runs):
    result, facts = outcome(runs, "mig_no_minors")
    assert not result.get("failed")
    assert all(device["device_files"] is None for device in facts["gpus"][0]["mig_devices"])
    assert facts["mig_device_files_known"] is False
    assert facts["mig_problems"] == [
        f"the MIG minors file {facts['mig_minors_path']} was not read, so the capability device files of the "
        "MIG devices on GPU 0 are unknown"
    ]
    assert facts["mig_minors_path"].endswith("/nowhere/mig-minors")


def test_hosts_without_mig_devices_never_read_the_minors_file(runs):
    _, facts = outcome(runs, "h100")
    assert (facts["mig_minors_path"], facts["mig_device_files_known"], facts["mig_problems"]) == (None, True, [])
    assert facts["gres_by_type"] == {"h100": 8}
