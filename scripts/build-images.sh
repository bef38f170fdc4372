#!/usr/bin/env bash
# Builds the container images vtsnap's tests use, without any registry:
#   localhost/vtsnap-debian:bookworm  — debootstrap minbase, imported into Podman
#   localhost/vtsnap-mariadb:test     — that base plus mariadb-server and mariadb-backup
# An image is rebuilt only when its inputs changed (a hash label on the image).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
suite=bookworm
base=localhost/vtsnap-debian:$suite
mariadb=localhost/vtsnap-mariadb:test

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

base_hash=$(printf '%s %s' "$suite" "$(sha256sum "$0" | cut -c1-16)" | sha256sum | cut -c1-16)
if [ "$(label_of "$base")" != "$base_hash" ]; then
  url=$(mirror)
  [ -n "$url" ] || { echo "build-images: no Debian mirror found in apt sources" >&2; exit 1; }
  root=$(mktemp -d /var/tmp/vtsnap-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  echo "build-images: debootstrap $suite (minbase)"
  debootstrap --variant=minbase "$suite" "$root" "$url" >/dev/null
  tar -C "$root" -c . | podman import \
    --change "LABEL vtsnap.io/input-hash=$base_hash" \
    --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
else
  echo "build-images: $base is up to date"
fi

mariadb_hash=$( (cat "$here/images/mariadb/Containerfile"; echo "$base_hash") | sha256sum | cut -c1-16)
if [ "$(label_of "$mariadb")" != "$mariadb_hash" ]; then
  echo "build-images: building $mariadb"
  podman build -q --network host --build-arg "BASE=$base" \
    --label "vtsnap.io/input-hash=$mariadb_hash" \
    -t "$mariadb" -f "$here/images/mariadb/Containerfile" "$here/images/mariadb" >/dev/null
else
  echo "build-images: $mariadb is up to date"
fi
