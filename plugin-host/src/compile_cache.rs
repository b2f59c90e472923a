//! What a process keeps of its compilations: the compiled components by
//! digest and hook, most recently used first within their bounds, and the
//! precompiler that makes and checks artifacts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::compiled::Compiled;
use crate::hook::Hook;
use crate::precompiled::Precompiler;

/// What a process keeps of its compilations, and how it makes artifacts.
pub(crate) struct CodeState {
    pub(crate) precompiler: Precompiler,
    cache: Mutex<CompileCache>,
}

impl CodeState {
    pub(crate) fn new(precompiler: Precompiler) -> Self {
        Self {
            precompiler,
            cache: Mutex::new(CompileCache::default()),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CompileCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Compiled components by digest and hook: a component is compiled once
/// per process, whichever tenants deploy it, while it stays among the
/// most recently used, within `compiled_cache_entries` and
/// `compiled_cache_bytes`.
#[derive(Default)]
pub(crate) struct CompileCache {
    pub(crate) entries: HashMap<(Arc<str>, Hook), (Arc<Compiled>, u64)>,
    /// Ticks at every use; an entry's tick says when it was last used.
    clock: u64,
    /// The entries' code bytes together.
    pub(crate) bytes: usize,
}

impl CompileCache {
    /// Whether `key` is kept, without counting it as a use.
    pub(crate) fn contains(&self, key: &(Arc<str>, Hook)) -> bool {
        self.entries.contains_key(key)
    }

    pub(crate) fn get(&mut self, key: &(Arc<str>, Hook)) -> Option<Arc<Compiled>> {
        self.clock += 1;
        let now = self.clock;
        self.entries.get_mut(key).map(|(compiled, used)| {
            *used = now;
            compiled.clone()
        })
    }

    /// Keeps `compiled`, forgetting the least recently used entries past
    /// `capacity` entries or `max_bytes` bytes of code; the newest stays
    /// whatever its size (a linear scan: the cache holds tens of entries).
    pub(crate) fn insert(
        &mut self,
        key: (Arc<str>, Hook),
        compiled: Arc<Compiled>,
        capacity: usize,
        max_bytes: usize,
    ) {
        self.clock += 1;
        self.bytes += compiled.code_bytes;
        if let Some((replaced, _)) = self.entries.insert(key, (compiled, self.clock)) {
            self.bytes -= replaced.code_bytes;
        }
        while self.entries.len() > capacity.max(1)
            || (self.bytes > max_bytes && self.entries.len() > 1)
        {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((forgotten, _)) = self.entries.remove(&oldest) {
                self.bytes -= forgotten.code_bytes;
            }
        }
    }
}
