#!/usr/bin/env bash
# Runs `make test`'s stages one after another and prints how long each took, also when one
# fails, so every run says where its time went. The last line is the tests' closing line
# (the tests of this run's unit and real-API tiers; logs of an earlier run are removed first).
#   scripts/test-stages.sh STAGE...      (each a make target)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
rm -f target/test.log target/test-real.log
names=()
secs=()
results=()
free=()
# Free disk after a stage, in GiB: a run that fills the disk shows which stage did.
avail() { df -BG --output=avail . 2>/dev/null | tail -n 1 | tr -dc '0-9'; }
table() {
  local total=0 i
  echo "== stage times (s), free disk after (GiB) =="
  for i in "${!names[@]}"; do
    printf '  %-14s %6d  %5s  %s\n' "${names[$i]}" "${secs[$i]}" "${free[$i]}" "${results[$i]}"
    total=$((total + secs[i]))
  done
  printf '  %-14s %6d  %5s\n' total "$total" "$(avail)"
  # The tests that ran so far (both tiers), on one plain closing line.
  # (a run of some stages may lack one of the logs: not a failure)
  { cat target/test.log target/test-real.log 2>/dev/null || true; } |
    awk '/^test result:/ {p += $4; f += $6} END {printf "tests: %d passed, %d failed\n", p, f}'
}
# A run stopped from outside (CI's time limit) still says where its time went: the stage
# that was running is timed up to the signal.
current=
child=
stopped() {
  trap - TERM INT HUP
  [ -z "$child" ] || kill -TERM "$child" 2>/dev/null
  if [ -n "$current" ]; then
    names+=("$current")
    secs+=($(($(date +%s) - start)))
    free+=("$(avail)")
    results+=("STOPPED by signal $1")
  fi
  table
  exit 143
}
for sig in TERM INT HUP; do
  # shellcheck disable=SC2064 # the signal's name is fixed when the trap is set
  trap "stopped $sig" "$sig"
done
run_started=$(date +%s)
for stage in "$@"; do
  start=$(date +%s)
  current=$stage
  echo "== stage $stage starts at +$((start - run_started)) s"
  # In the background and waited for: bash runs a trap only between commands.
  make --no-print-directory "$stage" &
  child=$!
  wait "$child"
  status=$?
  current=
  child=
  names+=("$stage")
  secs+=($(($(date +%s) - start)))
  if [ "$status" -eq 0 ]; then
    bash scripts/free-disk.sh "$stage" || status=$?
  fi
  free+=("$(avail)")
  if [ "$status" -ne 0 ]; then
    results+=("FAILED (exit $status)")
    table
    exit "$status"
  fi
  results+=(ok)
done
table
