use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::cli::Cli;
use vtsnap_core::exit::Exit;
use vtsnap_core::pitr::chain::Base;
use vtsnap_core::pitr::chain::{self, Target};
use vtsnap_core::pitr::run::After;
use vtsnap_core::shard::ShardRef;
use vtsnap_pitr::act::fetch::{fetch_all, last_transaction};
use vtsnap_pitr::archive::{Archive, ArchivePlace};
use vtsnap_pitr::decide::recovery::{self, ArchiveSource, Settings};
use vtsnap_pitr::decide::replay::{self, Client};
use vtsnap_pitr::observe::{Observed, Passed, bases, named_base, read_archive};
use vtsnap_pitr::recover::{self, RecoverOptions};
use vtsnap_pitr::report::{FetchLine, PlanLine};
use vtsnap_pitr::run::{self, ArchiveOptions, Mode};

/// `--help`'s first line.
const ABOUT: &str =
    "Point-in-time recovery of a shard from a snapshot and Vitess's binlog archive.";

/// Where and to which point: what `plan` and `fetch` share.
#[derive(Debug, Clone, clap::Args)]
struct PlanArgs {
    /// The shard, `namespace/cluster/keyspace/shard`.
    #[arg(long, env = "VTSNAP_SHARD")]
    shard: String,
    /// The VolumeSnapshots, as `kubectl get volumesnapshots -A -o json` prints them.
    #[arg(long)]
    objects: PathBuf,
    #[command(flatten)]
    storage: StorageArgs,
    #[command(flatten)]
    to: TargetArgs,
}

/// Where Vitess's backup storage is: one of the two.
#[derive(Debug, Clone, clap::Args)]
#[group(required = true, multiple = false)]
struct StorageArgs {
    /// The root of Vitess's `file` backup storage (`--file-backup-storage-root`), as
    /// mounted here.
    #[arg(long, env = "VTSNAP_ARCHIVE_ROOT")]
    archive_root: Option<PathBuf>,
    /// Vitess's backup storage in an object store: `s3://BUCKET[/ROOT]` (Vitess's
    /// `--s3-backup-storage-bucket` and `--s3-backup-storage-root`), `gs://…`, `az://…`.
    /// Credentials, region and endpoint from the environment (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`, …).
    #[arg(long, env = "VTSNAP_ARCHIVE_URL")]
    archive_url: Option<String>,
}

impl StorageArgs {
    fn place(&self) -> ArchivePlace {
        match (&self.archive_root, &self.archive_url) {
            (_, Some(url)) => ArchivePlace::Url {
                url: url.clone(),
                settings: Vec::new(),
            },
            (Some(root), None) => ArchivePlace::Folder(root.clone()),
            // clap's group requires one
            (None, None) => ArchivePlace::Folder(PathBuf::new()),
        }
    }
}

/// The point to recover to, and the base: what `plan`, `fetch` and `run` share.
type TargetArgs = vtsnap_core::cli::PitrTargetArgs;

/// The shard whose archive is kept, and where the archive is.
#[derive(Debug, Clone, clap::Args)]
struct ArchiveArgs {
    #[command(flatten)]
    shard: vtsnap_core::cli::ShardArgs,
    #[command(flatten)]
    storage: StorageArgs,
    /// How long the tablet's backup may take.
    #[arg(long, env = "VTSNAP_BACKUP_TIMEOUT", default_value = "1h", value_parser = vtsnap_core::cli::positive_duration)]
    backup_timeout: vtsnap_core::duration::GoDuration,
    /// Decide the increment, do not take it.
    #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
    dry_run: bool,
}

/// What `run` recovers, and how.
#[derive(Debug, Clone, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    shard: vtsnap_core::cli::ShardArgs,
    #[command(flatten)]
    storage: StorageArgs,
    /// With --archive-root: the same storage as a Pod volume source (JSON), mounted
    /// read-only into the recovery Pod at --archive-root:
    /// `{"nfs":{"server":"…","path":"…"}}`, `{"persistentVolumeClaim":{"claimName":"…"}}`.
    #[arg(long, env = "VTSNAP_ARCHIVE_VOLUME", requires = "archive_root")]
    archive_volume: Option<String>,
    /// With --archive-url: the Secret in the shard's namespace whose keys become the
    /// recovery Pod's fetch environment (the store's credentials and endpoint).
    #[arg(long, env = "VTSNAP_ARCHIVE_SECRET", requires = "archive_url")]
    archive_secret: Option<String>,
    #[command(flatten)]
    to: TargetArgs,
    /// Once replayed: `serve` leaves mysqld up in the Pod; `cut` stops it cleanly and
    /// cuts the volume into a VolumeSnapshot, then removes the Pod and its PVC.
    #[arg(long, value_enum, default_value = "serve")]
    after: After,
    /// vtsnap-restore's image (the Pod's first init container).
    #[arg(long, env = "VTSNAP_RESTORE_IMAGE")]
    restore_image: String,
    /// This program's image (the Pod's fetch init container).
    #[arg(long, env = "VTSNAP_PITR_IMAGE")]
    pitr_image: String,
    /// How long the recovery Pod may run in all (a served one is gone after it).
    #[arg(long, default_value = "1h", value_parser = vtsnap_core::cli::positive_duration)]
    deadline: vtsnap_core::duration::GoDuration,
    /// The recovery mysqld's resources and the Pod's pull Secrets.
    #[command(flatten)]
    pod: vtsnap_core::cli::ThrowawayPodArgs,
    /// Print the plan and the objects, make nothing.
    #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
    dry_run: bool,
    /// The Job this runs in: it owns the recovery's PVC and Pod, so that deleting it
    /// removes them (a killed run's too).
    #[command(flatten)]
    owner: vtsnap_core::cli::OwnerArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Recover the shard to a point into a new PVC and Pod: the base restored, the
    /// archive's binlogs replayed up to the point and checked (docs/pitr.md §8).
    #[command(
        after_help = "Examples:\n  vtsnap-pitr run --config /etc/vtsnap/config.yaml --cluster example \\\n    \
        --keyspace commerce --shard - --archive-root /vt/backups \\\n    \
        --archive-volume '{\"nfs\":{\"server\":\"nfs.example.com\",\"path\":\"/backups\"}}' \\\n    \
        --restore-image vtsnap/vtsnap-restore:0.1.0 --pitr-image vtsnap/vtsnap-pitr:0.1.0 \\\n    \
        --to-time 2026-12-07T14:02:00Z\n  \
        (the same with --to-gtid SET, --after cut, or --dry-run)\n\n\
        The JSON line names the base, the increments, the Pod (and how to reach its mysql),\n  \
        or the cut snapshot; RPO (a time target minus when the last applied transaction\n  \
        began) and RTO.\n\n\
        Exit codes: 0 recovered or planned; 1 the recovery failed (named; nothing left\n  \
        behind); 2 bad usage or config; 3 no snapshot reaches the target."
    )]
    Run {
        #[command(flatten)]
        args: RunArgs,
    },
    /// Take the shard's next binlog-archive increment: a Vitess incremental backup, on a
    /// replica, from as far as the archive already carries the newest snapshot.
    #[command(
        after_help = "Example:\n  vtsnap-pitr archive --config /etc/vtsnap/config.yaml --cluster example \\\n    \
        --keyspace commerce --shard - --archive-root /vt/backups\n\n\
        Needs pitr.enabled for the shard in the config. Nothing new since the archive's end\n  \
        stores nothing (outcome empty).\n\n\
        Exit codes: 0 stored, empty or planned; 1 a read or the backup failed (the next run\n  \
        tries again); 2 bad usage or config; 3 refused (no snapshot, no replica, not enabled)."
    )]
    Archive {
        #[command(flatten)]
        args: ArchiveArgs,
    },
    /// Which snapshot and which increments recover the shard to a point, or why none can;
    /// offline, from a dump of the snapshots and the archive's file storage.
    #[command(
        after_help = "Examples:\n  kubectl get volumesnapshots -A -o json > snapshots.json\n  \
        vtsnap-pitr plan --shard vitess/example/commerce/- --objects snapshots.json \\\n    \
        --archive-root /vt/backups --to-time 2026-12-07T14:02:00Z\n  \
        vtsnap-pitr plan --shard vitess/example/commerce/- --objects snapshots.json \\\n    \
        --archive-root /vt/backups --to-gtid 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-2045\n\n\
        A time stops just before it (every transaction committed before it); a GTID set\n  \
        includes itself, as Vitess's --restore-to-timestamp and --restore-to-pos do.\n\n\
        Exit codes: 0 a plan; 2 bad usage or unreadable input; 3 no snapshot can reach the\n  \
        target (each says why, with the window the shard can be recovered to)."
    )]
    Plan {
        #[command(flatten)]
        args: PlanArgs,
    },
    /// The plan, then the increments' binlogs fetched into a directory of the recovered
    /// volume (each checked: CRC-32, whole, a binlog), and the replay script written
    /// beside them, to run where the recovered mysqld's socket is (docs/pitr.md §5).
    #[command(
        after_help = "Example (the restored base mounted at /recovery, its mysqld's container sees\n  \
        it as /vt):\n  \
        vtsnap-pitr fetch --shard vitess/example/commerce/- --objects snapshots.json \\\n    \
        --archive-root /vt/backups --to-time 2026-12-07T14:02:00Z \\\n    \
        --dest /recovery/vtdataroot/pitr --seen-as /vt/vtdataroot/pitr\n  \
        kubectl exec -n vitess recovery -c mysqld -- bash /vt/vtdataroot/pitr/replay.sh\n\n\
        The script checks the server with GTID_SUBSET before and after the replay and\n  \
        exits 3 naming what is wrong.\n\n\
        Exit codes: 0 fetched; 1 a file could not be fetched whole (named); 2 bad usage or\n  \
        unreadable input; 3 no snapshot can reach the target."
    )]
    Fetch {
        #[command(flatten)]
        args: PlanArgs,
        /// The directory the binlogs and `replay.sh` go to (made if missing).
        #[arg(long)]
        dest: PathBuf,
        /// What the mysqld's container calls `--dest` (default: the same path).
        #[arg(long)]
        seen_as: Option<PathBuf>,
        /// The recovered mysqld's socket, as its container sees it.
        #[arg(long, default_value = "/vt/socket/mysql.sock")]
        socket: String,
        /// The MySQL user the replay runs as (over the socket).
        #[arg(long, default_value = "vt_dba")]
        user: String,
        /// Where the script writes its result once its checks pass, as the mysqld's
        /// container sees it: bytes replayed, when the last applied transaction began,
        /// the server's gtid_executed (what the recovery Pod reports).
        #[arg(long)]
        result_file: Option<String>,
    },
}

fn main() -> ExitCode {
    match Cli::<Command>::parse_as("vtsnap-pitr", ABOUT) {
        Command::Run { args } => run_recovery(args),
        Command::Archive { args } => archive(args),
        Command::Plan { args } => match prepare(&args) {
            Ok(p) => p.line().print(),
            Err(e) => e,
        },
        Command::Fetch {
            args,
            dest,
            seen_as,
            socket,
            user,
            result_file,
        } => match prepare(&args) {
            Ok(p) => fetch(
                &p,
                &dest,
                seen_as.as_deref(),
                Client { socket, user },
                result_file,
            ),
            Err(e) => e,
        },
    }
    .into()
}

fn archive(a: ArchiveArgs) -> Exit {
    let name = a.shard.name();
    let opts = ArchiveOptions {
        archive: a.storage.place(),
        mode: if a.dry_run { Mode::DryRun } else { Mode::Take },
        backup_limit: a.backup_timeout.get(),
    };
    vtsnap_core::cli::with_cluster(&a.shard.config, |config, kube| async move {
        run::archive(&kube, &config, &name, &opts).await.print()
    })
}

fn run_recovery(a: RunArgs) -> Exit {
    let target = match a.to.target(Timestamp::now()) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let archive = match archive_source(&a) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let (mysqld_resources, image_pull_secrets) = match a.pod.checked() {
        Ok(checked) => checked,
        Err(e) => return usage(e),
    };
    let settings = Settings {
        restore_image: a.restore_image.clone(),
        pitr_image: a.pitr_image.clone(),
        recovery_uid: vtsnap_core::naming::TabletUid::new(recovery::defaults::RECOVERY_UID),
        mysqld_command: "mysqld".into(),
        mysqld_resources,
        deadline_seconds: a.deadline.get().as_secs(),
        ready_seconds: recovery::defaults::READY_SECONDS,
        archive,
        image_pull_secrets,
    };
    let opts = RecoverOptions {
        settings,
        archive: a.storage.place(),
        target,
        snapshot: a.to.snapshot.clone(),
        after: a.after,
        owner: a.owner.owner(),
        dry_run: a.dry_run,
    };
    let name = a.shard.name();
    vtsnap_core::cli::with_cluster(&a.shard.config, |config, kube| async move {
        match config.shard(&name) {
            Ok(c) => recover::recover(&kube, &c.shard, &opts).await.print(),
            Err(e) => usage(e.to_string()),
        }
    })
}

/// The archive as the recovery Pod reaches it, from `run`'s flags, checked.
fn archive_source(a: &RunArgs) -> Result<ArchiveSource, String> {
    match (&a.storage.archive_root, &a.storage.archive_url) {
        (_, Some(url)) => {
            // Refused here, before any object is made, as the fetch container would.
            vtsnap_pitr::archive::Archive::new(&a.storage.place(), "k", "s")
                .map_err(|e| e.to_string())?;
            if let Some(secret) = &a.archive_secret {
                vtsnap_core::k8s_names::dns_subdomain(secret).map_err(|e| {
                    format!(
                        "--archive-secret {}: {e}",
                        vtsnap_core::k8s_names::escape_controls(secret)
                    )
                })?;
            }
            Ok(ArchiveSource::Store {
                url: url.clone(),
                secret: a.archive_secret.clone(),
            })
        }
        (Some(root), None) => {
            let text = a
                .archive_volume
                .as_deref()
                .ok_or("--archive-root needs --archive-volume: how the recovery Pod mounts it")?;
            match serde_json::from_str(text) {
                Ok(v @ serde_json::Value::Object(_)) => Ok(ArchiveSource::Volume {
                    root: root.display().to_string(),
                    source: v,
                }),
                Ok(_) => Err("--archive-volume: not a JSON object (a Pod volume source)".into()),
                Err(e) => Err(format!("--archive-volume: not JSON: {e}")),
            }
        }
        (None, None) => Err("--archive-root or --archive-url is needed".into()),
    }
}

/// Runs `work` (an object store's requests) on a runtime of this thread.
fn block_on<F: std::future::Future>(work: F) -> Result<F::Output, Exit> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Ok(rt.block_on(work)),
        Err(e) => {
            eprintln!("cannot start an async runtime: {e}");
            Err(Exit::Failed)
        }
    }
}

fn usage(message: String) -> Exit {
    eprintln!("{message}");
    Exit::Usage
}

/// What was read, and the choice made on it.
struct Prepared {
    shard: ShardRef,
    target: Target,
    archive: Archive,
    observed: Observed,
    bases: Vec<Base>,
    passed: Vec<Passed>,
    chosen: Result<chain::Plan, Vec<(String, chain::Refusal)>>,
}

impl Prepared {
    fn line(&self) -> PlanLine {
        PlanLine::new(
            self.shard.to_string(),
            &self.target,
            self.chosen.clone(),
            chain::window(&self.bases, &self.observed.increments),
            &self.observed,
            self.passed.clone(),
        )
    }
}

fn prepare(args: &PlanArgs) -> Result<Prepared, Exit> {
    let now = Timestamp::now();
    let shard = ShardRef::parse_path(&args.shard).map_err(|e| usage(format!("--shard: {e}")))?;
    let target = args.to.target(now).map_err(usage)?;
    let snapshots =
        vtsnap_core::dump::read(&args.objects).map_err(|e| usage(format!("--objects: {e}")))?;
    let keyspace_shard = shard.shard.to_string();
    let place = args.storage.place();
    let archive = Archive::new(&place, &shard.keyspace, &keyspace_shard).map_err(|e| match e {
        vtsnap_pitr::archive::ArchiveError::Url { .. } => usage(e.to_string()),
        _ => usage(format!("--shard: {e}")),
    })?;
    let flag = match place {
        ArchivePlace::Folder(_) => "--archive-root",
        ArchivePlace::Url { .. } => "--archive-url",
    };
    let observed = block_on(read_archive(
        &archive,
        &shard.keyspace,
        &keyspace_shard,
        now,
    ))?
    .map_err(|e| usage(format!("{flag}: {e}")))?;
    let (bases, passed) = bases(&snapshots, &shard);
    if let Some(name) = &args.to.snapshot {
        named_base(name, &bases, &passed, &shard).map_err(usage)?;
    }
    let chosen = chain::choose(
        &bases,
        &observed.increments,
        &target,
        args.to.snapshot.as_deref(),
    );
    Ok(Prepared {
        shard,
        target,
        archive,
        observed,
        bases,
        passed,
        chosen,
    })
}

fn fetch(
    p: &Prepared,
    dest: &Path,
    seen_as: Option<&Path>,
    client: Client,
    result_file: Option<String>,
) -> Exit {
    let line = p.line();
    let Ok(plan) = &p.chosen else {
        return line.print();
    };
    let (Some(base), Some(increments)) = (
        p.bases.iter().find(|b| b.name == plan.base),
        plan.increments
            .iter()
            .map(|n| p.observed.increments.iter().find(|i| &i.name == n))
            .collect::<Option<Vec<_>>>(),
    ) else {
        eprintln!("the plan names a snapshot or increment that was not read");
        return Exit::Failed;
    };
    let fetched = match block_on(fetch_all(&p.archive, increments.iter().copied(), dest)) {
        Err(exit) => return exit,
        Ok(Ok(f)) => f,
        Ok(Err(e)) => {
            eprintln!("{e}");
            return Exit::Failed;
        }
    };
    let seen_as = seen_as.unwrap_or(dest);
    let files: Vec<PathBuf> = fetched
        .iter()
        .map(|f| seen_as.join(f.path.strip_prefix(dest).unwrap_or(&f.path)))
        .collect();
    let guard = replay::guard(base, &increments, &p.target);
    let bytes = fetched.iter().map(|f| f.bytes).sum();
    let report = match result_file {
        Some(path) => match last_transaction(&fetched, &p.target) {
            Ok(last) => Some(replay::Report {
                path,
                bytes,
                last_transaction: last,
            }),
            Err(e) => {
                eprintln!("{e}");
                return Exit::Failed;
            }
        },
        None => None,
    };
    let script = match replay::script(&files, &p.target, &client, &guard, report.as_ref()) {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let script_path = dest.join("replay.sh");
    if let Err(e) = std::fs::write(&script_path, script) {
        eprintln!("cannot write {}: {e}", script_path.display());
        return Exit::Failed;
    }
    FetchLine {
        plan: line,
        files: files.iter().map(|f| f.display().to_string()).collect(),
        bytes,
        script: seen_as.join("replay.sh").display().to_string(),
    }
    .print()
}
