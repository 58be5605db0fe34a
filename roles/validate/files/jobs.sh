#!/usr/bin/env bash
# Several job steps side by side, each on its own set of nodes with one task
# and GPUS GPUs per node (the dcgm, nccl and burnin checks run it with
# bash -c: one diagnostic per node must not take nodes x minutes; jobs that
# share a node simply queue in Slurm).
# Usage: jobs.sh TIMEOUT_S NODES=GPUS... -- SRUN_ARG... -- COMMAND...
#   NODES is one node or a comma-separated list; @GPUS@ in COMMAND becomes
#   the job's GPUs per node (all_reduce_perf -g).
# Prints one line per job, in the order given:
#   NODES<TAB>RC<TAB>SECONDS<TAB>base64(stdout)<TAB>base64(stderr)
# (base64: outputs are multi-line JSON or tables, and the jobs' lines must
# not interleave); deepops.cluster.validate_job_runs turns them back into
# command results. Exits 0 unless bash itself fails.
set -uo pipefail
timeout_s=$1
shift
specs=()
while (($#)) && [[ $1 != -- ]]; do specs+=("$1"); shift; done
shift
srun_args=()
while (($#)) && [[ $1 != -- ]]; do srun_args+=("$1"); shift; done
shift

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
for index in "${!specs[@]}"; do
  nodes=${specs[index]%%=*}
  gpus=${specs[index]#*=}
  count=$(tr ',' '\n' <<<"${nodes}" | grep -c .)
  command=("${@//@GPUS@/${gpus}}")
  (
    start=${SECONDS}
    timeout --kill-after=10 "${timeout_s}" srun "${srun_args[@]}" --nodes="${count}" --ntasks-per-node=1 \
      --nodelist="${nodes}" --gpus-per-node="${gpus}" "${command[@]}" >"${work}/${index}.out" 2>"${work}/${index}.err"
    echo "$? $((SECONDS - start))" >"${work}/${index}.rc"
  ) &
done
wait
for index in "${!specs[@]}"; do
  read -r rc seconds <"${work}/${index}.rc"
  printf '%s\t%s\t%s\t%s\t%s\n' "${specs[index]%%=*}" "${rc}" "${seconds}" \
    "$(base64 -w0 <"${work}/${index}.out")" "$(base64 -w0 <"${work}/${index}.err")"
done
