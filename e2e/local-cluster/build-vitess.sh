#!/usr/bin/env bash
# Builds the Vitess daemons the lab and the node tier run, from the Go module
# vitess.io/vitess (pinned in tools/vitess/go.mod), into target/tools/vitess/:
#
#   vtctld, vttablet, mysqlctld, vtorc, vtctldclient, mysqlctl      (CGO_ENABLED=0: static)
#   config/   the module's config/ (init_db.sql, mycnf/*.cnf), as vitess/lite carries it
#   etcd      the topology server, from the control plane's module (tools/control-plane),
#             so that the lab needs none of the Kubernetes tools
#
# Test infrastructure only (the product is Rust). One `go build` builds all six (shared
# packages compile once). Cached: a stamp records a hash of go.mod/go.sum, this script and
# `go version`; when it matches and every output exists, nothing is rebuilt.
#
# Usage: build-vitess.sh [--force]      (TOOLS_DIR overrides target/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${TOOLS_DIR:-$root/target/tools}/vitess"
mod="$here/tools/vitess"
force=0
[[ "${1:-}" == "--force" ]] && force=1

if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
else echo "build-vitess: no Go toolchain (go) found in PATH" >&2; exit 1; fi

BINARIES=(vtctld vttablet mysqlctld vtorc vtctldclient mysqlctl)

inputs_hash() {
  {
    sha256sum "$mod/go.mod" "$mod/go.sum" "$here/build-vitess.sh" \
      "$here/tools/control-plane/go.mod" "$here/tools/control-plane/go.sum" | awk '{print $1}'
    "$GO" version
  } | sha256sum | awk '{print $1}'
}

all_outputs_exist() {
  local b
  for b in "${BINARIES[@]}" etcd; do [[ -x "$out/$b" ]] || return 1; done
  [[ -s "$out/config/init_db.sql" && -s "$out/config/mycnf/mysql90.cnf" ]]
}

mkdir -p "$out"
exec 8>"$out/.build.lock"
flock 8

stamp="$out/.build-stamp"
want="$(inputs_hash)"
version="$(sed -n 's/^\tvitess.io\/vitess \(v[^ ]*\).*/\1/p' "$mod/go.mod" | head -1)"
if [[ $force == 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && all_outputs_exist; then
  echo "build-vitess: target/tools/vitess is up to date (vitess $version, inputs ${want:0:12})"
  exit 0
fi
rm -f "$stamp"
start=$SECONDS
export CGO_ENABLED=0
(cd "$mod" && "$GO" mod download vitess.io/vitess)
pkgs=()
for b in "${BINARIES[@]}"; do pkgs+=("vitess.io/vitess/go/cmd/$b"); done
(cd "$mod" && "$GO" build -trimpath -buildvcs=false -ldflags "-s -w" -o "$out/" "${pkgs[@]}")
(cd "$here/tools/control-plane" && "$GO" build -trimpath -buildvcs=false -ldflags "-s -w" \
  -o "$out/etcd" go.etcd.io/etcd/server/v3)
src="$(cd "$mod" && "$GO" list -m -f '{{.Dir}}' vitess.io/vitess)"
rm -rf "$out/config"
cp -r "$src/config" "$out/config"
chmod -R u+w,go+rX "$out/config"
echo "$want" >"$stamp"
echo "build-vitess: vitess $version into ${out#"$root"/} in $((SECONDS - start))s"
