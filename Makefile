# vtsnap — the two commands that work on a fresh machine (as root):
#   make demo           the local lab: a Vitess shard on btrfs, snapshots, new replicas, GC
#   make test           install what the tests need, then run every test (both tiers)
SHELL := /bin/bash
export DOCKER_HOST ?= unix:///run/podman/podman.sock
DEMO_DIR ?= $(shell mktemp -d -u /tmp/vtsnap-demo.XXXXXX)
NEW_UID ?= 2548885007

.PHONY: tools-bases base-images vitess lab-images vitess-images demo-mariadb docs demo-node bench-startup e2e e2e-keep e2e-run e2e-down test-images test-real demo demo-real demo-restore demo-plan bench-lab bench-pitr bench-vitess soak-lab test setup images lint unit bench bench-check dev-tools fuzz-check mutants mutants-check tools cluster-up cluster-down chart

# The local lab on real Vitess 24 and MySQL 9.7 (tests/src/vitess_lab.rs): cold and online
# snapshots under load by the real programs through the real vtctld and mysqlctld, a new
# tablet from each that vttablet serves and VTOrc catches up, checksums, GC, a timeline and
# one JSON line. Builds Vitess and etcd from their Go modules the first time (about 7
# minutes cold on 2 cores). Cleans up even when interrupted.
demo: vitess-images
	@bash scripts/lab.sh vitess

# The MariaDB lab (real MariaDB behind fakes of vtctld and mysqlctld): the same story on
# MariaDB; what `make demo-real` runs on the real control plane.
demo-mariadb: lab-images
	@bash scripts/lab.sh demo

# The same demo on the real control plane (e2e/local-cluster, built the first time: slow
# cold): real API server, garbage collector and CSI snapshot stack; ends with the same JSON
# line plus "kube_version". Takes the cluster down again unless it was already up.
demo-real: test-images tools
	@bash scripts/demo-real.sh

# The whole story as Pods on the local cluster with a real node (kubelet, containerd) and
# real Vitess 24 on MySQL 9.7 in Pods (etcd, vtctld, VTOrc, operator-shaped tablets): the
# chart with vtsnap's images, a scheduled cold snapshot, a tablet restored through the
# webhook's Service that vttablet serves and VTOrc catches up (checksums), a Job killed
# mid-fence, an online snapshot, drills, kubectl vtsnap, re-provisioning after PURGE
# BINARY LOGS; a timeline on stderr and one JSON line. Builds the images and the tools.
demo-node: images tools
	@bash scripts/demo-node.sh

# vtsnap against Vitess's own backup (`vtctldclient Backup`, builtin engine), restore
# (`--restore-from-backup`) and clone (`--restore-with-clone`) on the real Vitess lab under
# a write load, every timed phase from a cold page cache; writes docs/benchmarks.md with
# the raw record of every run. Larger sizes are opt-in (BENCH_SIZES=1,4,8,16): 16 GiB needs about
# 90 GiB of free disk, and a size the disk cannot hold is skipped and the page says so.
BENCH_SIZES ?= 1,4
BENCH_RUNS ?= 3
# Recovery time against replayed binlog size (docs/pitr.md §7): the real Vitess lab, two
# sizes, the replay's throughput and the restore's flatness checked as ratios; the figures
# go to target/bench-pitr.json.
bench-pitr: vitess-images
	cargo test -p vtsnap-lab --bench pitr_replay

bench-vitess: vitess-images
	@bash scripts/lab.sh bench-vitess --sizes-gib $(BENCH_SIZES) --runs $(BENCH_RUNS) --out docs/benchmarks.md

# Snapshots against mariadb-backup and mariadb-dump on generated data, from a cold page
# cache, then the same snapshots on the real control plane; writes
# docs/benchmarks-mariadb.md. A size the free disk cannot hold is skipped, and the page
# says so.
LAB_SIZES ?= 1,4,8,16
LAB_RUNS ?= 3
bench-lab: test-images tools
	@bash scripts/bench-lab.sh --sizes-gib $(LAB_SIZES) --runs $(LAB_RUNS) --out docs/benchmarks-mariadb.md

# Online snapshots under transactional load, each restored and checked; bounded in time.
SOAK ?= 10m
soak-lab: lab-images
	@bash scripts/lab.sh soak --duration $(SOAK)

demo-restore:
	@cargo build -q -p vtsnap-restore --bins --examples
	@echo "== a volume cloned from tablet 101's snapshot: $(DEMO_DIR)"
	@root=$$(cargo run -q -p vtsnap-restore --example make_cloned_volume -- $(DEMO_DIR)) && \
	  (cd $$root && find . | sort | sed 's/^/   /') && \
	  echo "== the plan (--dry-run) for tablet $(NEW_UID)" && \
	  cargo run -q -p vtsnap-restore --bin vtsnap-restore -- --vtdataroot $$root --tablet-uid $(NEW_UID) --dry-run --log-format text 2>/dev/null | python3 -m json.tool && \
	  echo "== the restore (its JSON line)" && \
	  VTSNAP_LOG=warn cargo run -q -p vtsnap-restore --bin vtsnap-restore -- --vtdataroot $$root --tablet-uid $(NEW_UID) | python3 -m json.tool && \
	  echo "== the volume now" && (cd $$root && find . | sort | sed 's/^/   /') && \
	  echo "== my.cnf (paths and server-id)" && grep -E '^(datadir|log-bin|relay-log|server-id|socket|port) ' $$root/vt_$(NEW_UID)/my.cnf | sed 's/^/   /' && \
	  echo "== running it again changes nothing" && \
	  cargo run -q -p vtsnap-restore --bin vtsnap-restore -- --vtdataroot $$root --tablet-uid $(NEW_UID) --log-format text 2>/dev/null
	@rm -rf $(DEMO_DIR)

demo-plan:
	cargo run -q -p vtsnap-snapshot --example plan_demo

setup:
	bash scripts/setup-host.sh

# Every image: the test images (test-images) and one image per program, built from this
# checkout and smoke-run (scripts/build-product-images.sh prints their sizes).
images: test-images
	bash scripts/build-product-images.sh

# The images the tests use, without a registry: a debootstrap Debian base with MariaDB
# (all the lab needs: lab-images); a Debian sid base with MySQL 9.7; the Vitess image
# (that MySQL and Vitess 24, whose build needs Go).
test-images: setup vitess
	bash scripts/build-images.sh all

lab-images: setup
	bash scripts/build-images.sh mariadb

vitess-images: setup vitess
	bash scripts/build-images.sh vitess

# Vitess 24's daemons (vtctld, vttablet, mysqlctld, VTOrc, clients) from the Go module
# vitess.io/vitess into target/tools/vitess/ (about 6 minutes cold on 2 cores; cached).
vitess:
	@bash e2e/local-cluster/build-vitess.sh

lint: setup
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	shellcheck -x scripts/*.sh e2e/local-cluster/*.sh kind/*.sh

# Every test against the in-memory API and on this machine (the real-API tier is test-real).
unit:
	@mkdir -p target
	set -o pipefail; cargo test --workspace --exclude vtsnap-e2e --no-fail-fast 2>&1 | tee target/test.log

# The benchmarks' shape checks (restore time flat in bytes, GC near-linear, admission
# review latency flat in the cache's size, the node helper's reaction independent of its
# resync), quick and unoptimized; then `make bench-vitess` at two small sizes, once each,
# on the real Vitess lab: vtsnap's cold snapshot out of service for less time than the
# builtin backup, the online one for none, and provisioning faster than the builtin
# restore and CLONE by ratios that do not fall as the data grows.
bench-check:
	cargo test -p vtsnap-lab --bench vitess_shapes
	cargo test -p vtsnap-restore --bench restore_scaling -- --quick
	cargo test -p vtsnap-restore --bench binlog_size -- --quick
	cargo test -p vtsnap-gc --bench plan_scaling -- --quick
	cargo test -p vtsnap-admission --bench review_latency -- --quick
	cargo test -p vtsnap-lab --bench node_reaction -- --quick

# docs/design.md §8's start-up (first API request) and node-helper footprint, on release binaries.
bench-startup:
	cargo build --release --locked -p vtsnap-snapshot -p vtsnap-gc -p vtsnap-vtbackup-storage -p vtsnap-admission -p vtsnap-node --bins
	cargo bench -p vtsnap-lab --bench startup

bench:
	cargo bench -p vtsnap-restore --bench restore_scaling
	cargo bench -p vtsnap-restore --bench binlog_size
	cargo bench -p vtsnap-gc --bench plan_scaling
	cargo bench -p vtsnap-admission --bench review_latency
	cargo bench -p vtsnap-lab --bench node_reaction

# The Helm chart: lint, render with each charts/vtsnap/ci/*-values.yaml into target/chart/,
# and bad values refused with a message naming them (helm is built by `make tools`).
chart: setup tools
	bash scripts/chart.sh

# Pinned cargo tools the checks below need (cargo-fuzz, cargo-mutants).
dev-tools:
	bash scripts/dev-tools.sh

# The documentation: the book of docs/ built by mdBook (a warning fails it), then every
# link and anchor of the Markdown checked, and every page a chapter of docs/SUMMARY.md.
docs: dev-tools
	@mkdir -p target
	set -o pipefail; PATH="$$HOME/.cargo/bin:$$PATH" mdbook build 2>&1 | tee target/docs.log
	@! grep -E 'WARN|ERROR' target/docs.log
	python3 scripts/docs-check.py --self-test
	python3 scripts/docs-check.py

# Every fuzz target, FUZZ_SECONDS each, from its committed seeds (a crash fails).
FUZZ_SECONDS ?= 20
fuzz-check: dev-tools
	bash scripts/fuzz-check.sh $(FUZZ_SECONDS)

# Mutation testing of the pure deciders: every mutant (slow), or only those on lines
# changed since the baseline (.ci/mutants-baseline). A surviving mutant fails unless
# it is listed as equivalent, with its reason, in the mutants-equivalent.md beside its file.
mutants: dev-tools
	bash scripts/mutants.sh full
mutants-check: dev-tools
	bash scripts/mutants.sh changed

# Ends with one plain closing line summing every test binary's result (both tiers).
# One pass over a clean checkout rebuilds nothing twice: no incremental caches (gigabytes).
test: export CARGO_INCREMENTAL := 0
# 10 s per fuzz target in make test (15 targets): the 60-minute budget of a cold run;
# `make fuzz-check` alone keeps 20.
test: export FUZZ_SECONDS := 10
# Each stage is timed; the table is printed at the end, or at the stage that failed.
TEST_STAGES := setup tools-bases images lint docs chart bench-check fuzz-check mutants-check unit test-real
test:
	@bash scripts/test-stages.sh $(TEST_STAGES)

# ---- local real control plane (e2e/local-cluster/) --------------------------------------
# etcd, kube-apiserver, kube-controller-manager and the CSI snapshot stack, built from their
# Go modules into target/tools/ (cached: a warm run rebuilds nothing), run on 127.0.0.1.
# cluster-up also starts vtsnap's btrfs CSI driver (e2e/csi-btrfs) on a loop device and
# csi-snapshotter and csi-provisioner against it; KUBECONFIG=target/local-cluster/kubeconfig.
# `make cluster-up NODE=1` also runs a real node (containerd, CNI bridge, kubelet): Pods run.
tools: vitess
	@bash e2e/local-cluster/build-tools.sh

# make test's first build stage: the Go tools (CPU-bound) beside the images' Debian roots
# and packages (debootstrap and apt: network- and disk-bound), so neither waits for the
# other; `images` then builds only the Vitess image and the programs'.
tools-bases: setup
	@$(MAKE) --no-print-directory -j2 tools base-images

base-images: setup
	bash scripts/build-images.sh bases

cluster-up: tools
	@cargo build -q -p vtsnap-csi-btrfs
	@bash e2e/local-cluster/cluster.sh up

cluster-down:
	@bash e2e/local-cluster/cluster.sh down

# The real-API tier (e2e/suite) against the local control plane, which it starts and stops.
test-real: tools test-images
	bash scripts/test-real.sh
# ---- kind + TopoLVM end-to-end (kind/): needs Docker, the internet, root, lvm2 ----------
# The whole story on a real cluster: kind, TopoLVM thin snapshots, vitess-operator and a
# two-shard VitessCluster, vtsnap's images and chart, then the kind tests of e2e/suite
# (ignored elsewhere; here run with --ignored and VTSNAP_E2E_KIND=1). `e2e` takes it all
# down afterwards; `e2e-keep` leaves it running (KUBECONFIG=target/kind/kubeconfig;
# `make e2e-down` removes it).
e2e:
	@bash -c 'trap "bash kind/down.sh" EXIT; bash kind/up.sh && $(MAKE) -s e2e-run'
e2e-keep:
	bash kind/up.sh
	$(MAKE) -s e2e-run
e2e-run:
	VTSNAP_E2E_KIND=1 VTSNAP_TEST_KUBECONFIG=$(CURDIR)/target/kind/kubeconfig \
	  cargo test -p vtsnap-e2e --test kind -- --ignored --test-threads 1
e2e-down:
	bash kind/down.sh
# ---- end local real control plane -------------------------------------------------------
