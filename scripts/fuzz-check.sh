#!/usr/bin/env bash
# Runs every cargo-fuzz target of the repository briefly, from its committed seed corpus.
#   scripts/fuzz-check.sh [SECONDS_PER_TARGET]   (default 20)
# New inputs libFuzzer finds go to a scratch corpus, never into the committed seeds. A crash
# fails the run and leaves its input under <crate>/fuzz/artifacts/.
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
ran=0
while IFS= read -r manifest; do
  fuzz_dir=$(dirname "$manifest")
  crate_dir=$(dirname "$fuzz_dir")
  for target in $(cd "$crate_dir" && cargo "${toolchain[@]}" fuzz list); do
    seeds="$fuzz_dir/seeds/$target"
    [ -d "$seeds" ] || seeds="$fuzz_dir/corpus/$target"
    [ -d "$seeds" ] || { echo "fuzz-check: $target has no seeds under $fuzz_dir/{seeds,corpus}/" >&2; exit 1; }
    mkdir -p "$scratch/$target"
    echo "fuzz-check: $target (${secs}s, seeds $(find "$seeds" -mindepth 1 -maxdepth 1 | wc -l))"
    rm -rf "$fuzz_dir/artifacts/$target"
    log="$scratch/$target.log"
    if ! (cd "$crate_dir" && cargo "${toolchain[@]}" fuzz run --dev --sanitizer none \
      --target-dir "$root/target/fuzz" "$target" "$scratch/$target" "$seeds" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1) >"$log" 2>&1; then
      # The first errors name the cause; the tail is the fuzzer's own report.
      grep -m 20 -E '^(error|warning: .*(No space|Killed))' "$log" >&2 || true
      tail -n 40 "$log" >&2
      df -h "$root/target" >&2 || true
      echo "fuzz-check: $target failed; inputs (if any) in $fuzz_dir/artifacts/$target" >&2
      exit 1
    fi
    grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/  /" || true
    ran=$((ran + 1))
  done
done < <(find "$root" -path "$root/target" -prune -o -path '*/fuzz/Cargo.toml' -print | sort)
echo "fuzz-check: $ran targets ran"
