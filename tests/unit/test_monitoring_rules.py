"""Alert rules of roles/prometheus: promtool check rules, and a promtool test rules
case that fires and one that does not for every alert.

promtool comes with Debian's prometheus package (scripts/setup.sh installs it);
a missing promtool fails these tests, it does not skip them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "prometheus"


def render_rules(overrides: dict | None = None) -> str:
    """Render the rules template the way Ansible does (its #jinja2 header sets the delimiters)."""
    text = (ROLE / "templates" / "deepops.rules.yml.j2").read_text()
    header, _, body = text.partition("\n")
    options = dict(re.findall(r"(\w+): '?([^',]+)'?", header.removeprefix("#jinja2:")))
    env = jinja2.Environment(
        variable_start_string=options["variable_start_string"], variable_end_string=options["variable_end_string"],
        block_start_string=options["block_start_string"], block_end_string=options["block_end_string"],
        trim_blocks=options.get("trim_blocks") == "True", lstrip_blocks=options.get("lstrip_blocks") == "True",
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
    )
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(overrides or {})
    return env.from_string(body).render(**variables)


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool not found: install Debian's prometheus package (scripts/setup.sh does)"
    return path


def rules() -> dict[str, dict]:
    return {rule["alert"]: rule for group in yaml.safe_load(render_rules())["groups"] for rule in group["rules"]}


def _go_value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _expand(template: str, labels: dict, value: float) -> str:
    """Prometheus' templating, for the forms the rules use."""
    text = template.replace("{{ $value | humanizePercentage }}", _go_value(value * 100) + "%")
    text = text.replace("{{ $value }}", _go_value(value))
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), text)


NODE = {"node": "gpu01", "instance": "gpu01:9100", "job": "node", "cluster_role": "compute"}
DCGM = {"node": "gpu01", "instance": "gpu01:9400", "job": "dcgm", "gpu": "3", "UUID": "GPU-x", "modelName": "H100"}
SLURM = {"node": "ctl01", "instance": "ctl01:9341", "job": "slurm"}


def series(name: str, labels: dict, values: str) -> dict:
    body = ", ".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


# alert -> (firing case, quiet case); a case: (input series, eval_time, expected [(labels, $value)]).
# The for: durations are the role defaults: node 2m, target 3m, GPU 5m, Slurm 5m, disk 10m.
CASES = {
    "NodeDown": (
        ([series("up", NODE, "1 1 0x10")], "5m", [(NODE, 0)]),
        ([series("up", NODE, "1 1 0 0 1x10")], "5m", []),  # down 2 minutes, back before for: 2m ends
    ),
    "TargetDown": (
        ([series("up", SLURM, "0x10")], "5m", [(SLURM, 0)]),
        ([series("up", SLURM, "1x10"), series("up", NODE, "0x10")], "5m", []),  # node targets are NodeDown's
    ),
    "GPUCriticalXID": (
        ([series("DCGM_FI_DEV_XID_ERRORS", DCGM, "0 0 79x5")], "3m", [(DCGM, 79)]),
        ([series("DCGM_FI_DEV_XID_ERRORS", DCGM, "0 0 13x5")], "3m", []),  # XID 13: application error
    ),
    "GPUDoubleBitECCError": (
        ([series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", DCGM, "0 2x5")], "2m", [(DCGM, 2)]),
        ([series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", DCGM, "0x5")], "2m", []),
    ),
    "GPURowRemapFailure": (
        ([series("DCGM_FI_DEV_ROW_REMAP_FAILURE", DCGM, "0 1x5")], "2m", [(DCGM, 1)]),
        ([series("DCGM_FI_DEV_ROW_REMAP_FAILURE", DCGM, "0x5")], "2m", []),
    ),
    "GPUOverTemperature": (
        ([series("DCGM_FI_DEV_GPU_TEMP", DCGM, "90x10")], "6m", [(DCGM, 90)]),
        ([series("DCGM_FI_DEV_GPU_TEMP", DCGM, "90 90 90 60 90 90 90 90")], "6m", []),  # dipped: for: restarts
    ),
    "GPUThermalThrottling": (
        ([series("DCGM_FI_DEV_THERMAL_VIOLATION", DCGM, "0+60000000x20")], "12m", [(DCGM, 1000000)]),
        ([series("DCGM_FI_DEV_THERMAL_VIOLATION", DCGM, "500x20")], "12m", []),  # counter not moving
    ),
    "GPUPowerBrakeThrottling": (
        ([series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", DCGM, "136x10")], "6m", [(DCGM, 1)]),  # 0x80 | 0x08
        ([series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", DCGM, "64x10")], "6m", []),  # 0x40 thermal slowdown only
    ),
    "SlurmNodeDrainedOrDown": (
        ([series("slurm_node_state", {**SLURM, "node": "gpu02", "state": "drained"}, "1x10")], "6m",
         [({**SLURM, "node": "gpu02", "state": "drained"}, 1)]),
        ([series("slurm_node_state", {**SLURM, "node": "gpu02", "state": "idle"}, "1x10")], "6m", []),
    ),
    "SlurmctldUnreachable": (
        ([series("slurm_slurmctld_up", {**SLURM, "host": "ctl01", "role": "primary"}, "0x10")], "6m",
         [({**SLURM, "host": "ctl01", "role": "primary"}, 0)]),
        ([series("slurm_slurmctld_up", {**SLURM, "host": "ctl01", "role": "primary"}, "1x10")], "6m", []),
    ),
    "SlurmdbdUnreachable": (
        ([series("slurm_slurmdbd_up", SLURM, "0x10")], "6m", [(SLURM, 0)]),
        ([series("slurm_slurmdbd_up", SLURM, "1x10")], "6m", []),
    ),
    "ControllerDiskNearlyFull": (
        (
            [
                series("node_filesystem_avail_bytes", {**NODE, "node": "ctl01", "cluster_role": "controller",
                                                       "mountpoint": "/var", "fstype": "ext4", "device": "sda2"}, "5x20"),
                series("node_filesystem_size_bytes", {**NODE, "node": "ctl01", "cluster_role": "controller",
                                                      "mountpoint": "/var", "fstype": "ext4", "device": "sda2"}, "100x20"),
            ],
            "12m",
            [({k: v for k, v in {**NODE, "node": "ctl01", "cluster_role": "controller", "mountpoint": "/var",
                                  "fstype": "ext4", "device": "sda2"}.items()}, 0.05)],
        ),
        (
            [  # a compute node's full disk, and a controller with room
                series("node_filesystem_avail_bytes", {**NODE, "mountpoint": "/var", "fstype": "ext4", "device": "sda2"}, "5x20"),
                series("node_filesystem_size_bytes", {**NODE, "mountpoint": "/var", "fstype": "ext4", "device": "sda2"}, "100x20"),
                series("node_filesystem_avail_bytes", {**NODE, "node": "ctl01", "cluster_role": "controller",
                                                       "mountpoint": "/", "fstype": "ext4", "device": "sda1"}, "50x20"),
                series("node_filesystem_size_bytes", {**NODE, "node": "ctl01", "cluster_role": "controller",
                                                      "mountpoint": "/", "fstype": "ext4", "device": "sda1"}, "100x20"),
            ],
            "12m",
            [],
        ),
    ),
}


def build_tests(all_rules: dict[str, dict]) -> dict:
    tests = []
    for alert, cases in CASES.items():
        rule = all_rules[alert]
        for inputs, eval_time, expected in cases:
            exp_alerts = []
            for labels, value in expected:
                got = {key: val for key, val in labels.items() if key != "__name__"}
                if alert == "ControllerDiskNearlyFull":
                    pass  # division keeps the labels of both sides (same label set)
                full = {**got, **{k: v for k, v in rule.get("labels", {}).items()}}
                annotations = {key: _expand(text, full, value) for key, text in rule["annotations"].items()}
                exp_alerts.append({"exp_labels": full, "exp_annotations": annotations})
            tests.append({
                "name": f"{alert} {'fires' if expected else 'stays quiet'}",
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": exp_alerts}],
            })
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}


def test_rules_pass_promtool_check(tmp_path):
    (tmp_path / "rules.yml").write_text(render_rules())
    proc = subprocess.run([promtool(), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(rules())} rules found" in proc.stdout


def test_every_alert_has_a_firing_and_a_quiet_case():
    assert set(CASES) == set(rules()), "every alert rule needs promtool test cases, and every case a rule"
    for alert, (firing, quiet) in CASES.items():
        assert firing[2] and not quiet[2], alert


def test_every_alert_carries_node_gpu_severity_and_a_runbook_hint():
    for alert, rule in rules().items():
        labels, annotations = rule.get("labels", {}), rule["annotations"]
        assert rule["labels"]["severity"] in ("critical", "warning"), alert
        assert "gpu" in labels or "DCGM_" in rule["expr"], f"{alert}: no gpu label (static or from DCGM series)"
        assert "{{ $labels.node }}" in annotations["summary"], alert
        assert "\n" not in annotations["runbook"].strip() and annotations["runbook"], alert


def test_promtool_test_rules(tmp_path):
    (tmp_path / "rules.yml").write_text(render_rules())
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(build_tests(rules()), sort_keys=False))
    proc = subprocess.run([promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_test_rules_can_fail(tmp_path):
    """A firing expectation against the quiet input must fail: the harness itself is not vacuous."""
    tests = build_tests(rules())
    for test in tests["tests"]:
        if test["name"] == "NodeDown stays quiet":
            test["alert_rule_test"][0]["exp_alerts"] = [{"exp_labels": {**NODE, "severity": "critical", "gpu": "all"}}]
    (tmp_path / "rules.yml").write_text(render_rules())
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = subprocess.run([promtool(), "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode != 0


@pytest.mark.parametrize("xid", [48, 63, 64, 74, 79, 92, 94, 95])
def test_issue_xids_are_critical(xid):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert xid in defaults["prometheus_alert_critical_xids"]
    assert f"(DCGM_FI_DEV_XID_ERRORS == {xid})" in rules()["GPUCriticalXID"]["expr"]


def test_short_for_durations_render(tmp_path):
    """The integration test uses short for: values; they must render valid rules too."""
    text = render_rules({"prometheus_alert_node_down_for": "15s", "prometheus_alert_target_down_for": "15s"})
    (tmp_path / "rules.yml").write_text(text)
    proc = subprocess.run([promtool(), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
