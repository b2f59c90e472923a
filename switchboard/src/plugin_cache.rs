//! The plugin CLI's cache of precompiled components, so that `switchboard
//! plugin check` and `call` compile a component once and load its code on
//! every later run (a JavaScript engine compiles for tens of seconds and
//! loads in well under one).
//!
//! One file per component and engine, `<sha256 hex>@<fingerprint>.sbpc`,
//! in `$XDG_CACHE_HOME/switchboard/plugins` (or `~/.cache/...`, or
//! `--cache-dir`), a directory only its user may write. Files are written
//! whole or not at all (a temporary file, then a rename). The cache holds
//! at most `--cache-max-bytes`: past it the least recently used files are
//! deleted (a hit counts as a use). What is read from it is checked by the
//! host before it is loaded (`plugin-host/src/precompiled.rs`); a file
//! the host refuses is replaced by a fresh compilation.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The cache files' extension.
const EXTENSION: &str = "sbpc";
/// A temporary file older than this was left by a run that died.
const ABANDONED: Duration = Duration::from_secs(3600);

pub struct PluginCache {
    dir: PathBuf,
    max_bytes: u64,
}

impl PluginCache {
    pub fn new(dir: PathBuf, max_bytes: u64) -> Self {
        Self { dir, max_bytes }
    }

    /// `$XDG_CACHE_HOME/switchboard/plugins`, else
    /// `$HOME/.cache/switchboard/plugins`.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(base.join("switchboard").join("plugins"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &str, fingerprint: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        self.dir.join(format!("{hex}@{fingerprint}.{EXTENSION}"))
    }

    /// The cached artifact of the component for the engine, if there is
    /// one of at most `max` bytes. A hit makes it the most recently used.
    pub fn read(&self, digest: &str, fingerprint: &str, max: usize) -> Option<Vec<u8>> {
        let path = self.path(digest, fingerprint);
        let file = std::fs::File::open(&path).ok()?;
        let len = file.metadata().ok()?.len();
        if len > max as u64 {
            return None;
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(max as u64 + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() > max {
            return None;
        }
        // Its time of use, for eviction; a failure only ages it.
        let _ = std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        Some(bytes)
    }

    /// Keeps `artifact` for the component and engine, then deletes the
    /// least recently used files past the cache's size. One larger than
    /// the whole cache is not kept.
    pub fn write(&self, digest: &str, fingerprint: &str, artifact: &[u8]) -> std::io::Result<()> {
        if artifact.len() as u64 > self.max_bytes {
            return Ok(());
        }
        create_private_dir(&self.dir)?;
        let path = self.path(digest, fingerprint);
        let temp = self.dir.join(format!(
            ".{}.{}.tmp",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("artifact"),
            std::process::id()
        ));
        let written = std::fs::write(&temp, artifact).and_then(|()| std::fs::rename(&temp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written?;
        self.evict(&path);
        Ok(())
    }

    /// Deletes the component's artifact (the host refused it).
    pub fn remove(&self, digest: &str, fingerprint: &str) {
        let _ = std::fs::remove_file(self.path(digest, fingerprint));
    }

    /// Deletes the least recently used files until the cache is within
    /// its size (`keep` last of all), and abandoned temporary files.
    fn evict(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut files = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if path.extension().is_some_and(|e| e == "tmp") {
                if now.duration_since(used).unwrap_or_default() > ABANDONED {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            if path.extension().is_some_and(|e| e == EXTENSION) && meta.is_file() {
                files.push((path == keep, used, meta.len(), path));
            }
        }
        let mut total: u64 = files.iter().map(|(_, _, len, _)| len).sum();
        // Oldest first, the one just written last.
        files.sort_by_key(|(kept, used, _, _)| (*kept, *used));
        for (_, _, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

/// Creates `dir` (and its parents) readable and writable by its user only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "wt48_0_8-00";

    /// A directory of its own under the system's temporary one, removed
    /// when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "sb-plugin-cache-{name}-{}-{}",
                std::process::id(),
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
            ));
            Self(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn digest(i: u8) -> String {
        format!("sha256:{}", format!("{i:02x}").repeat(32))
    }

    fn files(cache: &PluginCache) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(cache.dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Makes `digest(i)`'s file look used `ago` seconds ago.
    fn age(cache: &PluginCache, i: u8, ago: u64) {
        let f = std::fs::File::options()
            .write(true)
            .open(cache.path(&digest(i), FP))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(ago))
            .unwrap();
    }

    #[test]
    fn an_artifact_is_read_back_for_its_component_and_engine_only() {
        let dir = TempDir::new("read");
        let cache = PluginCache::new(dir.path().join("plugins"), 1000);
        assert_eq!(cache.read(&digest(1), FP, 100), None, "nothing yet");
        cache.write(&digest(1), FP, b"code").unwrap();
        assert_eq!(
            cache.read(&digest(1), FP, 100).as_deref(),
            Some(&b"code"[..])
        );
        assert_eq!(cache.read(&digest(2), FP, 100), None, "another component");
        assert_eq!(
            cache.read(&digest(1), "wt48_0_8-01", 100),
            None,
            "another engine"
        );
        // Read within its bound only: at it, and just past it.
        assert!(cache.read(&digest(1), FP, 4).is_some());
        assert_eq!(cache.read(&digest(1), FP, 3), None);
        cache.remove(&digest(1), FP);
        assert_eq!(cache.read(&digest(1), FP, 100), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(cache.dir()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "only its user writes the cache");
        }
    }

    #[test]
    fn the_least_recently_used_go_once_the_cache_is_past_its_size() {
        let dir = TempDir::new("evict");
        let cache = PluginCache::new(dir.path().to_owned(), 300);
        for i in 1..=3 {
            cache.write(&digest(i), FP, &[i; 100]).unwrap();
            age(&cache, i, 100 - u64::from(i));
        }
        // Exactly at its size: all kept.
        assert_eq!(files(&cache).len(), 3);
        // A hit makes the oldest the most recently used...
        assert!(cache.read(&digest(1), FP, 1000).is_some());
        // ...so one byte past the size, the next oldest goes.
        cache.write(&digest(4), FP, &[4; 1]).unwrap();
        assert!(cache.read(&digest(2), FP, 1000).is_none());
        for i in [1, 3, 4] {
            assert!(cache.read(&digest(i), FP, 1000).is_some(), "{i}");
        }
        // One larger than the whole cache is not kept, and evicts nothing.
        cache.write(&digest(5), FP, &[5; 301]).unwrap();
        assert!(cache.read(&digest(5), FP, 1000).is_none());
        assert_eq!(files(&cache).len(), 3);
        // The one just written stays even when older files must go.
        cache.write(&digest(6), FP, &[6; 300]).unwrap();
        assert_eq!(
            files(&cache),
            vec![format!("{}@{FP}.sbpc", "06".repeat(32))]
        );
    }
}
