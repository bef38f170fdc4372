#!/usr/bin/env bash
# Mutation testing of the pure deciders (cargo-mutants).
#   scripts/mutants.sh full          every mutant of every decider
#   scripts/mutants.sh changed       only mutants on lines changed since the commit in
#                                    .ci/mutants-baseline (the last full, clean run)
# A mutant that no test catches fails the run unless it is listed, with a one-line reason,
# in a `mutants-equivalent.md` beside its file or in the folder named after it (the text
# cargo-mutants prints after `path:line:col: `).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
mode=${1:-changed}

deciders=(
  jobs/retention-gc/src/plan.rs
  core/src/select.rs
  core/src/config/resolve.rs
  core/src/config/validate.rs
  init/restore/src/observe.rs
  init/restore/src/plan.rs
  node/src/daemon/decide.rs
)
args=()
for f in "${deciders[@]}"; do args+=(--file "$f"); done

# Its own target dir: builds of mutated copies must never be taken as fresh by a normal build.
export CARGO_TARGET_DIR="$root/target/mutants"
out=$(mktemp -d /var/tmp/vtsnap-mutants.XXXXXX)
trap 'rm -rf "$out"' EXIT
case "$mode" in
  full) ;;
  changed)
    base=$(tr -d '[:space:]' < .ci/mutants-baseline)
    git diff --unified=0 "$base" -- "${deciders[@]}" > "$out/diff.patch"
    if [ ! -s "$out/diff.patch" ]; then
      echo "mutants: no decider changed since $base (the last full run)"
      exit 0
    fi
    args+=(--in-diff "$out/diff.patch")
    ;;
  *) echo "usage: scripts/mutants.sh full|changed" >&2; exit 2 ;;
esac

set +e
cargo mutants --no-shuffle --timeout 120 --output "$out" "${args[@]}" -- --quiet
status=$?
set -e
# 0: all caught; 2: some missed (checked against the equivalents below); 3: some timed
# out (a hang the tests noticed counts as caught); others fail.
case $status in
  0|2|3) ;;
  *) echo "mutants: cargo mutants failed with exit $status" >&2; exit 1 ;;
esac
unexpected=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  file=${line%%:*}
  # "path:line:col: replace X with Y" → "replace X with Y"
  what=${line#*: }
  list=""
  for l in "${file%.rs}/mutants-equivalent.md" "$(dirname "$file")/mutants-equivalent.md"; do
    if [ -f "$l" ] && grep -qF -- "$what" "$l"; then list=$l; fi
  done
  if [ -n "$list" ]; then
    echo "mutants: equivalent (listed in $list): $line"
  else
    echo "mutants: MISSED: $line" >&2
    unexpected=$((unexpected + 1))
  fi
done < "$out/mutants.out/missed.txt"
caught=$(wc -l < "$out/mutants.out/caught.txt")
echo "mutants: $caught caught, $unexpected missed and not listed as equivalent"
[ "$unexpected" -eq 0 ]
