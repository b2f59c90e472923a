//! The integration-test harness: real processes on loopback, nothing mocked.
//!
//! [`Nats`] runs a `nats-server` with JetStream on a free port in a
//! temporary directory; [`Proc`] runs a `switchboard` process (gateway,
//! worker or dev) and waits until it is ready; [`Cluster`] composes them
//! and hands out clients and tokens. Every process is killed when its
//! handle is dropped, so a failing test leaves nothing behind.
//!
//! Binaries: `SWITCHBOARD_NATS_SERVER` or `nats-server` on `PATH` or
//! `.venv/bin/nats-server` in the workspace; the `switchboard` binary next
//! to the test executable (`cargo build --bin switchboard` first; the
//! README's test command does); `SWITCHBOARD_LOSSYFS` or `.tools/lossyfs`
//! for the power-loss test ([`lossyfs`]).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cluster;
pub mod cql;
pub mod frames;
pub mod lossyfs;
pub mod nats_cli;
pub mod proc;
pub mod reliable;
pub mod s3;
pub mod steady;
pub mod tls;

pub use cluster::{Cluster, ClusterSpec, SECRET, TENANT};
pub use frames::connect_ws;
pub use proc::{Nats, Proc};

use std::path::PathBuf;
use std::sync::Once;

/// Has every panic print its message once more after the default hook's
/// report: with `RUST_BACKTRACE` set, a failing test's output ends with
/// the backtrace, and a report that keeps only the end of the output
/// (as CI's does) would lose which assertion failed. Only the message's
/// first lines are repeated: some carry whole process logs.
pub fn repeat_panic_messages_last() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            default(info);
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("(not a string)");
            let head: String = message.lines().take(6).collect::<Vec<_>>().join("\n");
            let head: String = head.chars().take(1500).collect();
            let place = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            eprintln!("\nthe panic above, once more ({place}): {head}");
        }));
    });
}

/// The workspace root (where `.venv` lives).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A plugin component built by `scripts/build-plugins.sh`.
pub fn plugin(name: &str) -> Vec<u8> {
    let path = workspace_root()
        .join("plugins/dist")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run scripts/build-plugins.sh (the README's test command does)",
            path.display()
        )
    })
}

/// Plugin `name` with a custom section of its own: the same plugin, a
/// different digest (`n` tells the variants apart).
pub fn plugin_variant(name: &str, n: u8) -> Vec<u8> {
    let mut bytes = plugin(name);
    let section = b"switchboard-test";
    // A custom section (id 0): its size, then its name, then `n`. Both
    // lengths fit in one LEB128 byte.
    let contents_len = 1 + section.len() + 1;
    bytes.extend_from_slice(&[0, contents_len as u8, section.len() as u8]);
    bytes.extend_from_slice(section);
    bytes.push(n);
    bytes
}

/// A binary named by the environment variable `env`, else found on `PATH`.
pub fn find_bin(env: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

pub fn nats_server_bin() -> PathBuf {
    if let Some(bin) = find_bin("SWITCHBOARD_NATS_SERVER", "nats-server") {
        return bin;
    }
    let venv = workspace_root().join(".venv/bin/nats-server");
    assert!(
        venv.is_file(),
        "nats-server not found: run scripts/install-nats.sh or set SWITCHBOARD_NATS_SERVER"
    );
    venv
}

pub fn switchboard_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SWITCHBOARD_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/deps/it-xxxx → target/<profile>/switchboard
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("switchboard"))
        .expect("target directory");
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build --bin switchboard` first",
        bin.display()
    );
    bin
}

/// A unique suffix for ids in one test run.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Asks `ready` every 50 ms until it gives a value, and fails the test,
/// saying `what` did not happen, if it gives none within `within`. The one
/// polling loop of the tests: for state that other processes change
/// (a tenant reaching the gateways, a dead letter, a log line).
pub async fn eventually<T, Fut>(
    what: &str,
    within: std::time::Duration,
    mut ready: impl FnMut() -> Fut,
) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = ready().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
