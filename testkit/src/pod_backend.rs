//! The fake vtctld's link to tablet Pods run by a real kubelet: replication control, GTID
//! positions and ExecuteFetchAsDBA run on each Pod's MariaDB with the `mariadb` client,
//! through `kubectl exec` into its `mysqld` container (what vttablet would do on its own
//! socket). The account is the one [`crate::mariadb::pod_mysqld_command`] creates.
//! On tablet Pods of real Vitess ([`crate::vitess::pods`]) it only runs SQL, with the
//! `mysql` client as `vt_dba`, the account Vitess's init script makes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use futures::FutureExt;
use futures::future::BoxFuture;
use vtsnap_core::naming::TabletAlias;

use crate::fake_vtctld::{Backend, FetchResult};
use crate::mariadb::{POD_ADMIN_PASSWORD, POD_ADMIN_USER};

/// Which server the Pods' `mysqld` container runs, so which client and account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSqlClient {
    /// MariaDB under the test kit's supervisor: `mariadb` as the supervisor's admin.
    MariaDb,
    /// MySQL under a real mysqlctld: `mysql` as `vt_dba` (no password on the socket).
    VitessMysql,
}

impl PodSqlClient {
    fn command(self) -> Vec<String> {
        match self {
            Self::MariaDb => vec![
                "mariadb".into(),
                "--socket=/vt/socket/mysql.sock".into(),
                "-N".into(),
                "-B".into(),
                format!("-u{POD_ADMIN_USER}"),
                format!("-p{POD_ADMIN_PASSWORD}"),
            ],
            Self::VitessMysql => [
                "mysql",
                "--no-defaults",
                "--socket=/vt/socket/mysql.sock",
                "-N",
                "-B",
                "-uvt_dba",
            ]
            .map(str::to_owned)
            .to_vec(),
        }
    }
}

/// Tablet alias → its Pod (namespace, name). Clones share the map.
#[derive(Debug, Clone)]
pub struct PodBackend {
    client: PodSqlClient,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    pods: Arc<RwLock<HashMap<String, (String, String)>>>,
}

impl PodBackend {
    pub fn new(kubectl: &Path, kubeconfig: &Path) -> Self {
        Self::with_client(PodSqlClient::MariaDb, kubectl, kubeconfig)
    }

    pub fn with_client(client: PodSqlClient, kubectl: &Path, kubeconfig: &Path) -> Self {
        Self {
            client,
            kubectl: kubectl.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            pods: Arc::default(),
        }
    }

    pub fn insert(&self, alias: &TabletAlias, namespace: &str, pod: &str) {
        if let Ok(mut m) = self.pods.write() {
            m.insert(alias.to_string(), (namespace.to_owned(), pod.to_owned()));
        }
    }

    /// Runs `sql` on the tablet's database server; its rows, tab-separated cells.
    pub fn query(
        &self,
        alias: &TabletAlias,
        sql: &str,
    ) -> BoxFuture<'static, Result<Vec<Vec<String>>, String>> {
        let pod = self
            .pods
            .read()
            .ok()
            .and_then(|m| m.get(&alias.to_string()).cloned());
        let (client, kubectl, kubeconfig, sql, alias) = (
            self.client.command(),
            self.kubectl.clone(),
            self.kubeconfig.clone(),
            sql.to_owned(),
            alias.to_string(),
        );
        async move {
            let (ns, pod) = pod.ok_or_else(|| format!("unknown tablet {alias}"))?;
            tokio::task::spawn_blocking(move || {
                let out = std::process::Command::new(kubectl)
                    .arg("--kubeconfig")
                    .arg(kubeconfig)
                    .args(["-n", &ns, "exec", &pod, "-c", "mysqld", "--"])
                    .args(client)
                    .args(["-e", &sql])
                    .output()
                    .map_err(|e| format!("kubectl: {e}"))?;
                if !out.status.success() {
                    return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
                }
                Ok(String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(|l| l.split('\t').map(str::to_owned).collect())
                    .collect())
            })
            .await
            .map_err(|e| e.to_string())?
        }
        .boxed()
    }

    /// The first cell of the first row, or "" (panics when the query fails).
    pub async fn value(&self, alias: &TabletAlias, sql: &str) -> String {
        self.query(alias, sql)
            .await
            .unwrap_or_else(|e| panic!("{alias}: {sql}: {e}"))
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next())
            .unwrap_or_default()
    }
}

impl Backend for PodBackend {
    fn stop_replication(&self, alias: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        self.query(&alias, "STOP SLAVE")
            .map(|r| r.map(drop))
            .boxed()
    }

    fn start_replication(&self, alias: TabletAlias) -> BoxFuture<'static, Result<(), String>> {
        self.query(&alias, "START SLAVE")
            .map(|r| r.map(drop))
            .boxed()
    }

    fn position(&self, alias: TabletAlias) -> BoxFuture<'static, Option<String>> {
        self.query(&alias, "SELECT @@gtid_current_pos")
            .map(|r| {
                let gtid = r.ok()?.into_iter().next()?.into_iter().next()?;
                Some(format!("MariaDB/{gtid}"))
            })
            .boxed()
    }

    fn execute_fetch(
        &self,
        alias: TabletAlias,
        query: String,
    ) -> BoxFuture<'static, Option<FetchResult>> {
        self.query(&alias, &query)
            .map(|r| {
                Some(r.map(|rows| {
                    rows.into_iter()
                        .map(|row| {
                            row.into_iter()
                                .map(|c| (c != "NULL").then_some(c))
                                .collect()
                        })
                        .collect()
                }))
            })
            .boxed()
    }
}
