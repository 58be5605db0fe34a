"""The virtual cluster's stand-in nvidia-smi, loaded as a Python module for
in-process tests, and the simulated models that can take MIG layouts."""

from __future__ import annotations

import importlib.machinery
import importlib.util

from deepops_py.virtual import gpus, payload

STAND_IN = payload.DATA_DIR / "nvidia-smi"
# Simulated model -> its MIG table's key, for the models that have one.
MIG_MODELS = {name: gpus.mig_model(name).key for name in sorted(gpus.MODELS) if gpus.mig_model(name)}


def load_stand_in(name: str):
    """The stand-in as a module named NAME (its own copy of the module state)."""
    loader = importlib.machinery.SourceFileLoader(name, str(STAND_IN))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
