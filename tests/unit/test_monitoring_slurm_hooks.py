"""The seams between the monitoring roles and the roles around them, read from
the roles' own files: slurm.conf's Prolog/Epilog globs reach the directories
where dcgm_exporter installs its job-mapping scripts, the slurm role creates
them on compute nodes, and DCGM itself stays the nvidia_dcgm role's.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"


def _yaml(path: str):
    return yaml.safe_load((ROLES / path).read_text())


def _resolve(variables: dict, value: str) -> str:
    """Render VALUE with VARIABLES until no template is left (role vars refer to each other)."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    for _ in range(5):
        if "{{" not in value:
            return value
        value = env.from_string(value).render(variables)
    raise AssertionError(f"unresolved: {value}")


def slurm_vars() -> dict:
    return {**_yaml("slurm/defaults/main.yml"), **_yaml("slurm/vars/main.yml")}


def test_slurm_conf_runs_every_script_in_the_prolog_and_epilog_directories():
    variables = slurm_vars()
    defaults = variables["_slurm_conf_defaults"]
    assert _resolve(variables, defaults["Prolog"]) == "/etc/slurm/prolog.d/*"
    assert _resolve(variables, defaults["Epilog"]) == "/etc/slurm/epilog.d/*"


def test_dcgm_exporter_installs_its_scripts_where_slurm_looks():
    slurm = slurm_vars()
    exporter = _yaml("dcgm_exporter/defaults/main.yml")
    assert exporter["dcgm_exporter_slurm_prolog_dir"] == _resolve(slurm, slurm["_slurm_prolog_dir"])
    assert exporter["dcgm_exporter_slurm_epilog_dir"] == _resolve(slurm, slurm["_slurm_epilog_dir"])


def test_slurm_creates_the_directories_on_compute_nodes():
    tasks = _yaml("slurm/tasks/compute.yml")
    configure = next(task for task in tasks if task.get("name") == "Slurm | Configure slurmd")
    [files_task] = [task for task in configure["block"] if task.get("name", "").startswith("Slurm | Directories, drop-in scripts and configuration of slurmd")]
    entries = files_task["deepops.cluster.managed_files"]["files"]
    paths = [entry["path"] for entry in entries]
    for directory in ("{{ _slurm_prolog_dir }}", "{{ _slurm_epilog_dir }}"):
        assert {"path": directory, "state": "directory"} in entries
        # An empty glob fails the prolog and drains the node (Slurm 22.05): a no-op keeps it matching,
        # written after its directory (managed_files applies entries in order).
        script = f"{directory}/00-deepops-noop"
        [noop] = [entry for entry in entries if entry["path"] == script]
        assert noop["mode"] == "0755" and noop["content"] == "{{ _slurm_noop_script }}"
        assert paths.index(script) > paths.index(directory)
    content = slurm_vars()["_slurm_noop_script"]
    assert content.startswith("#!/bin/sh\n") and "exit 0" in content


def test_a_site_can_still_replace_the_prolog():
    variables = slurm_vars()
    merged = {**variables["_slurm_conf_defaults"], **{"Prolog": "/site/prolog.sh"}}
    assert merged["Prolog"] == "/site/prolog.sh" and "Epilog" in merged


def test_dcgm_exporter_installs_only_the_exporter():
    defaults = _yaml("dcgm_exporter/defaults/main.yml")
    assert defaults["dcgm_exporter_packages"] == ["datacenter-gpu-manager-exporter"]
    assert not [name for name in defaults["dcgm_exporter_packages"] if name.startswith("datacenter-gpu-manager-4")]
    # No second copy of NVIDIA's repository under another keyring unless asked for.
    assert defaults["dcgm_exporter_cuda_repo_url"] == ""
