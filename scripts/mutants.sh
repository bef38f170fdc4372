#!/usr/bin/env bash
# Mutation testing of the pure deciders (cargo-mutants).
#   scripts/mutants.sh full          every mutant of every decider
#   scripts/mutants.sh changed       only mutants on lines changed since the commit in
#                                    .ci/mutants-baseline (changes before it were run clean,
#                                    or are named as owed in a closing note)
#   MUTANTS_PACKAGES="a b" scripts/mutants.sh ...   only those packages' groups
#   MUTANTS_TIMEOUT=60 scripts/mutants.sh ...        seconds before a mutant's tests count
#                                                    as hung (caught); default 300
# A mutant that no test catches fails the run unless it is listed, with a one-line reason,
# in a `mutants-equivalent.md` beside its file or in the folder named after it (the text
# cargo-mutants prints after `path:line:col: `).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
mode=${1:-changed}
# Its own target dir: builds of mutated copies must never be taken as fresh by a normal build.
# One dir for every build, so one mutant at a time: parallel jobs would test each other's
# binaries.
if [ "${CARGO_MUTANTS_JOBS:-1}" != 1 ]; then
  echo "mutants: CARGO_MUTANTS_JOBS must be 1 here (one shared target dir)" >&2
  exit 2
fi
export CARGO_TARGET_DIR="$root/target/mutants"
# Without the tool every listing below is empty, which would read as "nothing to mutate".
cargo mutants --version >/dev/null 2>&1 \
  || { echo "mutants: cargo-mutants is missing (make dev-tools installs it)" >&2; exit 2; }

# package | decider files | the tests that judge them (cargo test arguments)
groups=(
  "vtsnap-gc|jobs/retention-gc/src/decide/mod.rs jobs/retention-gc/src/decide/coverage.rs jobs/retention-gc/src/decide/failed_restores.rs|"
  "vtsnap-core|core/src/config/resolve.rs core/src/config/validate.rs core/src/config/pvc_spec.rs core/src/vtbackup.rs core/src/snapshot/read.rs core/src/snapshot/choice.rs core/src/snapshot/gtid.rs core/src/snapshot/source.rs core/src/coverage/mod.rs core/src/coverage/set.rs core/src/schedule.rs core/src/snapshot/drill.rs core/src/retry/decide.rs core/src/cron.rs core/src/pitr/manifest.rs core/src/pitr/chain.rs core/src/pitr/record.rs core/src/pitr/binlog.rs core/src/pitr/archive_url.rs core/src/restore_pod.rs|--lib"
  "vtsnap-core|core/src/reconcile/wait.rs|--test wait"
  "vtsnap-restore|init/restore/src/observe.rs init/restore/src/decide/mod.rs init/restore/src/decide/plan.rs init/restore/src/decide/preflight.rs|--lib --test layouts --test hostile"
  "vtsnap-node|node/src/daemon/decide.rs|--lib"
  "vtsnap-admission|webhook/src/decide/mod.rs webhook/src/decide/restore.rs webhook/src/decide/pod.rs webhook/src/decide/vtbackup.rs webhook/src/server/drill_metrics.rs|--lib"
  "vtsnap-vtbackup-storage|jobs/vtbackup-storage/src/decide/mod.rs jobs/vtbackup-storage/src/decide/effective.rs|--lib --test plan"
  "vtsnap-snapshot|jobs/snapshot/src/schedule/decide.rs jobs/snapshot/src/schedule/names.rs jobs/snapshot/src/run/decide/mod.rs jobs/snapshot/src/run/decide/recovery.rs jobs/snapshot/src/run/decide/semi_sync.rs jobs/snapshot/src/run/decide/select.rs jobs/snapshot/src/plan.rs|--lib --test schedule_plan --test plan"
  "vtsnap-drill|jobs/drill/src/decide/mod.rs jobs/drill/src/decide/objects.rs jobs/drill/src/decide/outcome.rs jobs/drill/src/decide/verdict.rs|--lib"
  "vtsnap-pitr|jobs/pitr/src/decide/replay.rs jobs/pitr/src/decide/recovery.rs jobs/pitr/src/decide/archive.rs jobs/pitr/src/decide/window.rs jobs/pitr/src/observe/mod.rs|--lib --test plan --test recover --test object_archive"
  "kubectl-vtsnap|cli/kubectl-vtsnap/src/decide/world.rs cli/kubectl-vtsnap/src/decide/doctor.rs cli/kubectl-vtsnap/src/decide/status.rs cli/kubectl-vtsnap/src/decide/objects.rs cli/kubectl-vtsnap/src/decide/storage.rs cli/kubectl-vtsnap/src/decide/schedules.rs cli/kubectl-vtsnap/src/decide/recover.rs|--lib --test golden"
)

case "$mode" in
  full|changed) ;;
  *) echo "usage: scripts/mutants.sh full|changed" >&2; exit 2 ;;
esac
base=$(tr -d '[:space:]' < .ci/mutants-baseline)
out=$(mktemp -d /var/tmp/vtsnap-mutants.XXXXXX)
trap 'rm -rf "$out"' EXIT
unexpected=0
caught=0
for g in "${groups[@]}"; do
  IFS='|' read -r package files test_args <<<"$g"
  if [ -n "${MUTANTS_PACKAGES:-}" ] && [[ " $MUTANTS_PACKAGES " != *" $package "* ]]; then
    continue
  fi
  read -ra files <<<"$files"
  read -ra test_args <<<"$test_args"
  args=(--package "$package")
  for f in "${files[@]}"; do args+=(--file "$f"); done
  if [ "$mode" = changed ]; then
    # The whole tree's diff with renames followed (-M): a decider moved to another file
    # counts only for the lines that changed; --in-diff keeps the lines of the files above.
    if git diff -M --quiet "$base" -- "${files[@]}"; then
      echo "mutants: $package: no decider changed since $base (the baseline)"
      continue
    fi
    git diff -M --unified=0 "$base" > "$out/$package.patch"
    args+=(--in-diff "$out/$package.patch")
    # Changed lines with nothing to mutate (tests, comments) leave nothing to run.
    if [ -z "$(cargo mutants --list "${args[@]}" 2>/dev/null)" ]; then
      echo "mutants: $package: the changes since $base have nothing to mutate"
      continue
    fi
  fi
  echo "mutants: $package: ${files[*]}"
  set +e
  cargo mutants --no-shuffle --timeout "${MUTANTS_TIMEOUT:-300}" --output "$out/$package" "${args[@]}" -- "${test_args[@]}"
  status=$?
  set -e
  # 0: all caught; 2: some missed (checked against the equivalents below); 3: some timed
  # out (a hang the tests noticed counts as caught); others: the run itself failed.
  case $status in
    0|2|3) ;;
    *) echo "mutants: cargo mutants failed for $package (exit $status)" >&2; exit 1 ;;
  esac
  results="$out/$package/mutants.out"
  [ -f "$results/caught.txt" ] || { echo "mutants: no results from cargo mutants for $package" >&2; exit 1; }
  caught=$((caught + $(cat "$results/caught.txt" "$results/timeout.txt" 2>/dev/null | wc -l)))
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    file=${line%%:*}
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
  done < <(cat "$results/missed.txt" 2>/dev/null)
done
echo "mutants: $caught caught, $unexpected missed and not listed as equivalent"
[ "$unexpected" -eq 0 ]
