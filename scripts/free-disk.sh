#!/usr/bin/env bash
# After a stage of `make test`, removes what that stage built and no later stage reads, so a
# cold run on a machine with a finite, shared disk does not run out of it. Only when
# VTSNAP_CI_FREE_DISK=1 (set by .ci/run): a workstation keeps its caches.
#   scripts/free-disk.sh STAGE
# What each removal is safe against:
#   tools, tools-bases   the Go build and module caches: the tools are in target/tools/, and their
#           stamp keeps build-tools.sh from building them again in this run.
#   images  target/release/: the programs are in the images now; later stages build in
#           the dev profile.
#   fuzz-check  target/fuzz/: nothing else reads the fuzz builds.
set -euo pipefail
stage=${1:?usage: free-disk.sh STAGE}
[[ "${VTSNAP_CI_FREE_DISK:-0}" == 1 ]] || exit 0
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="/usr/local/go/bin:$PATH"
case "$stage" in
  tools | tools-bases)
    if command -v go >/dev/null; then
      go clean -cache
      go clean -modcache
    fi
    ;;
  images) rm -rf "$root/target/release" "$root/target/image-context" ;;
  fuzz-check) rm -rf "$root/target/fuzz" ;;
  *) exit 0 ;;
esac
echo "free-disk: after $stage, $(df -BG --output=avail "$root" | tail -n 1 | tr -d ' ') free"
