#!/usr/bin/env bash
# The preemption check's jobs (roles/validate/tasks/check_preemption.yml runs it with bash -c).
# Usage: preemption.sh TIMEOUT_S BOUND_MS QOS_LOW QOS_HIGH GPUS SBATCH_ARG...
# Fills a node's GPUS with a low-QOS job (--requeue), waits up to TIMEOUT_S for
# it to run, submits a one-GPU high-QOS job there and follows it until it
# starts or BOUND_MS passed, then reads the low job's record. Prints what it
# saw as key=value lines, as far as it got; the filter
# deepops.cluster.validate_preemption_result judges them. Exits 0 unless bash
# itself fails. Every job gets SBATCH_ARG (its name, --time, the node).
set -uo pipefail
timeout_s=$1
bound_ms=$2
qos_low=$3
qos_high=$4
gpus=$5
shift 5
say() { printf '%s=%s\n' "$1" "$(printf '%s' "$2" | tr '\n' ' ')"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
state() { squeue --noheader --jobs="$1" --format=%T 2>/dev/null | head -n1; }

low=$(sbatch --parsable "$@" --qos="${qos_low}" --requeue --gpus="${gpus}" --wrap='sleep 600' 2>&1)
rc=$?
say low_sbatch_rc "${rc}"
say low_sbatch "${low}"
[ "${rc}" -eq 0 ] || exit 0
low=${low##*$'\n'}
low=${low%%;*}

s=""
for _ in $(seq 1 "${timeout_s}"); do
  s=$(state "${low}")
  [ "${s}" = RUNNING ] && break
  sleep 1
done
say low_start_state "${s}"
[ "${s}" = RUNNING ] || exit 0

# A job inside PreemptExemptTime cannot be preempted yet: BOUND_MS includes it.
start=$(now_ms)
high=$(sbatch --parsable "$@" --qos="${qos_high}" --gpus=1 --wrap='sleep 5' 2>&1)
rc=$?
say high_sbatch_rc "${rc}"
say high_sbatch "${high}"
[ "${rc}" -eq 0 ] || exit 0
high=${high##*$'\n'}
high=${high%%;*}

deadline=$((start + bound_ms))
while :; do
  s=$(state "${high}")
  case "${s}" in RUNNING | COMPLETING | "") break ;; esac
  [ "$(now_ms)" -ge "${deadline}" ] && break
  sleep 0.5
done
say waited_ms "$(($(now_ms) - start))"
say high_state "${s}"

# The requeue shows a moment after the preemption: wait for Restarts to move.
info=""
for _ in $(seq 1 20); do
  info=$(scontrol --oneliner show job "${low}" 2>/dev/null)
  case " ${info} " in *" Restarts=0 "*) sleep 0.5 ;; *) break ;; esac
done
say low_job "${info}"
