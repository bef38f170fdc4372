#!/usr/bin/env bash
# Runs the local lab (`vtsnap-lab <command> …`) and removes whatever it created — its
# containers and its loop-device mounts — when it ends, however it ends (Ctrl-C included).
# The lab cleans up after itself; this is the backstop for a lab that was killed.
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKER_HOST="${DOCKER_HOST:-unix:///run/podman/podman.sock}"
# The timeline is the output; the programs' own logs only when something fails.
export VTSNAP_LOG="${VTSNAP_LOG:-error}"
export VTSNAP_LAB_RESOURCES
VTSNAP_LAB_RESOURCES=$(mktemp /tmp/vtsnap-lab-resources.XXXXXX)

cleanup() {
  local kind what
  while read -r kind what; do
    case "$kind" in
      container) podman rm -f "$what" >/dev/null 2>&1 || true ;;
    esac
  done <"$VTSNAP_LAB_RESOURCES"
  # Bind mounts of the real control plane's volumes: unmounted (lazily when busy) and
  # their empty mount points removed, never anything below them.
  while read -r kind what; do
    case "$kind" in
      bind)
        if mountpoint -q "$what"; then
          umount "$what" 2>/dev/null || umount -l "$what" || true
          echo "lab: unmounted $what" >&2
        fi
        rmdir "$what" 2>/dev/null || true
        ;;
    esac
  done <"$VTSNAP_LAB_RESOURCES"
  while read -r kind what; do
    case "$kind" in
      tree) rm -rf --one-file-system "$what" 2>/dev/null || true ;;
    esac
  done <"$VTSNAP_LAB_RESOURCES"
  while read -r kind what; do
    case "$kind" in
      mount)
        if mountpoint -q "$what"; then
          local dev
          dev=$(findmnt -n -o SOURCE --target "$what" || true)
          umount "$what" 2>/dev/null || umount -l "$what" || true
          case "$dev" in /dev/loop*) losetup -d "$dev" 2>/dev/null || true ;; esac
          echo "lab: cleaned up $what" >&2
        fi
        rm -rf "$(dirname "$what")" 2>/dev/null || true
        ;;
    esac
  done <"$VTSNAP_LAB_RESOURCES"
  rm -f "$VTSNAP_LAB_RESOURCES"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cargo build -q -p vtsnap-lab --bin vtsnap-lab
target=${CARGO_TARGET_DIR:-target}
"$target/debug/vtsnap-lab" "$@"
