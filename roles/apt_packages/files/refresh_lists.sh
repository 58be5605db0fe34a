# Refresh apt's package lists for tasks/install.yml, unless they are fresher
# than VALID seconds, as apt's Ansible module decides it (the success stamp's
# age, else the lists directory's). Each apt-get update runs at most LIMIT
# seconds and is tried TRIES times: apt-get update can wait for good, with no
# timeout of its own (seen behind apt-cacher-ng, after it answered a package
# list's refetch oddly: apt-get and its http method each waited on the other).
# On success the stamp is touched, so the apt module calls after it within
# VALID seconds (the roles' cache_valid_time) do not refresh again.
# Arguments: VALID LIMIT TRIES STAMP LISTS
set -u
valid=$1 limit=$2 tries=$3 stamp=$4 lists=$5
ref=$stamp
[ -e "$ref" ] || ref=$lists
age=$(( $(date +%s) - $(stat -c %Y "$ref") ))
if [ "$age" -lt "$valid" ]; then
  echo "fresh: refreshed $age s ago"
  exit 0
fi
try=1
while :; do
  timeout --kill-after=10 "$limit" apt-get update -q
  rc=$?
  if [ "$rc" -eq 0 ]; then
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    echo "refreshed"
    exit 0
  fi
  [ "$rc" -eq 124 ] && why="ran past $limit s" || why="exit code $rc"
  if [ "$try" -ge "$tries" ]; then
    echo "apt-get update failed $tries times, the last: $why" >&2
    exit 1
  fi
  echo "apt-get update, try $try of $tries: $why; trying again" >&2
  try=$((try + 1))
  sleep 2
done
