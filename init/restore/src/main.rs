use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use vtsnap_core::cli::CommonArgs;
use vtsnap_core::naming::TabletUid;
use vtsnap_core::restore_pod;
use vtsnap_restore::act::Mode;
use vtsnap_restore::{Options, report, run};

/// Make a tablet volume cloned from another tablet's snapshot belong to this tablet.
///
/// Runs as an init container of a vitess-operator tablet pool. On a volume that holds
/// exactly one other tablet's `vt_<uid>` directory it renames it to this tablet's UID,
/// renames binlogs, rewrites my.cnf and the binlog index, picks a fresh server-id,
/// removes auto.cnf and drops stale relay logs. An empty volume, or one that already
/// belongs to this tablet, is left alone. Anything ambiguous is refused (exit 3) without
/// changing anything. The last stdout line is a JSON summary.
#[derive(Debug, Parser)]
#[command(
    name = "vtsnap-restore",
    version = vtsnap_core::cli::VERSION,
    after_help = "Examples:\n  \
      vtsnap-restore --vtdataroot /vt/vtdataroot --tablet-uid 2548885007\n  \
      vtsnap-restore --vtdataroot /mnt/clone/vtdataroot --tablet-uid 0000000102 --dry-run\n  \
      VTSNAP_TABLET_UID=102 vtsnap-restore\n\n\
      Exit codes: 0 done or nothing to do, 1 failed part-way (run again to finish),\n  \
      2 usage error, 3 refused (nothing changed)."
)]
struct Cli {
    /// The tablet volume's vtdataroot directory (the PVC's `vtdataroot` subPath).
    #[arg(long, env = restore_pod::ENV_VTDATAROOT, default_value = restore_pod::VTDATAROOT)]
    vtdataroot: PathBuf,

    /// This tablet's UID, padded (0000000101) or not (101).
    #[arg(long, env = restore_pod::ENV_TABLET_UID)]
    tablet_uid: TabletUid,

    /// Use this new server-id instead of a random one in [100, 2^31).
    #[arg(long, env = "VTSNAP_SERVER_ID")]
    server_id: Option<u32>,

    /// Print the plan and change nothing.
    #[arg(long, env = "VTSNAP_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
    dry_run: bool,

    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    // The last stdout line is a JSON summary, usage errors included.
    let cli: Cli = match vtsnap_core::cli::parse(|_, message| report::bad_flags(message)) {
        Ok(c) => c,
        Err(exit) => return exit.into(),
    };
    cli.common.init();
    let opts = Options {
        vtdataroot: cli.vtdataroot,
        tablet_uid: cli.tablet_uid,
        server_id: cli.server_id,
        dry_run: cli.dry_run,
    };
    report::end(
        &run(&opts),
        Mode::from_dry_run(opts.dry_run),
        opts.tablet_uid,
    )
    .into()
}
