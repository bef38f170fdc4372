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
