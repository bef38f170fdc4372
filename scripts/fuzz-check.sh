#!/usr/bin/env bash
# Runs every cargo-fuzz target of the repository briefly, from its committed seed corpus.
#   scripts/fuzz-check.sh [SECONDS_PER_TARGET]   (default 20)
# New inputs libFuzzer finds go to a scratch corpus, never into the committed seeds. A crash
# fails the run and leaves its input under <crate>/fuzz/artifacts/. Each crate's targets
# are built in one cargo run first; then two fuzzers run at a time (libFuzzer uses one
# core each).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
export PATH="$HOME/.cargo/bin:$PATH"
# libFuzzer instrumentation needs unstable flags: nightly if the machine has it, else stable
# told to accept them.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=(+nightly)
else
  toolchain=()
  export RUSTC_BOOTSTRAP=1
fi
scratch=$(mktemp -d /var/tmp/vtsnap-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fuzz_flags=(--dev --sanitizer none --target-dir "$root/target/fuzz")

# One line per target: crate dir, fuzz dir, target, seeds.
jobs=()
while IFS= read -r manifest; do
  fuzz_dir=$(dirname "$manifest")
  crate_dir=$(dirname "$fuzz_dir")
  (cd "$crate_dir" && cargo "${toolchain[@]}" fuzz build "${fuzz_flags[@]}") \
    >"$scratch/build.log" 2>&1 || {
    grep -m 20 -E '^(error|warning: .*(No space|Killed))' "$scratch/build.log" >&2 || true
    tail -n 40 "$scratch/build.log" >&2
    echo "fuzz-check: the fuzz targets of $crate_dir do not build" >&2
    exit 1
  }
  for target in $(cd "$crate_dir" && cargo "${toolchain[@]}" fuzz list); do
    seeds="$fuzz_dir/seeds/$target"
    [ -d "$seeds" ] || seeds="$fuzz_dir/corpus/$target"
    [ -d "$seeds" ] || { echo "fuzz-check: $target has no seeds under $fuzz_dir/{seeds,corpus}/" >&2; exit 1; }
    jobs+=("$crate_dir|$fuzz_dir|$target|$seeds")
  done
done < <(find "$root" -path "$root/target" -prune -o -path '*/fuzz/Cargo.toml' -print | sort)

# One target's run; its log in the scratch directory, its status the fuzzer's.
fuzz_one() {
  local crate_dir=$1 fuzz_dir=$2 target=$3 seeds=$4
  mkdir -p "$scratch/$target"
  rm -rf "$fuzz_dir/artifacts/$target"
  (cd "$crate_dir" && cargo "${toolchain[@]}" fuzz run "${fuzz_flags[@]}" "$target" \
    "$scratch/$target" "$seeds" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1) >"$scratch/$target.log" 2>&1
}

# Reports a finished target: its executions, or its failure (and fails the run).
report() {
  local status=$1 job=$2 crate_dir fuzz_dir target seeds log
  IFS='|' read -r crate_dir fuzz_dir target seeds <<<"$job"
  log="$scratch/$target.log"
  echo "fuzz-check: $target (${secs}s, seeds $(find "$seeds" -mindepth 1 -maxdepth 1 | wc -l))"
  if [ "$status" -ne 0 ]; then
    # The first errors name the cause; the tail is the fuzzer's own report.
    grep -m 20 -E '^(error|warning: .*(No space|Killed))' "$log" >&2 || true
    tail -n 40 "$log" >&2
    df -h "$root/target" >&2 || true
    echo "fuzz-check: $target failed; inputs (if any) in $fuzz_dir/artifacts/$target" >&2
    exit 1
  fi
  grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/  /" || true
}

ran=0
for ((i = 0; i < ${#jobs[@]}; i += 2)); do
  pids=()
  for job in "${jobs[@]:i:2}"; do
    IFS='|' read -r crate_dir fuzz_dir target seeds <<<"$job"
    fuzz_one "$crate_dir" "$fuzz_dir" "$target" "$seeds" &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do
    status=0
    wait "${pids[$k]}" || status=$?
    report "$status" "${jobs[$((i + k))]}"
    ran=$((ran + 1))
  done
done
echo "fuzz-check: $ran targets ran"
