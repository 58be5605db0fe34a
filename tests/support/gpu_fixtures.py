"""The recorded nvidia-smi captures the GPU tests read, by name, in one place
(their origins: deepops_py/virtual/fixtures/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "deepops_py" / "virtual" / "fixtures"

H100_XML = "h100-sxm5-80gb-x8-driver580.xml"
A100_NOMIG_XML = "a100-sxm4-40gb-x1-nomig-driver570.xml"
A100_MIG_XML = "a100-sxm4-80gb-mig-4x1g20gb-driver535.xml"
L40S_XML = "l40s-x1-driver595.xml"
B200_TOPO = "topo-hgx-b200-x8-8nic-2numa-gke-a4.txt"
PCIE_TOPO = "topo-pcie-rtx6000ada-x4-4nic-2numa-asus-esc8000a-e12.txt"
DGX1_TOPO = "topo-dgx1-v100-x8-4nic-2socket-legacy.txt"
