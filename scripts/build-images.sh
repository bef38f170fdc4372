#!/usr/bin/env bash
# Builds the container images vtsnap's tests use, without any registry:
#   localhost/vtsnap-debian:bookworm  — debootstrap minbase, imported into Podman
#   localhost/vtsnap-mariadb:test     — that base plus mariadb-server and mariadb-backup
#   localhost/vtsnap-debian:sid       — debootstrap minbase of Debian sid
#   localhost/vtsnap-mysql:9.7        — that base plus MySQL 9.7 (mysql-server-core)
#   localhost/vtsnap-vitess:24        — that MySQL plus Vitess's daemons (vitess/lite's shape)
# An image is rebuilt only when its inputs changed (a hash label on the image).
# The Vitess image needs the binaries of e2e/local-cluster/build-vitess.sh (run first).
#   build-images.sh [mariadb|bases|vitess|all]   (default all; the lab needs only mariadb;
#   bases: every image but the Vitess one, so it needs no Go build and can run beside it)
set -euo pipefail
which=${1:-all}
case "$which" in
  mariadb | bases | vitess | all) ;;
  *) echo "build-images: unknown set $which (mariadb, bases, vitess or all)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
mariadb=localhost/vtsnap-mariadb:test
mysql=localhost/vtsnap-mysql:9.7
vitess=localhost/vtsnap-vitess:24
# Debian sid's MySQL 9.7 package version, pinned (the image names it when it is gone).
MYSQL_VERSION=9.7.4-2
vitess_bin="${TOOLS_DIR:-$here/target/tools}/vitess"

# The Debian mirror comes from this machine's apt sources; no host name is kept in the repo.
mirror() {
  local src=/etc/apt/sources.list.d/debian.sources
  if [ -f "$src" ]; then
    awk '/^URIs:/ {print $2; exit}' "$src"
  else
    awk '/^deb / {print $2; exit}' /etc/apt/sources.list
  fi
}

label_of() { podman image inspect --format '{{ index .Labels "vtsnap.io/input-hash" }}' "$1" 2>/dev/null || true; }

# base SUITE: localhost/vtsnap-debian:SUITE from debootstrap; prints its input hash.
base() {
  local suite=$1 image=localhost/vtsnap-debian:$1 hash url root
  hash=$(printf '%s %s' "$suite" "$(sha256sum "$0" | cut -c1-16)" | sha256sum | cut -c1-16)
  if [ "$(label_of "$image")" != "$hash" ]; then
    url=$(mirror)
    [ -n "$url" ] || { echo "build-images: no Debian mirror found in apt sources" >&2; exit 1; }
    root=$(mktemp -d /var/tmp/vtsnap-rootfs.XXXXXX)
    echo "build-images: debootstrap $suite (minbase)" >&2
    if ! debootstrap --variant=minbase "$suite" "$root" "$url" >/dev/null; then
      rm -rf "$root"
      echo "build-images: debootstrap of Debian $suite from $url failed" >&2
      exit 1
    fi
    tar -C "$root" -c . | podman import \
      --change "LABEL vtsnap.io/input-hash=$hash" \
      --change 'CMD ["/bin/bash"]' - "$image" >/dev/null
    rm -rf "$root"
  else
    echo "build-images: $image is up to date" >&2
  fi
  echo "$hash"
}

# image NAME CONTAINERFILE-DIR INPUTS [podman build args…]: rebuilt when its inputs
# changed; prints its input hash.
image() {
  local name=$1 dir=$2 inputs=$3 hash
  shift 3
  hash=$( (cat "$dir/Containerfile"; echo "$inputs $*") | sha256sum | cut -c1-16)
  if [ "$(label_of "$name")" != "$hash" ]; then
    echo "build-images: building $name" >&2
    podman build -q --network host --label "vtsnap.io/input-hash=$hash" \
      "$@" -t "$name" -f "$dir/Containerfile" "$dir" >/dev/null
  else
    echo "build-images: $name is up to date" >&2
  fi
  echo "$hash"
}

if [ "$which" != vitess ]; then
  bookworm=$(base bookworm)
  image "$mariadb" "$here/images/mariadb" "$bookworm" \
    --build-arg BASE=localhost/vtsnap-debian:bookworm >/dev/null
fi
[ "$which" = mariadb ] && exit 0

sid=$(base sid)
mysql_hash=$(image "$mysql" "$here/images/mysql" "$sid" \
  --build-arg BASE=localhost/vtsnap-debian:sid --build-arg "MYSQL_VERSION=$MYSQL_VERSION")
[ "$which" = bases ] && exit 0

for b in vtctld vttablet mysqlctld vtorc vtctldclient mysqlctl etcd; do
  [ -x "$vitess_bin/$b" ] || {
    echo "build-images: $vitess_bin/$b is missing: run e2e/local-cluster/build-vitess.sh" >&2
    exit 1
  }
done
# The build context: the binaries and config/ beside the Containerfile (hard links).
ctx=$(mktemp -d /var/tmp/vtsnap-vitess-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
cp "$here/images/vitess/Containerfile" "$ctx/"
mkdir -p "$ctx/bin"
# etcd too: the node tier runs the topology as a Pod of this image
cp -l "$vitess_bin"/{vtctld,vttablet,mysqlctld,vtorc,vtctldclient,mysqlctl,etcd} "$ctx/bin/" 2>/dev/null ||
  cp "$vitess_bin"/{vtctld,vttablet,mysqlctld,vtorc,vtctldclient,mysqlctl,etcd} "$ctx/bin/"
cp -r "$vitess_bin/config" "$ctx/config"
vitess_inputs="$mysql_hash $(cat "$vitess_bin/.build-stamp" 2>/dev/null || echo unstamped)"
image "$vitess" "$ctx" "$vitess_inputs" --build-arg "BASE=$mysql" >/dev/null
