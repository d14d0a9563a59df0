# Sourced by scripts/test and .ci/run: `stage NAME CMD...` runs CMD under a heading and records
# how long it took; `stages_summary` prints every stage's wall time (also when a stage fails).
stages_log=()
stages_started=$SECONDS
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
stages_summary() {
  echo "== time per stage (wall) ==" >&2
  printf '%s\n' "${stages_log[@]}" >&2
  echo "$(printf '%5ss' "$((SECONDS - stages_started))")  in all" >&2
}
