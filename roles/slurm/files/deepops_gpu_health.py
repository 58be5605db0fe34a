#!/usr/bin/python3
"""deepops GPU health check: Slurm's HealthCheckProgram on compute nodes.

Installed by the slurm role (roles/slurm/tasks/health.yml) as
/usr/local/sbin/deepops-gpu-health with its settings in
/etc/deepops/gpu-health.json; slurmd runs it every HealthCheckInterval
seconds. Standalone (Python 3.10+, standard library only): nodes cannot import
the collection.

What it checks on this node:
  driver       nvidia-smi -q -x answers within the timeout and exits 0
  count        the GPUs nvidia-smi shows (a GPU in MIG mode counts its MIG
               devices) against the node's GPU GRES in Slurm
  ecc          no uncorrectable ECC error since the driver loaded (volatile counters)
  row remap    no row remapping pending, none failed
  xid          no critical XID (the configured list) in the kernel log since the
               last check; an XID stays a fault until the node reboots or an admin
               runs `deepops-gpu-health --clear-xids` after resetting the GPU
  persistenced nvidia-persistenced.service active where it is installed and
               enabled; "not applicable" where it is not (no driver package, as on
               the virtual cluster, or disabled on purpose)

What it does with Slurm (scontrol, as root):
  - a fault on a node not drained: drain it, reason "deepops-health: GPU <i>
    (<pci>): <fault>; ..."; for a critical fault (critical XID, uncorrectable
    ECC, row remap failure, driver not answering) also requeue the node's running
    batch jobs that allow requeue, when "requeue" is on
  - healthy again, drained with a "deepops-health:" reason: resume it
  - drained for any other reason (an admin, deepops' MIG changes, deepops validate
    --drain-failed): its drain and reason are left as they are, whatever it finds
    (a critical fault still requeues its jobs, as above)

Options: --check (print what it finds and would do, change nothing), --json,
--clear-xids (forget the XIDs seen in this boot), --config FILE.
Exit code: 0 healthy, 1 a fault was found, 2 the check could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass

REASON_PREFIX = "deepops-health:"
REASON_MAX = 200  # keep Slurm's reason readable in sinfo -R
DEFAULT_CONFIG = "/etc/deepops/gpu-health.json"
DEFAULTS = {
    "node": "",  # Slurm's NodeName of this host; empty: the short host name
    "nvidia_smi": "nvidia-smi",
    "scontrol": "scontrol",
    "squeue": "squeue",
    "timeout": 20,  # seconds for nvidia-smi (slurmd kills the check after 60 s)
    "critical_xids": [48, 64, 74, 79, 94, 95, 119, 120, 140],
    "requeue": True,
    "kernel_log": "",  # empty: the kernel log of this boot through journalctl -k; else a file of kernel log lines
    "persistenced_unit": "nvidia-persistenced.service",
    "state_file": "/var/lib/deepops/gpu-health/state.json",
}
XID_LINE = re.compile(r"NVRM: Xid \(PCI:(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+),?\s*(?P<text>.*)")
BOOT_ID = "/proc/sys/kernel/random/boot_id"


# --------------------------------------------------------------------------
# Parsing (pure)


@dataclass
class Gpu:
    index: int
    pci: str  # normalised: 0000:18:00.0
    name: str
    devices: int  # what Slurm's GRES counts for it: 1, or its MIG devices in MIG mode
    ecc_uncorrectable: int | None  # volatile; None: not reported
    remap_pending: bool
    remap_failure: bool


@dataclass
class Fault:
    gpu: str  # "GPU 0 (0000:18:00.0)", or "" for the node as a whole
    text: str
    critical: bool

    def describe(self) -> str:
        return f"{self.gpu}: {self.text}" if self.gpu else self.text


@dataclass
class SlurmNode:
    drained: bool
    reason: str
    gres_gpus: int


@dataclass
class Decision:
    action: str  # "drain", "update-reason", "resume", "none"
    reason: str = ""
    requeue: bool = False
    note: str = ""


def normalize_pci(value: str) -> str:
    """'00000000:18:00.0', '0000:18:00' (kernel log) -> '0000:18:00.0'."""
    text = value.strip().lower()
    match = re.fullmatch(r"(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?", text)
    if not match:
        return text
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function or '0'}"


def _int_text(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _ecc_uncorrectable(gpu: ET.Element) -> int | None:
    """Sum of the volatile uncorrectable counters: dram_uncorrectable, sram_uncorrectable[_parity|_secded]
    (drivers 535+), double_bit/total (older drivers). None when none is a number (ECC off or N/A)."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    numbers = []
    for child in volatile:
        if "uncorrectable" in child.tag:
            numbers.append(_int_text(child.text))
        elif child.tag == "double_bit":  # legacy layout: <double_bit><total>N</total>...
            numbers.append(_int_text(child.findtext("total")))
    found = [number for number in numbers if number is not None]
    return sum(found) if found else None


def parse_gpus(xml_text: str) -> list[Gpu]:
    root = ET.fromstring(xml_text)
    gpus = []
    for position, gpu in enumerate(root.findall("gpu")):
        index = _int_text(gpu.findtext("minor_number"))
        pci = gpu.findtext("pci/pci_bus_id") or gpu.get("id") or ""
        mig_mode = (gpu.findtext("mig_mode/current_mig") or "").strip()
        mig_devices = gpu.findall("mig_devices/mig_device")
        remap = gpu.find("remapped_rows")
        gpus.append(Gpu(
            index=position if index is None else index,
            pci=normalize_pci(pci),
            name=(gpu.findtext("product_name") or "").strip(),
            devices=len(mig_devices) if mig_mode == "Enabled" else 1,
            ecc_uncorrectable=_ecc_uncorrectable(gpu),
            remap_pending=remap is not None and (remap.findtext("remapped_row_pending") or "").strip() == "Yes",
            remap_failure=remap is not None and (remap.findtext("remapped_row_failure") or "").strip() == "Yes",
        ))
    return gpus


def parse_gres_gpus(gres: str) -> int:
    """GPUs in a Gres= value: 'gpu:h100:8(S:0-1)', 'gpu:1g.10gb:2,gpu:a100:3', 'gpu:4', '(null)'."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres or ""):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def parse_slurm_node(oneliner: str) -> SlurmNode:
    """`scontrol show node NAME --oneliner`: its State= flags, Reason= and Gres=."""
    state = re.search(r"\bState=(\S+)", oneliner)
    gres = re.search(r"\bGres=(\S+)", oneliner)
    # Slurm shows a reason with its setter: "Reason=TEXT [root@2026-12-02T05:00:01]".
    reason = re.search(r"\bReason=(.*?) \[[^\]]*@[^\]]*\]", oneliner) or re.search(r"\bReason=(.*)$", oneliner)
    flags = set(re.split(r"[+*]", state.group(1))) if state else set()
    return SlurmNode(
        drained=bool(flags & {"DRAIN", "DRAINED", "DRAINING"}),
        reason=(reason.group(1).strip() if reason else "").removesuffix("(null)").strip(),
        gres_gpus=parse_gres_gpus(gres.group(1) if gres else ""),
    )


def parse_xids(lines, critical: set[int]) -> list[dict]:
    """Critical XIDs in kernel log lines: [{pci, xid, text}]."""
    found = []
    for line in lines:
        match = XID_LINE.search(line)
        if match and int(match.group("xid")) in critical:
            # The driver's "pid=..., name=..., " prefix names the process, not the fault.
            text = re.sub(r"^(?:(?:pid|name)=[^,]*,\s*)+", "", match.group("text").strip())
            found.append({"pci": normalize_pci(match.group("pci")), "xid": int(match.group("xid")), "text": text[:80]})
    return found


def gpu_label(gpus: list[Gpu], pci: str) -> str:
    gpu = next((gpu for gpu in gpus if gpu.pci == pci), None)
    return f"GPU {gpu.index} ({pci})" if gpu else f"GPU {pci}"


def find_faults(gpus: list[Gpu] | None, driver_error: str, gres_gpus: int, xids: list[dict],
                persistenced: str) -> list[Fault]:
    """Every fault on the node. GPUS None: nvidia-smi gave no answer (DRIVER_ERROR says why).
    PERSISTENCED: 'ok', 'not applicable: ...' or what is wrong with it."""
    faults: list[Fault] = []
    if gpus is None:
        if gres_gpus or driver_error != "nvidia-smi not found":
            faults.append(Fault("", f"driver: {driver_error}", True))
    else:
        for gpu in gpus:
            label = f"GPU {gpu.index} ({gpu.pci})"
            if gpu.ecc_uncorrectable:
                faults.append(Fault(label, f"{gpu.ecc_uncorrectable} uncorrectable ECC error(s)", True))
            if gpu.remap_failure:
                faults.append(Fault(label, "row remapping failed", True))
            elif gpu.remap_pending:
                faults.append(Fault(label, "row remapping pending (reset the GPU)", False))
        seen = sum(gpu.devices for gpu in gpus)
        if seen != gres_gpus:
            faults.append(Fault("", f"GPU count: nvidia-smi shows {seen}, Slurm's GRES has {gres_gpus}", False))
    reported = set()
    for xid in xids:
        key = (xid["pci"], xid["xid"])
        if key in reported:
            continue
        reported.add(key)
        detail = f" ({xid['text']})" if xid.get("text") else ""
        faults.append(Fault(gpu_label(gpus or [], xid["pci"]), f"Xid {xid['xid']}{detail}", True))
    if persistenced != "ok" and not persistenced.startswith("not applicable"):
        faults.append(Fault("", f"nvidia-persistenced {persistenced}", False))
    return faults


def drain_reason(faults: list[Fault]) -> str:
    reason = f"{REASON_PREFIX} " + "; ".join(fault.describe() for fault in faults)
    reason = reason.replace("\n", " ")
    return reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 3] + "..."


def decide(node: SlurmNode, faults: list[Fault], requeue: bool) -> Decision:
    """What to do in Slurm. A drain with another reason is never touched."""
    ours = node.drained and node.reason.startswith(REASON_PREFIX)
    critical = any(fault.critical for fault in faults)
    if node.drained and not ours:
        note = f"drained for another reason ({node.reason or 'none given'}): left as it is"
        return Decision("none", requeue=requeue and critical, note=note)
    if faults:
        reason = drain_reason(faults)
        if not ours:
            return Decision("drain", reason, requeue and critical)
        return Decision("update-reason" if reason != node.reason else "none", reason, requeue and critical)
    if ours:
        return Decision("resume", note=f"healthy again: was drained with '{node.reason}'")
    return Decision("none")


def requeueable(job_oneliners: str) -> list[str]:
    """Job ids among `scontrol show job --oneliner` lines that are running batch jobs allowing requeue."""
    ids = []
    for line in job_oneliners.splitlines():
        job = re.search(r"\bJobId=(\d+)", line)
        if (job and re.search(r"\bRequeue=1\b", line) and re.search(r"\bBatchFlag=1\b", line)
                and re.search(r"\bJobState=RUNNING\b", line)):
            ids.append(job.group(1))
    return ids


def persistenced_status(show: str) -> str:
    """From `systemctl show UNIT --property=LoadState,UnitFileState,ActiveState`."""
    props = dict(line.split("=", 1) for line in show.splitlines() if "=" in line)
    if props.get("LoadState") in (None, "", "not-found"):
        return "not applicable: the unit is not installed (no NVIDIA driver package on this node)"
    if props.get("UnitFileState") not in ("enabled", "enabled-runtime", "static"):
        return f"not applicable: the unit is {props.get('UnitFileState') or 'not enabled'}"
    if props.get("ActiveState") != "active":
        return f"is {props.get('ActiveState') or 'not running'}"
    return "ok"


# --------------------------------------------------------------------------
# The node (subprocesses, state file)


def run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def read_gpus(config: dict) -> tuple[list[Gpu] | None, str]:
    try:
        result = run([config["nvidia_smi"], "-q", "-x"], timeout=config["timeout"])
    except FileNotFoundError:
        return None, "nvidia-smi not found"
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi did not answer within {config['timeout']} s"
    if result.returncode != 0:
        message = (result.stdout.strip() or result.stderr.strip()).splitlines()
        return None, f"nvidia-smi failed (rc={result.returncode}): {(message or ['no output'])[0][:80]}"
    try:
        return parse_gpus(result.stdout), ""
    except ET.ParseError as error:
        return None, f"nvidia-smi -q -x printed no XML ({error})"


def boot_id() -> str:
    """This boot: the kernel's boot id and PID 1's start time (containers share the host's boot id,
    and a container's restart is its reboot)."""
    parts = []
    for path, pick in ((BOOT_ID, lambda text: text.strip()), ("/proc/1/stat", lambda text: text.rsplit(")", 1)[1].split()[19])):
        try:
            with open(path) as handle:
                parts.append(pick(handle.read()))
        except (OSError, IndexError):
            parts.append("")
    return "/".join(parts)


def load_state(path: str) -> dict:
    try:
        with open(path) as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        state = {}
    if state.get("boot_id") != boot_id():  # a reboot: the kernel log and the XIDs start again
        state = {"boot_id": boot_id(), "xids": []}
    state.setdefault("xids", [])
    return state


def save_state(path: str, state: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)


def new_kernel_lines(config: dict, state: dict) -> list[str]:
    """Kernel log lines since the last check; moves the position kept in STATE."""
    source = config["kernel_log"]
    if source:
        try:
            with open(source, "rb") as handle:
                stat = os.fstat(handle.fileno())
                position = state.get("file") or {}
                offset = position.get("offset", 0)
                if position.get("path") != source or position.get("inode") != stat.st_ino or offset > stat.st_size:
                    offset = 0  # another file, or truncated: read it from the start
                handle.seek(offset)
                data = handle.read()
                state["file"] = {"path": source, "inode": stat.st_ino, "offset": offset + len(data)}
        except FileNotFoundError:
            return []
        return data.decode("utf-8", "replace").splitlines()
    argv = ["journalctl", "--dmesg", "--boot", "--no-pager", "--output=short-monotonic", "--show-cursor", "--quiet"]
    if state.get("cursor"):
        argv.append(f"--after-cursor={state['cursor']}")
    result = run(argv, timeout=30)
    lines = result.stdout.splitlines()
    for line in reversed(lines):
        if line.startswith("-- cursor: "):
            state["cursor"] = line[len("-- cursor: "):].strip()
            break
    return lines


def slurm_node(config: dict) -> SlurmNode:
    result = run([config["scontrol"], "show", "node", config["node"], "--oneliner"])
    if result.returncode != 0 or "NodeName=" not in result.stdout:
        raise RuntimeError(f"scontrol show node {config['node']} failed: {(result.stderr or result.stdout).strip()}")
    return parse_slurm_node(result.stdout)


def requeue_jobs(config: dict) -> list[str]:
    listed = run([config["squeue"], "--noheader", f"--nodelist={config['node']}", "--states=RUNNING", "--format=%A"])
    ids = listed.stdout.split()
    if not ids:
        return []
    shown = run([config["scontrol"], "show", "job", "--oneliner", ",".join(ids)])
    chosen = requeueable(shown.stdout)
    done = []
    for job in chosen:
        if run([config["scontrol"], "requeue", job]).returncode == 0:
            done.append(job)
    return done


def load_config(path: str) -> dict:
    config = dict(DEFAULTS)
    try:
        with open(path) as handle:
            config.update(json.load(handle))
    except FileNotFoundError:
        pass
    config["node"] = config["node"] or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    config["critical_xids"] = [int(xid) for xid in config["critical_xids"]]
    config["timeout"] = float(config["timeout"])
    config["requeue"] = str(config["requeue"]).lower() in ("true", "1", "yes")
    return config


@contextlib.contextmanager
def locked(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def check(config: dict, act: bool) -> dict:
    with locked(config["state_file"]):
        state = load_state(config["state_file"])
        node = slurm_node(config)
        gpus, driver_error = read_gpus(config)
        seen = parse_xids(new_kernel_lines(config, state), set(config["critical_xids"]))
        known = {(xid["pci"], xid["xid"]) for xid in state["xids"]}
        for xid in seen:
            if (xid["pci"], xid["xid"]) not in known:
                state["xids"].append({**xid, "seen": int(time.time())})
                known.add((xid["pci"], xid["xid"]))
        unit = run(["systemctl", "show", config["persistenced_unit"],
                    "--property=LoadState,UnitFileState,ActiveState"]).stdout
        persistenced = persistenced_status(unit)
        faults = find_faults(gpus, driver_error, node.gres_gpus, state["xids"], persistenced)
        decision = decide(node, faults, config["requeue"])
        requeued: list[str] = []
        if act:
            if decision.action in ("drain", "update-reason"):
                run([config["scontrol"], "update", f"nodename={config['node']}", "state=drain",
                     f"reason={decision.reason}"])
            elif decision.action == "resume":
                run([config["scontrol"], "update", f"nodename={config['node']}", "state=resume"])
            if decision.requeue:
                requeued = requeue_jobs(config)
        result = {
            "node": config["node"],
            "time": int(time.time()),
            "gpus": len(gpus) if gpus is not None else None,
            "gres_gpus": node.gres_gpus,
            "persistenced": persistenced,
            "faults": [asdict(fault) for fault in faults],
            "action": decision.action if act or decision.action == "none" else f"would {decision.action}",
            "reason": decision.reason,
            "note": decision.note,
            "requeued": requeued,
        }
        if act:
            state["last"] = result
            save_state(config["state_file"], state)
        return result


def clear_xids(config: dict) -> int:
    with locked(config["state_file"]):
        state = load_state(config["state_file"])
        forgotten = len(state["xids"])
        state["xids"] = []
        new_kernel_lines(config, state)  # what is in the log now is history
        save_state(config["state_file"], state)
    return forgotten


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="deepops-gpu-health", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--config", default=os.environ.get("DEEPOPS_GPU_HEALTH_CONFIG", DEFAULT_CONFIG))
    parser.add_argument("--check", action="store_true", help="print what is found and would be done; change nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--clear-xids", action="store_true", help="forget the XIDs seen (after a GPU reset)")
    options = parser.parse_args(argv)
    # slurmd runs the check with a bare environment: find the tools where packages put them.
    os.environ["PATH"] = os.environ.get("PATH") or "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    config = load_config(options.config)
    try:
        if options.clear_xids:
            print(f"{config['node']}: forgot {clear_xids(config)} XID(s); the next check reads the kernel log from now")
            return 0
        result = check(config, act=not options.check)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        print(f"deepops-gpu-health: {error}", file=sys.stderr)
        return 2
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['node']}: {len(result['faults'])} fault(s); {result['action']}"
              + (f" ({result['reason']})" if result["reason"] else "")
              + (f"; {result['note']}" if result["note"] else "")
              + (f"; requeued {', '.join(result['requeued'])}" if result["requeued"] else ""))
        print(f"  persistence daemon: {result['persistenced']}")
    return 1 if result["faults"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
