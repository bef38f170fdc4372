#!/usr/bin/env bash
# make images (the product part): one image per program, localhost/vtsnap/<program>:<version>,
# from binaries built on this machine (cargo build --release --locked; the commit stamped
# into --version) on a distroless-style root made from the debootstrap base
# (images/vtsnap/Containerfile). Then each image is smoke-run: --help, --version (the
# version and the commit), and vtsnap-restore on a sample volume mounted in. Prints the
# sizes. Debug info is stripped from the binaries. An image is rebuilt only when its binary, the Containerfile or the base changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$HOME/.cargo/bin:$PATH"
programs=(vtsnap-snapshot vtsnap-gc vtsnap-vtbackup-storage vtsnap-admission vtsnap-node vtsnap-restore vtsnap-drill vtsnap-pitr)
base=localhost/vtsnap-debian:bookworm
version=$(cargo metadata --no-deps --format-version 1 \
  | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="vtsnap-core"))')
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi

# The kubectl plugin is built with them, from the same commit, but has no image: it is
# copied onto a user's PATH (docs/kubectl-vtsnap.md).
args=(--bin kubectl-vtsnap)
for p in "${programs[@]}"; do args+=(--bin "$p"); done
echo "images: cargo build --release --locked (${#programs[@]} programs and the kubectl plugin, commit $commit)"
VTSNAP_GIT_COMMIT=$commit cargo build -q --release --locked "${args[@]}"
context=target/image-context
mkdir -p "$context/bin"

label_of() { podman image inspect --format '{{ index .Labels "vtsnap.io/input-hash" }}' "$1" 2>/dev/null || true; }
base_id=$(podman image inspect --format '{{.Id}}' "$base")

for p in "${programs[@]}"; do
  # Without debug info (the release profile keeps line tables for local backtraces): a
  # fifth of the size; panics still name the function.
  install -m 0755 "target/release/$p" "$context/bin/$p.tmp"
  strip --strip-debug "$context/bin/$p.tmp" && mv "$context/bin/$p.tmp" "$context/bin/$p"
  image=localhost/vtsnap/$p:$version
  run_as=65532:65532
  [ "$p" = vtsnap-node ] && run_as=0:0 # privileged: FIFREEZE, the cgroup freezer, root's sockets
  hash=$( (sha256sum "$context/bin/$p" images/vtsnap/Containerfile; echo "$base_id $run_as $version $commit") \
    | sha256sum | cut -c1-16)
  if [ "$(label_of "$image")" = "$hash" ]; then
    echo "images: $image is up to date"
    continue
  fi
  echo "images: building $image"
  podman build -q --network host -f images/vtsnap/Containerfile \
    --build-arg "BASE=$base" --build-arg "PROGRAM=$p" --build-arg "VERSION=$version" \
    --build-arg "GIT_COMMIT=$commit" --build-arg "RUN_AS=$run_as" \
    --label "vtsnap.io/input-hash=$hash" -t "$image" "$context" >/dev/null
done

# Smoke runs: each image starts its program, which names its version and commit.
for p in "${programs[@]}"; do
  image=localhost/vtsnap/$p:$version
  podman run --rm --network none "$image" --help >/dev/null \
    || { echo "images: $image --help failed" >&2; exit 1; }
  out=$(podman run --rm --network none "$image" --version)
  [ "$out" = "$p $version (commit $commit)" ] \
    || { echo "images: $image --version printed '$out', want '$p $version (commit $commit)'" >&2; exit 1; }
  user=$(podman image inspect --format '{{.Config.User}}' "$image")
  case "$p:$user" in
    vtsnap-node:0:0|vtsnap-node:0) ;;
    vtsnap-node:*) echo "images: $image runs as '$user', want root" >&2; exit 1 ;;
    *:65532:65532) ;;
    *) echo "images: $image runs as '$user', want 65532 (nonroot)" >&2; exit 1 ;;
  esac
done

# vtsnap-restore in its image, as the tablet Pod runs it (uid 999), on a volume cloned
# from tablet 101's snapshot: it becomes tablet 2548885007's.
sample=$(mktemp -d /var/tmp/vtsnap-image-sample.XXXXXX)
trap 'rm -rf "$sample"' EXIT
cargo build -q -p vtsnap-restore --example make_cloned_volume
volume=$(target/debug/examples/make_cloned_volume "$sample/volume")
chown -R 999:999 "$sample"
restore=localhost/vtsnap/vtsnap-restore:$version
line=$(podman run --rm --network none --user 999:999 -v "$volume:/vt/vtdataroot" "$restore" \
  --vtdataroot /vt/vtdataroot --tablet-uid 2548885007 --log-format json 2>/dev/null | tail -1)
python3 - "$line" "$volume" <<'PY'
import json, os, sys
line, volume = sys.argv[1], sys.argv[2]
out = json.loads(line)
assert out.get("action") == "moved" and out.get("from_uid") in (101, "0000000101", "101"), line
assert os.path.isdir(os.path.join(volume, "vt_2548885007")), os.listdir(volume)
assert not os.path.exists(os.path.join(volume, "vt_0000000101")), os.listdir(volume)
cnf = open(os.path.join(volume, "vt_2548885007", "my.cnf")).read()
assert "vt_2548885007" in cnf and "vt_0000000101" not in cnf, cnf
PY
echo "images: vtsnap-restore restored a sample volume in its image (as uid 999)"

echo
printf '%-48s %10s\n' image size
for p in "${programs[@]}"; do
  image=localhost/vtsnap/$p:$version
  printf '%-48s %10s\n' "$image" "$(podman image inspect --format '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1000000}')"
done
plugin=target/release/kubectl-vtsnap
"$plugin" --version | grep -q -- "$commit" || { echo "images: $plugin --version lacks $commit" >&2; exit 1; }
printf '%-48s %10s\n' "$plugin (no image)" "$(stat -c %s "$plugin" | awk '{printf "%.1f MB", $1/1000000}')"
