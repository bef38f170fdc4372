#!/usr/bin/env bash
# Installs what vtsnap's tests and demos need on a Debian host, as root:
# Podman (with runc and cgroupfs, no registry), btrfs tools, debootstrap,
# and a running Podman API socket that testcontainers talks to.
# Safe to run again: every step checks before it acts.
set -euo pipefail

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "setup-host: must run as root (loop devices, btrfs, cgroups, podman)" >&2
    exit 2
  fi
}
need_root

packages=(curl python3-yaml binutils shellcheck podman runc debootstrap btrfs-progs util-linux e2fsprogs mariadb-client make gcc pkg-config protobuf-compiler tzdata)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-host: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Podman settings that work without systemd and without a registry (docs/design.md §7).
mkdir -p /etc/containers
conf=/etc/containers/containers.conf
if ! grep -q '# vtsnap test host settings (2)' "$conf" 2>/dev/null; then
  cat >"$conf" <<'EOF'
# vtsnap test host settings (2)
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
# Each exec through the API keeps its conmon alive this long after it ends, for a client
# that may still ask for the exit code (Docker's behaviour: 300 s). The tests run one
# exec per SQL statement and read the code at once; at 300 s a soak kept thousands of
# idle conmons alive.
exit_command_delay = 5
EOF
fi

modprobe btrfs 2>/dev/null || true
modprobe loop 2>/dev/null || true

# The Podman API socket, reached through DOCKER_HOST by testcontainers.
sock=/run/podman/podman.sock
# Its conmons inherit the service's working directory and fail every container start once
# that directory is gone ("Failed to get working directory"): a service started from a
# checkout that was deleted since is stopped and started again, from /.
for pid in $(pgrep -f "podman system service .*unix://$sock" || true); do
  if readlink "/proc/$pid/cwd" 2>/dev/null | grep -q ' (deleted)$'; then
    echo "setup-host: the podman API service (pid $pid) runs in a deleted directory; restarting it"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
done
if ! curl -fsS --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
  mkdir -p /run/podman
  rm -f "$sock"
  (cd / && nohup podman system service --time=0 "unix://$sock" >/var/log/vtsnap-podman-service.log 2>&1 &)
  for _ in $(seq 1 100); do
    curl -fsS --unix-socket "$sock" http://d/_ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS --unix-socket "$sock" http://d/_ping >/dev/null || {
    echo "setup-host: podman API socket did not come up; see /var/log/vtsnap-podman-service.log" >&2
    exit 1
  }
fi
# An S3-compatible server for the object-store archive's tests: moto's server, pinned,
# from PyPI, in its own virtual environment (testkit/src/s3.rs runs it).
moto_version=5.2.1
moto_dir=/opt/vtsnap-moto
if [ "$("$moto_dir/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null)" != "$moto_version" ]; then
  echo "setup-host: installing moto[server] $moto_version into $moto_dir"
  rm -rf "$moto_dir"
  if ! python3 -m venv "$moto_dir" 2>/dev/null; then
    # Debian's own python3 keeps venv apart
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$moto_dir"
  fi
  "$moto_dir/bin/pip" install -q --disable-pip-version-check "moto[server]==$moto_version"
fi
echo "setup-host: ready (DOCKER_HOST=unix://$sock)"
