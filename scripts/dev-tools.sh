#!/usr/bin/env bash
# Installs the cargo tools the test suite uses beyond cargo itself, pinned, from crates.io:
#   cargo-fuzz    the fuzz targets' runner (libFuzzer; needs a nightly toolchain or
#                 RUSTC_BOOTSTRAP=1 on stable)
#   cargo-mutants mutation testing of the pure deciders
#   mdbook        the documentation book (docs/, `make docs`; without its server and
#                 search features, which the check does not need)
# A tool already at its pinned version is left alone.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"

need() { # need <binary> <crate> <version>
  local have
  have=$(cargo "${1#cargo-}" --version 2>/dev/null | awk '{print $2}' || true)
  if [ "$have" != "$3" ]; then
    echo "dev-tools: installing $2 $3"
    cargo install --locked --quiet "$2@$3"
  fi
}

need cargo-fuzz cargo-fuzz 0.13.2
need cargo-mutants cargo-mutants 27.1.0

if [ "$(mdbook --version 2>/dev/null)" != "mdbook v0.5.4" ]; then
  echo "dev-tools: installing mdbook 0.5.4"
  cargo install --locked --quiet --no-default-features mdbook@0.5.4
fi
