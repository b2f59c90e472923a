//! A real S3-compatible server on loopback for the blob tests: `s3s-fs`
//! (`scripts/install-s3s.sh` installs it), which checks SigV4 signatures,
//! presigned URLs included, and keeps objects as files under its root.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const BUCKET: &str = "switchboard";
pub const ACCESS_KEY: &str = "switchboard-test-access";
pub const SECRET_KEY: &str = "switchboard-test-secret-key";

pub struct S3Server {
    _child: tokio::process::Child,
    pub port: u16,
    pub root: PathBuf,
}

fn s3s_bin() -> PathBuf {
    if let Some(bin) = crate::bins::find_bin("SWITCHBOARD_S3S_FS", "s3s-fs") {
        return bin;
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("HOME or CARGO_HOME");
    let bin = home.join("bin/s3s-fs");
    assert!(
        bin.is_file(),
        "s3s-fs not found: run scripts/install-s3s.sh"
    );
    bin
}

impl S3Server {
    /// Starts the server with an empty bucket under `dir`.
    pub async fn start(dir: &Path) -> Self {
        let root = dir.join("s3");
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let port = crate::proc::free_port();
        let child = tokio::process::Command::new(s3s_bin())
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("starting s3s-fs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "s3s-fs did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            _child: child,
            port,
            root,
        }
    }

    /// The `[blobs]` configuration that points Switchboard here.
    pub fn config(&self) -> String {
        format!(
            "\n[blobs]\nbackend = \"s3\"\n\n[blobs.s3]\nbucket = \"{BUCKET}\"\nendpoint = \"http://127.0.0.1:{}\"\npath_style = true\naccess_key_id = \"{ACCESS_KEY}\"\nsecret_access_key = \"{SECRET_KEY}\"\n",
            self.port
        )
    }

    /// Where the server keeps an object's bytes.
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.root.join(BUCKET).join(key)
    }
}
