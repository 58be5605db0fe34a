"""The virtual cluster's stand-in nvidia-smi, loaded as a Python module for
in-process tests, and the simulated models that can take MIG layouts."""

from __future__ import annotations

import importlib.machinery
import importlib.util

from deepops_py.virtual import gpus, payload

STAND_IN = payload.DATA_DIR / "nvidia-smi"
# Simulated model -> its MIG table's key, for the models that have one.
MIG_MODELS = {name: gpus.mig_model(name).key for name in sorted(gpus.MODELS) if gpus.mig_model(name)}


def load_stand_in(name: str, path=STAND_IN):
    """The stand-in at PATH (nvidia-smi unless given) as a module named NAME (its own copy of
    the module state)."""
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def install_node(root, spec, node: str = "gpu01") -> dict[str, str]:
    """Write NODE's simulated GPU files (as 'virtual up' installs them) under ROOT;
    return the environment that points the stand-in at them."""
    for relative, (content, mode) in payload.gpu_files(spec, node).items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode)
    (root / "dev").mkdir(exist_ok=True)
    return {
        "DEEPOPS_SIMULATED_GPUS": str(root / "etc/deepops/simulated-gpus.json"),
        "DEEPOPS_SIMULATED_GPUS_DATA": str(root / "usr/share/deepops/simulated-gpus"),
        "DEEPOPS_SIMULATED_MIG_STATE": str(root / "var/lib/deepops/simulated-gpus/mig-state.json"),
        "DEEPOPS_SIMULATED_MIG_RUN": str(root / "run/deepops/simulated-gpus"),
        "DEEPOPS_SIMULATED_DEV": str(root / "dev"),
    }
