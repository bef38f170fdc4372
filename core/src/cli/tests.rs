use std::time::{Duration, Instant};

use clap::{CommandFactory, Parser};

use super::*;

/// A binary's parser as the mains build theirs.
#[derive(Debug, Parser)]
struct Fake {
    #[command(flatten)]
    common: CommonArgs,
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

fn parse(args: &[&str]) -> Result<Fake, clap::Error> {
    Fake::try_parse_from(std::iter::once("fake").chain(args.iter().copied()))
}

#[test]
fn output_is_table_or_json_and_nothing_else() {
    assert_eq!(parse(&[]).unwrap().output, Output::Table, "the default");
    assert_eq!(parse(&["--output", "json"]).unwrap().output, Output::Json);
    assert_eq!(parse(&["--output", "table"]).unwrap().output, Output::Table);
    for bad in ["xml", "JSON", ""] {
        let e = parse(&["--output", bad]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue, "{bad:?}");
    }
}

#[test]
fn log_format_is_global_from_its_env_and_auto_by_default() {
    assert_eq!(parse(&[]).unwrap().common.log_format, LogFormat::Auto);
    assert_eq!(
        parse(&["--log-format", "json"]).unwrap().common.log_format,
        LogFormat::Json
    );
    let cmd = Fake::command();
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some("log-format"))
        .unwrap();
    assert_eq!(
        arg.get_env().and_then(|e| e.to_str()),
        Some("VTSNAP_LOG_FORMAT")
    );
    assert!(arg.is_global_set());
}

#[test]
fn a_config_that_cannot_be_loaded_is_a_usage_error() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(
        load_config(&d.path().join("missing.yaml")).unwrap_err(),
        Exit::Usage
    );
    let bad = d.path().join("bad.yaml");
    std::fs::write(&bad, "clusters:\n- name: example\n  nmespace: vitess\n").unwrap();
    assert_eq!(load_config(&bad).unwrap_err(), Exit::Usage);
    let good = d.path().join("good.yaml");
    std::fs::write(&good, "clusters:\n- name: example\n  namespace: vitess\n").unwrap();
    assert_eq!(load_config(&good).unwrap().clusters[0].name, "example");
}

#[test]
fn a_bad_config_never_starts_the_main() {
    let d = tempfile::tempdir().unwrap();
    let exit = with_cluster(&d.path().join("missing.yaml"), |_, _| async {
        panic!("must not run")
    });
    assert_eq!(exit, Exit::Usage);
}

#[test]
fn block_on_returns_the_mains_exit_without_waiting_for_blocking_work() {
    let started = Instant::now();
    let exit = block_on(async {
        // Like the hold loop's stdin read: blocking work nobody will finish.
        drop(tokio::task::spawn_blocking(|| {
            std::thread::sleep(Duration::from_secs(5));
        }));
        Exit::Refused
    });
    assert_eq!(exit, Exit::Refused);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_textfile_is_replaced_whole_and_no_temp_file_is_left() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("vtsnap.prom");
    write_atomic(&p, "a 1\n").unwrap();
    write_atomic(&p, "b 2\n").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "b 2\n");
    assert_eq!(dir_names(d.path()), ["vtsnap.prom"]);
}

#[test]
fn a_failed_write_leaves_no_temp_file() {
    let d = tempfile::tempdir().unwrap();
    // A directory in the way: the rename fails after the temp file was written.
    let p = d.path().join("vtsnap.prom");
    std::fs::create_dir(&p).unwrap();
    std::fs::write(p.join("keep"), "x").unwrap();
    assert!(write_atomic(&p, "a 1\n").is_err());
    assert_eq!(dir_names(d.path()), ["vtsnap.prom"]);
    assert!(
        write_atomic(Path::new("/"), "a 1\n").is_err(),
        "no file name"
    );
    // Not logged as success, not a panic: metrics never fail a run.
    write_metrics_file(&p, "a 1\n");
    assert_eq!(dir_names(d.path()), ["vtsnap.prom"]);
}

#[test]
fn a_reader_sees_the_old_file_or_the_new_one_never_a_mix() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("vtsnap.prom");
    let old = "old 1\n".repeat(20_000);
    let new = "new 2\n".repeat(20_000);
    write_atomic(&p, &old).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (p, old, new, done) = (p.clone(), old.clone(), new.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                let seen = std::fs::read_to_string(&p).unwrap();
                assert!(
                    seen == old || seen == new,
                    "a partial file: {} bytes",
                    seen.len()
                );
                reads += 1;
            }
            reads
        })
    };
    for i in 0..50 {
        write_atomic(&p, if i % 2 == 0 { &new } else { &old }).unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_eq!(dir_names(d.path()), ["vtsnap.prom"]);
}

/// A parser with subcommands, as the mains build theirs.
#[derive(Debug, Parser)]
struct FakeWithCommands {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: FakeCommand,
}

#[derive(Debug, clap::Subcommand)]
enum FakeCommand {
    Run {
        #[arg(long)]
        shard: String,
        #[arg(long, env = "VTSNAP_FAKE_DRY_RUN", action = clap::ArgAction::SetTrue, value_parser = clap::builder::BoolishValueParser::new())]
        dry_run: bool,
        #[arg(long, value_parser = positive_duration)]
        interval: Option<GoDuration>,
    },
    Plan,
}

fn usage_of(args: &[&str]) -> (Option<String>, String) {
    let mut seen = None;
    let r = parse_from::<FakeWithCommands, _, _>(
        std::iter::once("fake").chain(args.iter().copied()),
        |sub, message| seen = Some((sub.map(str::to_owned), message.to_owned())),
    );
    assert_eq!(r.unwrap_err(), Exit::Usage);
    seen.expect("the usage error was handed on")
}

#[test]
fn a_usage_error_is_handed_on_with_its_subcommand() {
    let (sub, message) = usage_of(&["--log-format", "text", "run", "--bogus"]);
    assert_eq!(sub.as_deref(), Some("run"));
    assert!(message.contains("--bogus"), "{message}");
    assert!(!message.starts_with("error:"), "{message}");
    let (sub, _) = usage_of(&["run"]);
    assert_eq!(sub.as_deref(), Some("run"), "a missing required flag");
    let (sub, _) = usage_of(&["plan", "x"]);
    assert_eq!(sub.as_deref(), Some("plan"));
    let (sub, _) = usage_of(&[]);
    assert_eq!(sub, None, "no subcommand at all");
    let ok = parse_from::<FakeWithCommands, _, _>(["fake", "run", "--shard", "-"], |_, _| {
        panic!("not a usage error")
    })
    .unwrap();
    assert!(matches!(
        ok.command,
        FakeCommand::Run { dry_run: false, .. }
    ));
}

#[test]
fn boolean_flags_take_the_usual_spellings() {
    let parse = |args: &[&str]| {
        FakeWithCommands::try_parse_from(["fake", "run", "--shard", "-"].iter().chain(args)).map(
            |c| match c.command {
                FakeCommand::Run { dry_run, .. } => dry_run,
                FakeCommand::Plan => unreachable!(),
            },
        )
    };
    assert!(parse(&["--dry-run"]).unwrap());
    assert!(!parse(&[]).unwrap());
    // The env spellings are checked through the binaries (tests/cli.rs of each).
}

#[test]
fn a_zero_duration_is_refused_where_it_must_be_positive() {
    assert_eq!(
        positive_duration("250ms").unwrap(),
        "250ms".parse().unwrap()
    );
    assert!(matches!(
        positive_duration("0"),
        Err(PositiveDurationError::Zero)
    ));
    assert!(matches!(
        positive_duration("0s"),
        Err(PositiveDurationError::Zero)
    ));
    assert!(matches!(
        positive_duration("soon"),
        Err(PositiveDurationError::Parse(_))
    ));
    let (sub, message) = usage_of(&["run", "--shard", "-", "--interval", "0s"]);
    assert_eq!(sub.as_deref(), Some("run"));
    assert!(message.contains("must be greater than 0"), "{message}");
}

#[test]
fn every_api_call_is_bounded_and_a_watch_fits_inside_the_read_timeout() {
    let t = ApiTimeouts::DEFAULT;
    assert!(t.connect > Duration::ZERO && t.write > Duration::ZERO);
    assert!(
        Duration::from_secs(u64::from(MAX_WATCH_SECONDS)) + Duration::from_secs(5) <= t.read,
        "a watch's server-side timeout must end before the read timeout"
    );
}

/// An API server that accepts connections and never answers.
async fn silent_api_server() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    (addr, task)
}

#[tokio::test]
async fn a_call_to_a_server_that_never_answers_ends_within_its_bound() {
    let (addr, server) = silent_api_server().await;
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    let bound = ApiTimeouts {
        connect: Duration::from_secs(1),
        read: Duration::from_millis(500),
        write: Duration::from_secs(1),
    };
    let client = client_with(config, bound).unwrap();
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client, "vitess");
    let started = Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(20), leases.get("fence")).await;
    let took = started.elapsed();
    let result = got.expect("the call must end on its own, not hang");
    assert!(result.is_err(), "{result:?}");
    assert!(took >= bound.read, "ended before the bound: {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    server.abort();
}

#[tokio::test]
async fn without_the_harness_the_same_call_would_hang() {
    // Why the harness sets a read timeout: kube's own default has none.
    let (addr, server) = silent_api_server().await;
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    assert_eq!(config.read_timeout, None);
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(kube::Client::try_from(config).unwrap(), "vitess");
    let got = tokio::time::timeout(Duration::from_secs(2), leases.get("fence")).await;
    assert!(got.is_err(), "kube's default gave up by itself: {got:?}");
    server.abort();
}

#[test]
fn a_startup_error_names_its_code_and_exit() {
    let d = tempfile::tempdir().unwrap();
    let mut seen = None;
    let exit = with_cluster_or(
        &d.path().join("missing.yaml"),
        |e| seen = Some((e.code(), e.exit())),
        |_, _| async { panic!("must not run") },
    );
    assert_eq!(exit, Exit::Usage);
    assert_eq!(seen, Some(("bad-config", Exit::Usage)));
}
