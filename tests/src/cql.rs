//! The CQL cluster the CQL store's fault tests run on: three Apache
//! Cassandra nodes on 127.0.0.1/2/3 that `scripts/cassandra.sh` starts
//! for the test (new, in `SWITCHBOARD_CASSANDRA_DIR`) and stops when it
//! ends, driven by that script and by signals to the nodes' pids. Nothing
//! else may run CQL on those addresses meanwhile: `scripts/test.sh` stops
//! the conformance suite's node before the integration tests.

use std::path::PathBuf;
use std::time::Duration;

/// Set (to 1) where the tests may start Cassandra: `scripts/test.sh`.
const VAR: &str = "SWITCHBOARD_TEST_CQL_CLUSTER";

pub struct CqlNodes {
    /// `host:port` of each node, node 1 first.
    nodes: Vec<String>,
    script: PathBuf,
    /// Held until the nodes are wiped (fields drop after `Drop::drop`):
    /// the next test's nodes start on the same addresses.
    _one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
}

/// One set of nodes at a time in this process.
fn nodes_lock() -> std::sync::Arc<tokio::sync::Mutex<()>> {
    static LOCK: std::sync::OnceLock<std::sync::Arc<tokio::sync::Mutex<()>>> =
        std::sync::OnceLock::new();
    LOCK.get_or_init(Default::default).clone()
}

impl CqlNodes {
    /// A new cluster of three nodes, or `None` where `SWITCHBOARD_TEST_CQL_
    /// CLUSTER` is not set: the caller's test says it skipped, except
    /// where `CI` is set, where a missing cluster fails it.
    pub async fn start() -> Option<Self> {
        if std::env::var(VAR).unwrap_or_default().trim() != "1" {
            assert!(
                std::env::var_os("CI").is_none(),
                "{VAR} is not set, and CI never skips the CQL fault tests: run scripts/test.sh"
            );
            eprintln!("CQL fault test skipped: {VAR} is not 1 (scripts/test.sh sets it)");
            return None;
        }
        let script = crate::bins::workspace_root().join("scripts/cassandra.sh");
        let nodes = (1..=3).map(|i| format!("127.0.0.{i}:9042")).collect();
        let cluster = Self {
            nodes,
            script,
            _one_at_a_time: nodes_lock().lock_owned().await,
        };
        cluster.script(&["wipe".into()]).await;
        cluster.script(&["start".into(), "3".into()]).await;
        Some(cluster)
    }

    pub fn contact_points(&self) -> Vec<String> {
        self.nodes.clone()
    }

    async fn script(&self, args: &[String]) -> String {
        let out = tokio::process::Command::new("bash")
            .arg(&self.script)
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/cassandra.sh {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Node `i`'s (from 0) process id while it runs.
    pub async fn pid(&self, i: usize) -> Option<u32> {
        self.script(&["pid".into(), (i + 1).to_string()])
            .await
            .parse()
            .ok()
    }

    fn signal(pid: u32, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// SIGKILL to node `i`, and waits until it is gone.
    pub async fn kill9(&self, i: usize) {
        let pid = self.pid(i).await.expect("the node runs");
        Self::signal(pid, "-KILL");
        for _ in 0..100 {
            if self.pid(i).await.is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("CQL node {} did not die", i + 1);
    }

    /// SIGSTOP to node `i`.
    pub async fn pause(&self, i: usize) {
        Self::signal(self.pid(i).await.expect("the node runs"), "-STOP");
    }

    /// SIGCONT to node `i`.
    pub async fn resume(&self, i: usize) {
        Self::signal(self.pid(i).await.expect("the node runs"), "-CONT");
    }

    /// Starts node `i` again on its data and waits until it answers CQL.
    pub async fn restart(&self, i: usize) {
        self.script(&["start-node".into(), (i + 1).to_string()])
            .await;
    }
}

impl Drop for CqlNodes {
    /// Stops every node (a stopped one is resumed first, so that it can
    /// end) and deletes their data.
    fn drop(&mut self) {
        for i in 1..=self.nodes.len() {
            let pid = std::process::Command::new("bash")
                .arg(&self.script)
                .args(["pid", &i.to_string()])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .unwrap_or_default();
            if !pid.is_empty() {
                let _ = std::process::Command::new("kill")
                    .args(["-CONT", &pid])
                    .status();
            }
        }
        let _ = std::process::Command::new("bash")
            .arg(&self.script)
            .arg("wipe")
            .status();
    }
}
