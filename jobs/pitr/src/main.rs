use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use k8s_openapi::jiff::Timestamp;
use vtsnap_core::cli::Cli;
use vtsnap_core::coverage::{GtidSet, Text};
use vtsnap_core::exit::Exit;
use vtsnap_core::pitr::chain::{self, Target};
use vtsnap_core::shard::ShardRef;
use vtsnap_core::snapshot::GtidFlavor;
use vtsnap_pitr::archive::FileArchive;
use vtsnap_pitr::observe::{bases, read_archive};
use vtsnap_pitr::report::PlanLine;

/// `--help`'s first line.
const ABOUT: &str =
    "Point-in-time recovery of a shard from a snapshot and Vitess's binlog archive.";

#[derive(Debug, Subcommand)]
enum Command {
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
        /// The shard, `namespace/cluster/keyspace/shard`.
        #[arg(long, env = "VTSNAP_SHARD")]
        shard: String,
        /// The VolumeSnapshots, as `kubectl get volumesnapshots -A -o json` prints them.
        #[arg(long)]
        objects: PathBuf,
        /// The root of Vitess's file backup storage (`--file-backup-storage-root`).
        #[arg(long, env = "VTSNAP_ARCHIVE_ROOT")]
        archive_root: PathBuf,
        /// Recover every transaction committed before this time (RFC 3339).
        #[arg(long, conflicts_with = "to_gtid", required_unless_present = "to_gtid")]
        to_time: Option<String>,
        /// Recover every transaction of this GTID set (as `@@gtid_executed` prints it).
        #[arg(long)]
        to_gtid: Option<String>,
        /// Start from this snapshot only.
        #[arg(long)]
        snapshot: Option<String>,
    },
}

fn main() -> ExitCode {
    match Cli::<Command>::parse_as("vtsnap-pitr", ABOUT) {
        Command::Plan {
            shard,
            objects,
            archive_root,
            to_time,
            to_gtid,
            snapshot,
        } => plan(&PlanArgs {
            shard,
            objects,
            archive_root,
            to_time,
            to_gtid,
            snapshot,
        }),
    }
    .into()
}

struct PlanArgs {
    shard: String,
    objects: PathBuf,
    archive_root: PathBuf,
    to_time: Option<String>,
    to_gtid: Option<String>,
    snapshot: Option<String>,
}

fn usage(message: String) -> Exit {
    eprintln!("{message}");
    Exit::Usage
}

fn target(args: &PlanArgs, now: Timestamp) -> Result<Target, String> {
    match (&args.to_time, &args.to_gtid) {
        (Some(t), None) => {
            let at: Timestamp = t
                .parse()
                .map_err(|e| format!("--to-time {t:?}: not an RFC 3339 time: {e}"))?;
            if at > now {
                return Err(format!("--to-time {at}: after now ({now})"));
            }
            Ok(Target::Before(at))
        }
        (None, Some(g)) => GtidSet::parse(GtidFlavor::Mysql56, g, Text::Server)
            .map(Target::Through)
            .map_err(|e| format!("--to-gtid {g:?}: {e}")),
        _ => Err("give one of --to-time and --to-gtid".into()),
    }
}

fn plan(args: &PlanArgs) -> Exit {
    let now = Timestamp::now();
    let shard = match ShardRef::parse_path(&args.shard) {
        Ok(s) => s,
        Err(e) => return usage(format!("--shard: {e}")),
    };
    let target = match target(args, now) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let snapshots = match vtsnap_core::dump::read(&args.objects) {
        Ok(items) => items,
        Err(e) => return usage(format!("--objects: {e}")),
    };
    let keyspace_shard = shard.shard.to_string();
    let archive = FileArchive::new(&args.archive_root, &shard.keyspace, &keyspace_shard);
    let observed = match read_archive(&archive, &shard.keyspace, &keyspace_shard, now) {
        Ok(o) => o,
        Err(e) => return usage(format!("--archive-root: {e}")),
    };
    let (bases, passed) = bases(&snapshots, &shard);
    if let Some(name) = &args.snapshot
        && !bases.iter().any(|b| &b.name == name)
    {
        return match passed.iter().find(|p| &p.name == name) {
            Some(p) => usage(format!("--snapshot {name}: not a base: {}", p.why)),
            None => usage(format!(
                "--snapshot {name}: no snapshot of {shard} has that name"
            )),
        };
    }
    let chosen = chain::choose(
        &bases,
        &observed.increments,
        &target,
        args.snapshot.as_deref(),
    );
    let window = chain::window(&bases, &observed.increments);
    PlanLine::new(
        shard.to_string(),
        &target,
        chosen,
        window,
        &observed,
        passed,
    )
    .print()
}
