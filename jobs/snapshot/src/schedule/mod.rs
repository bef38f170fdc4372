//! `vtsnap-snapshot schedule`: one snapshot CronJob per shard of every configured cluster,
//! one drill CronJob when the chart's drills are on, and one binlog-archive CronJob when
//! the chart's archive is on and the shard's `pitr.enabled`, made from the chart's templates
//! and kept in step with the shards (docs/design.md §5.8).
//! observe → decide (pure) → act → report, as every program.

pub mod act;
pub mod decide;
pub mod names;
pub mod observe;
pub mod report;

use std::path::Path;

use serde_json::Value;
use vtsnap_core::cli::Output;
use vtsnap_core::config::Config;
use vtsnap_core::exit::Exit;

fn print(plan: &decide::Plan, outcomes: Option<&[act::Outcome]>, output: Output) {
    if output == Output::Table {
        print!("{}", report::table(plan));
    }
    println!("{}", report::summary(plan, outcomes));
}

/// One reconciliation: observe, decide, act.
pub async fn reconcile(
    kube: &kube::Client,
    config: &Config,
    namespace: &str,
    template: &str,
) -> (decide::Plan, Vec<act::Outcome>) {
    let seen = observe::observe(kube, config, namespace, template).await;
    let plan = decide::plan(config, &seen);
    let outcomes = act::act(kube, namespace, &plan).await;
    (plan, outcomes)
}

/// `schedule run`: observe, decide, act, report. Exit 0 when every read and write went
/// through, 1 when one did not (what could be done was done).
pub fn run(config: &Path, namespace: &str, template: &str, output: Output) -> Exit {
    vtsnap_core::cli::with_cluster(config, |config, kube| async move {
        let (plan, outcomes) = reconcile(&kube, &config, namespace, template).await;
        print(&plan, Some(&outcomes), output);
        report::exit(&plan, &outcomes)
    })
}

/// `schedule plan`: the decision only, from the cluster or from a dump (`--objects`),
/// where vtctld is not asked and so no `shard-gone` deletion is planned (docs/schedule.md).
pub fn plan(
    config_path: &Path,
    namespace: Option<&str>,
    template: &str,
    objects: Option<&Path>,
    output: Output,
) -> Exit {
    let Some(objects) = objects else {
        let Some(namespace) = namespace else {
            eprintln!("schedule plan: --namespace (the template's) or --objects is needed");
            return Exit::Usage;
        };
        return vtsnap_core::cli::with_cluster(config_path, |config, kube| async move {
            let plan = decide::plan(
                &config,
                &observe::observe(&kube, &config, namespace, template).await,
            );
            print(&plan, None, output);
            if plan.problems.is_empty() {
                Exit::Ok
            } else {
                Exit::Failed
            }
        });
    };
    let config: Config = match vtsnap_core::cli::load_config(config_path) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let items = match read_dump(objects) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("--objects {}: {e}", objects.display());
            return Exit::Usage;
        }
    };
    let plan = decide::plan(&config, &observe::from_dump(&config, &items, template));
    print(&plan, None, output);
    if plan.problems.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    }
}

/// The `items` of a `kubectl get … -o json` List, bounded as every dump is.
fn read_dump(path: &Path) -> Result<Vec<Value>, String> {
    vtsnap_core::dump::read(path).map_err(|e| e.to_string())
}
