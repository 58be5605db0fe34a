"""The Slurm exporter against real ``scontrol`` output captured on the virtual
cluster (Debian 12, Slurm 22.05.8): a job's allocation is ``TRES=`` there, not
``AllocTRES=`` (the hand-made shapes in test_slurm_exporter.py carry both)."""

from __future__ import annotations

from pathlib import Path

from by_path import load_module

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "slurm_exporter" / "files" / "deepops_slurm_exporter.py"


exporter = load_module("deepops_slurm_exporter_capture", SCRIPT)

# `scontrol --all --oneliner show job 3` for `sbatch --gpus=2 --nodelist=gpu01 --wrap='sleep 60'`, verbatim.
JOB_22_05 = (
    "JobId=3 JobName=mon-test UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=11500 Nice=0 Account=root QOS=normal "
    "JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:04 "
    "TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-30T10:18:06 EligibleTime=2026-11-30T10:18:06 "
    "AccrueTime=2026-11-30T10:18:06 StartTime=2026-11-30T10:18:06 EndTime=Unknown Deadline=N/A "
    "PreemptEligibleTime=2026-11-30T10:18:06 PreemptTime=None SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval=2026-11-30T10:18:06 Scheduler=Main Partition=all AllocNode:Sid=ctl01:6856 ReqNodeList=gpu01 "
    "ExcNodeList=(null) NodeList=gpu01 BatchHost=gpu01 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=23081M,node=1,billing=1,gres/gpu=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 "
    "MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) "
    "Network=(null) Command=(null) WorkDir=/ StdErr=//slurm-3.out StdIn=/dev/null StdOut=//slurm-3.out Power= "
    "TresPerJob=gres:gpu:2 \n"
)


def test_running_job_gpus_from_slurm_22_05_tres():
    samples = [sample for sample in exporter.job_samples(JOB_22_05) if sample[0] == "slurm_job_gpus"]
    assert samples == [("slurm_job_gpus", {"job_id": "3", "user": "root", "account": "root", "partition": "all",
                                           "nodes": "gpu01"}, 2.0)]


def test_alloc_tres_wins_over_tres_when_both_are_there():
    line = "JobId=9 UserId=a(1) Account=x JobState=RUNNING Partition=all NodeList=n1 TRES=gres/gpu=4 AllocTRES=gres/gpu=1\n"
    assert [value for name, _, value in exporter.job_samples(line) if name == "slurm_job_gpus"] == [1.0]
