#!/usr/bin/env bash
# Takes down what kind/up.sh made: the kind cluster, the lvmd units, the volume groups,
# their loop devices and files, and the host paths mounted into the nodes. Idempotent.
# shellcheck source=kind/lib.sh
source "$(dirname "$0")/lib.sh"
# Without kind there is no cluster of ours to delete; the host's part is undone anyway.
if kind=$(kind_bin 2>/dev/null); then
  "$kind" delete cluster --name "$cluster" >/dev/null 2>&1 || true
fi
for n in "${workers[@]}"; do
  as_root systemctl stop "vtsnap-lvmd$n.service" 2>/dev/null || true
  as_root systemctl reset-failed "vtsnap-lvmd$n.service" 2>/dev/null || true
  vg=vtsnap-node$n-thin
  if as_root vgs "$vg" >/dev/null 2>&1; then
    devs=$(as_root pvs --noheadings -o pv_name -S "vg_name=$vg" | tr -d ' ')
    as_root vgremove -ffy "$vg" >/dev/null
    for d in $devs; do
      as_root pvremove -ffy "$d" >/dev/null 2>&1 || true
      as_root losetup -d "$d" 2>/dev/null || true
    done
  fi
  for d in $(as_root losetup -j "$state/vg$n.img" | cut -d: -f1); do as_root losetup -d "$d" || true; done
done
# Mounts TopoLVM and kubelet left under the nodes' kubelet directories.
if [ -d "$state" ]; then
  grep -F " $state/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do as_root umount -l "$m" || true; done
  as_root rm -rf "$state"
fi
rm -f "$KUBECONFIG"
rm -rf "$out/vtbackup-init-pods" # the initial backups' Pods kind/up.sh kept
log "down"
