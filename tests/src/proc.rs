//! Child processes: nats-server and switchboard.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// A nats-server with JetStream, on a fixed port once started, so that a
/// restart after `kill9` comes back at the same address.
pub struct Nats {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Nats {
    pub async fn start(dir: &Path) -> Self {
        let mut nats = Self {
            child: None,
            port: free_port(),
            dir: dir.to_path_buf(),
        };
        nats.spawn().await;
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    async fn spawn(&mut self) {
        std::fs::create_dir_all(&self.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("nats-server.log"))
            .unwrap();
        let conf = self.dir.join("nats-server.conf");
        std::fs::write(
            &conf,
            format!(
                "listen: 127.0.0.1:{}\nmax_payload: 8MB\njetstream {{ store_dir: \"{}\" }}\n",
                self.port,
                self.dir.join("jetstream").display()
            ),
        )
        .unwrap();
        let child = Command::new(crate::nats_server_bin())
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("starting nats-server");
        self.child = Some(child);
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("nats-server did not start on port {}", self.port);
    }

    /// SIGKILL, like a crash.
    pub async fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }

    pub async fn restart(&mut self) {
        self.kill9().await;
        self.spawn().await;
    }

    /// A client for checks made from the test itself.
    pub async fn client(&self) -> async_nats::Client {
        async_nats::connect(self.url())
            .await
            .expect("connecting to nats")
    }
}

/// A `switchboard` process.
pub struct Proc {
    child: Option<Child>,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    log: PathBuf,
    /// The HTTP address, for processes that listen.
    pub addr: Option<std::net::SocketAddr>,
    ready_marker: &'static str,
}

impl Proc {
    /// Starts `switchboard <args>` and waits for the line that says it is ready.
    pub async fn start(
        args: Vec<String>,
        envs: Vec<(String, String)>,
        log: PathBuf,
        ready_marker: &'static str,
    ) -> Self {
        let mut p = Self {
            child: None,
            args,
            envs,
            log,
            addr: None,
            ready_marker,
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
        let mut command = Command::new(crate::switchboard_bin());
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
                if line.contains(self.ready_marker) {
                    return true;
                }
            }
            false
        };
        let ready = tokio::time::timeout(Duration::from_secs(60), wait).await;
        if !matches!(ready, Ok(true)) {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            panic!(
                "switchboard {:?} did not become ready; log:\n{}",
                self.args,
                tail(&log, 40)
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
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
