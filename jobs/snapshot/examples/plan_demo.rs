//! `vtsnap-snapshot plan` on a made-up shard, against the test kit's fake Kubernetes API
//! and fake vtctld (no cluster needed): one primary, three replicas, one of them lagging.
//! Used by `make demo-plan` and for the README's example output.
//!
//! `cargo run -p vtsnap-snapshot --example plan_demo [-- --json]`

use std::process::ExitCode;
use vtsnap_core::shard::ShardName;

use vtsnap_core::config::Config;
use vtsnap_snapshot::{plan, render};
use vtsnap_testkit::fake_kube::FakeKube;
use vtsnap_testkit::fake_vtctld::FakeVtctld;
use vtsnap_testkit::fixtures::shard;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let json = std::env::args().any(|a| a == "--json");
    let fixture = shard()
        .named("commerce", "-80")
        .replicas(4)
        .primary(1)
        .lagging(3, 45);
    let kube = FakeKube::new();
    let vtctld = FakeVtctld::new();
    fixture.install(&kube, &vtctld);
    let server = vtctld.serve().await;
    let yaml = format!(
        "clusters:\n- name: example\n  namespace: vitess\n  vtctld: \"{}\"\n  retention: {{maxCount: 7}}\n  \
         keyspaces:\n    commerce:\n      snapshot: {{volumeSnapshotClassName: topolvm-snapclass}}\n      \
         shards:\n        \"-80\": {{deletionPolicy: {{whenDeleted: Delete}}}}\n",
        server.endpoint()
    );
    let config = match Config::from_yaml(&yaml) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match plan::plan(
        &config,
        &ShardName::new("example", "commerce", "-80"),
        kube.client(),
    )
    .await
    {
        Ok(report) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                print!("{}", render::table(&report));
            }
            ExitCode::from(report.exit())
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(e.exit())
        }
    }
}
