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
table() {
  local total=0 i
  echo "== stage times (s) =="
  for i in "${!names[@]}"; do
    printf '  %-14s %6d  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
    total=$((total + secs[i]))
  done
  printf '  %-14s %6d\n' total "$total"
  # The tests that ran so far (both tiers), on one plain closing line.
  cat target/test.log target/test-real.log 2>/dev/null |
    awk '/^test result:/ {p += $4; f += $6} END {printf "tests: %d passed, %d failed\n", p, f}'
}
for stage in "$@"; do
  start=$(date +%s)
  make --no-print-directory "$stage"
  status=$?
  names+=("$stage")
  secs+=($(($(date +%s) - start)))
  if [ "$status" -ne 0 ]; then
    results+=("FAILED (exit $status)")
    table
    exit "$status"
  fi
  results+=(ok)
done
table
