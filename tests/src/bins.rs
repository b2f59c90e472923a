//! Where the tests find what they run: the workspace, the `switchboard`
//! and `nats-server` binaries, and the plugins built for them.

use std::path::PathBuf;

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
