//! A folder that loses what was not fsynced when its "power" is cut:
//! `tests/lossyfs` (a FUSE file system in Go, built by `scripts/test.sh`
//! into `.tools/lossyfs`) mounted over a backing folder. nats-server runs
//! on the mount; [`LossyFs::power_cut`] puts every file back as it was at
//! its last sync, which a kill -9 alone never does (the kernel keeps the
//! unsynced pages and writes them later).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

pub struct LossyFs {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    pub mount: PathBuf,
}

/// The lossyfs binary: `SWITCHBOARD_LOSSYFS`, else `.tools/lossyfs`.
fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SWITCHBOARD_LOSSYFS") {
        return PathBuf::from(p);
    }
    let built = crate::bins::workspace_root().join(".tools/lossyfs");
    assert!(
        built.is_file(),
        "lossyfs not found: scripts/test.sh builds it (go build in tests/lossyfs into .tools/), \
         or set SWITCHBOARD_LOSSYFS"
    );
    built
}

impl LossyFs {
    /// Mounts `dir/mnt` over `dir/disk`.
    pub async fn mount(dir: &Path) -> Self {
        let backing = dir.join("disk");
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&mount).unwrap();
        let mut child = Command::new(bin())
            .arg(&backing)
            .arg(&mount)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("starting lossyfs");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = next_line(&mut lines).await;
        assert_eq!(first, "lossyfs: mounted", "lossyfs did not mount");
        Self {
            child,
            lines,
            mount,
        }
    }

    /// Forgets every write not synced since the last cut; what it dropped,
    /// as lossyfs says it ("dropped N bytes in M files"). Whatever wrote
    /// there must be stopped first.
    pub async fn power_cut(&mut self) -> String {
        let pid = self.child.id().unwrap();
        let _ = std::process::Command::new("kill")
            .args(["-USR1", &pid.to_string()])
            .status();
        let line = next_line(&mut self.lines).await;
        assert!(line.starts_with("lossyfs: power cut: dropped"), "{line}");
        line
    }
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("lossyfs answers within 30 s")
        .unwrap()
        .expect("lossyfs is running")
}

impl Drop for LossyFs {
    fn drop(&mut self) {
        // A lazy unmount: whatever still has a file open there lets go
        // later, and the mount point is free for the folder's removal.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.mount)
            .status();
        let _ = self.child.start_kill();
    }
}
