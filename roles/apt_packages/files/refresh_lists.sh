# Refresh apt's package lists for tasks/refresh.yml, unless they are fresher
# than VALID seconds, as apt's Ansible module decides it (the success stamp's
# age, else the lists directory's). apt-get update can wait for good, with no
# timeout of its own: seen behind apt-cacher-ng when many hosts refresh at
# once, after it answered a package list's fetch oddly, apt-get and its http
# method each waited on the other. So each apt-get update is stopped when it
# makes no progress for STALL seconds (nothing written to its output or to
# the lists' partial/ directory) or runs past LIMIT seconds, and is tried
# TRIES times. On success the stamp is touched, so the apt module calls after
# it within VALID seconds (the roles' cache_valid_time) do not refresh again.
# Arguments: VALID LIMIT STALL TRIES STAMP LISTS
set -u
valid=$1 limit=$2 stall=$3 tries=$4 stamp=$5 lists=$6
ref=$stamp
[ -e "$ref" ] || ref=$lists
age=$(( $(date +%s) - $(stat -c %Y "$ref") ))
if [ "$age" -lt "$valid" ]; then
  echo "fresh: refreshed $age s ago"
  exit 0
fi
out=$(mktemp)
trap 'rm -f "$out" "$out.stalled"' EXIT
# The bytes written so far: apt's output and the partial lists (a file
# leaving partial/ when complete changes the sum too).
progress() {
  stat -c %s -- "$out" "$lists"/partial/* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}
# Beside the update (PID): stop it after STALL seconds without progress,
# leaving $out.stalled. The update is waited for directly, so one that ends
# is seen at once, not at the watcher's next tick.
watch_progress() {
  last=$(progress) quiet=0
  while sleep 1; do
    now=$(progress)
    if [ "$now" != "$last" ]; then
      last=$now quiet=0
    else
      quiet=$((quiet + 1))
      if [ "$quiet" -ge "$stall" ]; then
        touch "$out.stalled"
        kill "$1"
        return
      fi
    fi
  done
}
try=1
while :; do
  # Emptied before the start, so the watcher's first read is the baseline.
  : > "$out"
  rm -f "$out.stalled"
  timeout --kill-after=10 "$limit" apt-get update -q > "$out" 2>&1 &
  pid=$!
  watch_progress "$pid" > /dev/null 2>&1 &
  watcher=$!
  wait "$pid" 2>/dev/null  # not the shell's "Terminated" for a stopped update
  rc=$?
  kill "$watcher" 2>/dev/null
  cat "$out"
  stalled=0
  [ -e "$out.stalled" ] && stalled=1
  if [ "$stalled" -eq 0 ] && [ "$rc" -eq 0 ]; then
    mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    echo "refreshed"
    exit 0
  fi
  if [ "$stalled" -eq 1 ]; then
    why="no progress for $stall s"
  elif [ "$rc" -eq 124 ]; then
    why="ran past $limit s"
  else
    why="exit code $rc"
  fi
  if [ "$try" -ge "$tries" ]; then
    echo "apt-get update failed $tries times, the last: $why" >&2
    exit 1
  fi
  echo "apt-get update, try $try of $tries: $why; trying again" >&2
  try=$((try + 1))
  sleep 2
done
