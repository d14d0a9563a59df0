# Sourced by scripts/test and .ci/run: `stage NAME CMD...` runs CMD under a heading and records
# how long it took; `stages_summary` prints every stage's wall time (also when a stage fails).
#
# `stage_start NAME CMD...` starts CMD in the background (its output to a log of its own, so it
# does not interleave with the stages in front), for work that waits on the network or fills
# the CPU the stages in front leave idle; `stage_wait NAME` waits for it before the first stage
# that needs it, prints its log, and fails like a stage when CMD failed. A background command
# runs in a process group of its own: when the script exits early (a stage failed), the groups
# still running are stopped.
stages_log=()
stages_started=$SECONDS
declare -A stages_pid=() stages_logfile=() stages_begin=()
stages_logdir=""
stage() {
  local name="$1" start=$SECONDS status=0
  shift
  echo "== $name ==" >&2
  "$@" || status=$?
  stages_log+=("$(printf '%5ss  %s%s' "$((SECONDS - start))" "$name" "$([ "$status" -eq 0 ] || echo " (FAILED: exit $status)")")")
  if [ "$status" -ne 0 ]; then
    stages_summary
    exit "$status"
  fi
}
stage_start() {
  local name="$1"
  shift
  if [ -z "$stages_logdir" ]; then
    stages_logdir="$(mktemp -d)"
    trap stages_stop_background EXIT
  fi
  local log="$stages_logdir/${#stages_pid[@]}.log"
  echo "== $name (started in the background) ==" >&2
  setsid -w "$@" >"$log" 2>&1 </dev/null &
  stages_pid[$name]=$!
  stages_logfile[$name]=$log
  stages_begin[$name]=$SECONDS
}
stage_wait() {
  local status=0
  stages_collect "$1" || status=$?
  if [ "$status" -ne 0 ]; then
    stages_summary
    exit "$status"
  fi
}
stages_collect() {
  local name="$1" start=$SECONDS status=0
  echo "== waiting for $name ==" >&2
  wait "${stages_pid[$name]}" || status=$?
  unset 'stages_pid[$name]'
  echo "== $name: its output ==" >&2
  cat "${stages_logfile[$name]}" >&2
  stages_log+=("$(printf '%5ss  %s (in the background; waited %ss)%s' \
    "$((SECONDS - stages_begin[$name]))" "$name" "$((SECONDS - start))" \
    "$([ "$status" -eq 0 ] || echo " (FAILED: exit $status)")")")
  return "$status"
}
stages_stop_background() {
  local pid
  for pid in "${stages_pid[@]}"; do
    kill -- "-$pid" 2>/dev/null || true
  done
  rm -rf "$stages_logdir"
}
stages_summary() {
  echo "== time per stage (wall) ==" >&2
  printf '%s\n' "${stages_log[@]}" >&2
  echo "$(printf '%5ss' "$((SECONDS - stages_started))")  in all" >&2
}
