//! Child processes: nats-server and switchboard.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// nats-server with JetStream: one node, or a cluster of nodes joined by
/// routes. Each node keeps its ports once started, so a restart after
/// `kill9` comes back at the same address.
pub struct Nats {
    nodes: Vec<NatsNode>,
    /// Environment of every nats-server (passwords its configuration
    /// reads as `$VAR`).
    env: Vec<(String, String)>,
    pub dir: PathBuf,
}

/// Where one node listens and keeps its data.
#[derive(Debug, Clone)]
pub struct NodePlace {
    pub name: String,
    pub port: u16,
    /// The route port; 0 for a lone node.
    pub cluster_port: u16,
    pub dir: PathBuf,
}

struct NatsNode {
    child: Option<Child>,
    place: NodePlace,
    /// The whole configuration file.
    conf: String,
}

/// A port free now, never handed out before by this process: tests run
/// in parallel, and a port one of them chose but has not bound yet must
/// not go to another (a NATS route port taken by another test's server
/// joins the two clusters).
pub(crate) fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut given = GIVEN.lock().unwrap();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

impl Nats {
    /// One node.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(dir, 1, "").await
    }

    /// `n` nodes joined by routes into one JetStream cluster.
    pub async fn start_cluster(dir: &Path, n: usize) -> Self {
        Self::start_with(dir, n, "").await
    }

    /// `n` nodes, each configured with `extra` besides what the harness
    /// writes (listen address, JetStream, routes).
    pub async fn start_with(dir: &Path, n: usize, extra: &str) -> Self {
        Self::start_custom(dir, n, Vec::new(), |i, places| {
            let mut conf = plain_config(i, places);
            conf.push_str(extra);
            conf
        })
        .await
    }

    /// `n` nodes whose configurations `config` writes, given every node's
    /// place; `env` is the servers' environment.
    pub async fn start_custom(
        dir: &Path,
        n: usize,
        env: Vec<(String, String)>,
        config: impl Fn(usize, &[NodePlace]) -> String,
    ) -> Self {
        crate::run::repeat_panic_messages_last();
        let n = n.max(1);
        let places: Vec<NodePlace> = (0..n)
            .map(|i| NodePlace {
                name: format!("n{}", i + 1),
                port: free_port(),
                cluster_port: if n > 1 { free_port() } else { 0 },
                dir: if n > 1 {
                    dir.join(format!("n{}", i + 1))
                } else {
                    dir.to_path_buf()
                },
            })
            .collect();
        let nodes = (0..n)
            .map(|i| NatsNode {
                child: None,
                place: places[i].clone(),
                conf: config(i, &places),
            })
            .collect();
        let mut nats = Self {
            nodes,
            env,
            dir: dir.to_path_buf(),
        };
        for i in 0..n {
            nats.spawn(i).await;
        }
        nats
    }

    /// The client port of the first node.
    pub fn port(&self) -> u16 {
        self.nodes[0].place.port
    }

    /// Every node's URL, comma-separated: the seed list processes get.
    pub fn url(&self) -> String {
        self.urls().join(",")
    }

    pub fn urls(&self) -> Vec<String> {
        (0..self.nodes.len()).map(|i| self.node_url(i)).collect()
    }

    pub fn node_url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].place.port)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    async fn spawn(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let dir = node.place.dir.clone();
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("nats-server.log"))
            .unwrap();
        let conf = dir.join("nats-server.conf");
        std::fs::write(&conf, &node.conf).unwrap();
        let child = Command::new(crate::bins::nats_server_bin())
            .arg("-c")
            .arg(&conf)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("starting nats-server");
        let port = node.place.port;
        node.child = Some(child);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "nats-server did not start on port {port}; log:\n{}",
            tail(&self.node_log(i), 20)
        );
    }

    /// SIGKILL of every node, like a crash.
    pub async fn kill9(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill9_node(i).await;
        }
    }

    /// Restarts every node.
    pub async fn restart(&mut self) {
        self.kill9().await;
        for i in 0..self.nodes.len() {
            self.spawn(i).await;
        }
    }

    /// SIGKILL of one node.
    pub async fn kill9_node(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill().await;
        }
    }

    /// Starts one node again, at the same ports and with its data.
    pub async fn restart_node(&mut self, i: usize) {
        self.kill9_node(i).await;
        self.spawn(i).await;
    }

    /// The server log of node `i`.
    pub fn node_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.nodes[i].place.dir.join("nats-server.log")).unwrap_or_default()
    }

    /// A client for checks made from the test itself, seeded with every
    /// node.
    pub async fn client(&self) -> async_nats::Client {
        async_nats::connect(self.urls().as_slice())
            .await
            .expect("connecting to nats")
    }
}

/// The harness's own node configuration: loopback, JetStream, and routes
/// to every other node when there are several.
///
/// The store limits are explicit because a node without them takes 75% of
/// the free disk as its limit, and every bounded stream reserves its
/// `max_bytes` against it: on a machine with little disk left, creating the
/// plugin buckets would fail with "insufficient storage resources" although
/// the tests write a few megabytes.
pub fn plain_config(i: usize, places: &[NodePlace]) -> String {
    let node = &places[i];
    let mut conf = format!(
        "server_name: {}\nlisten: 127.0.0.1:{}\nmax_payload: 8MB\njetstream {{ store_dir: \"{}\", max_memory_store: 1GB, max_file_store: 64GB }}\n",
        node.name,
        node.port,
        node.dir.join("jetstream").display()
    );
    if places.len() > 1 {
        let routes: Vec<String> = places
            .iter()
            .map(|n| format!("nats-route://127.0.0.1:{}", n.cluster_port))
            .collect();
        conf.push_str(&format!(
            "cluster {{\n  name: sbtest\n  listen: 127.0.0.1:{}\n  routes: [{}]\n}}\n",
            node.cluster_port,
            routes.join(", ")
        ));
    }
    conf
}

/// A `switchboard` process.
pub struct Proc {
    child: Option<Child>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    log: PathBuf,
    /// The HTTP address, for processes that listen.
    pub addr: Option<std::net::SocketAddr>,
    /// The metrics listener's address (`--metrics-listen`), if any.
    pub metrics_addr: Option<std::net::SocketAddr>,
    ready_marker: &'static str,
    /// How long a start (and each restart) may take to say it is ready.
    ready_within: Duration,
}

/// How long a process may take to say it is ready, unless told otherwise.
pub const READY_WITHIN: Duration = Duration::from_secs(60);

impl Proc {
    /// Starts `switchboard <args>` and waits for the line that says it is ready.
    pub async fn start(
        args: Vec<String>,
        envs: Vec<(String, String)>,
        log: PathBuf,
        ready_marker: &'static str,
    ) -> Self {
        Self::start_within(args, envs, log, ready_marker, READY_WITHIN).await
    }

    /// [`Proc::start`], waiting up to `ready_within` for it to be ready.
    pub async fn start_within(
        args: Vec<String>,
        envs: Vec<(String, String)>,
        log: PathBuf,
        ready_marker: &'static str,
        ready_within: Duration,
    ) -> Self {
        let mut p = Self {
            child: None,
            args,
            envs,
            log,
            addr: None,
            metrics_addr: None,
            ready_marker,
            ready_within,
        };
        p.spawn().await;
        p
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(crate::bins::switchboard_bin());
        command
            .args(&self.args)
            .env(
                "SWITCHBOARD_LOG",
                std::env::var("SWITCHBOARD_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        for (k, v) in &self.envs {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("starting switchboard");
        let stdout = child.stdout.take().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        let wait = async {
            while let Some(line) = rx.recv().await {
                if let Some(rest) = line.strip_prefix("switchboard: listening on http://") {
                    self.addr = Some(rest.trim().parse().unwrap());
                }
                if let Some(rest) = line.strip_prefix("switchboard: metrics on http://") {
                    self.metrics_addr = rest.trim().trim_end_matches("/metrics").parse().ok();
                }
                if line.contains(self.ready_marker) {
                    return true;
                }
            }
            false
        };
        let ready = tokio::time::timeout(self.ready_within, wait).await;
        if !matches!(ready, Ok(true)) {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!(
                "switchboard {:?} did not become ready; log:\n{}",
                self.args,
                tail(&without_backtraces(&log), 40)
            );
        }
    }

    pub fn http(&self) -> String {
        format!("http://{}", self.addr.expect("process listens"))
    }

    pub fn ws(&self) -> String {
        format!("ws://{}", self.addr.expect("process listens"))
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(|c| c.id())
    }

    /// SIGKILL, like a crash.
    pub async fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    /// SIGSTOP: the process stops where it is, its sockets left open, as
    /// in a long stall (a frozen VM, swapping, a debugger); `resume`
    /// lets it go on, unaware of the time that passed.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`Proc::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .args([signal, &pid.to_string()])
                .status();
        }
    }

    /// SIGTERM, and wait for the exit status.
    pub async fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        let pid = c.id()?;
        let _ = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
        tokio::time::timeout(Duration::from_secs(30), c.wait())
            .await
            .ok()?
            .ok()
    }

    /// Waits at most `within` for it to exit by itself.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        tokio::time::timeout(within, c.wait()).await.ok()?.ok()
    }

    /// Starts it again with the same arguments (and the same listen
    /// address if it had one, so clients can reconnect to it).
    pub async fn restart(&mut self) {
        self.kill9().await;
        if let Some(addr) = self.addr
            && let Some(i) = self.args.iter().position(|a| a == "--listen")
        {
            self.args[i + 1] = addr.to_string();
        }
        self.spawn().await;
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How it ended, if it ended by itself (a process the test killed has
    /// no child to ask and counts as running).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }
}

/// Runs `switchboard <args>` to its end, at most `within`: its exit status
/// (`None` if it was still running and got killed) and its standard error.
pub async fn run_switchboard(
    args: &[&str],
    envs: &[(&str, &str)],
    within: Duration,
) -> (Option<std::process::ExitStatus>, String) {
    let mut command = Command::new(crate::bins::switchboard_bin());
    command
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in envs {
        command.env(k, v);
    }
    let child = command.spawn().expect("starting switchboard");
    match tokio::time::timeout(within, child.wait_with_output()).await {
        Ok(Ok(out)) => (
            Some(out.status),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        _ => (None, String::new()),
    }
}

/// The log without the frames of an error's backtrace, which would push
/// the error itself out of a short tail.
pub fn without_backtraces(text: &str) -> String {
    text.lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            let frame = trimmed
                .split_once(": ")
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()));
            !(frame || trimmed.starts_with("at "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
