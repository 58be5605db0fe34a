#!/usr/bin/env bash
# munge's health on a compute node, read-only (roles/validate/tasks/gpu_facts.yml runs it with bash -c).
# Usage: munge.sh TIMEOUT_S
# Prints key=value lines, one each: active (what systemctl is-active munge
# says), credential_rc and credential_err (a credential encoded and decoded on
# the node, munge -n | unmunge, under timeout(1)). The filter
# deepops.cluster.validate_survey judges them. Exits 0 unless bash itself fails.
set -uo pipefail
timeout_s=$1
say() { printf '%s=%s\n' "$1" "$(printf '%s' "$2" | tr '\n' ' ')"; }

say active "$(systemctl is-active munge 2>&1)"
err=$(timeout --kill-after=5 "${timeout_s}" bash -c 'set -o pipefail; munge -n | unmunge' 2>&1 >/dev/null)
say credential_rc "$?"
say credential_err "${err}"
