#!/usr/bin/env bash
# The sacct check's job (roles/validate/tasks/check_sacct.yml runs it with bash -c).
# Usage: sacct.sh TIMEOUT_S WAIT_S SBATCH_ARG...
# Runs one job to completion with sbatch --wait (under timeout(1)), then reads
# its accounting record until it shows a final state or WAIT_S seconds passed.
# Prints what sbatch and sacct said as key=value lines, one line each; the
# filter deepops.cluster.validate_sacct_result judges them. Exits 0 unless
# bash itself fails.
set -uo pipefail
timeout_s=$1
wait_s=$2
shift 2
say() { printf '%s=%s\n' "$1" "$(printf '%s' "$2" | tr '\n' ' ')"; }

err=$(mktemp)
out=$(timeout --kill-after=10 "${timeout_s}" sbatch --parsable --wait --output=/dev/null "$@" --wrap=true 2>"${err}")
rc=$?
say sbatch_rc "${rc}"
say sbatch_out "${out}"
say sbatch_err "$(cat "${err}")"
rm -f "${err}"
job=${out%%;*}
[ -n "${job}" ] || exit 0

# slurmdbd learns of the job's end after sbatch --wait returns: poll until the
# record shows one of Slurm's final job states.
record=""
for _ in $(seq 1 "${wait_s}"); do
  record=$(sacct --noheader --parsable2 --allocations --jobs="${job}" --format=State,AllocTRES 2>&1)
  case "${record}" in
    BOOT_FAIL* | CANCELLED* | COMPLETED* | DEADLINE* | FAILED* | NODE_FAIL* | OUT_OF_MEMORY* | PREEMPTED* | TIMEOUT*) break ;;
  esac
  sleep 1
done
say record "${record}"
