//! Turning a component's bytes into code linked for a hook, once: the
//! checks an upload passes before the compiler sees it, its digest, its
//! code (compiled, or loaded from a precompiled artifact,
//! `precompiled.rs`), its linking to the hook's world, and the compiled
//! components a process keeps by digest and hook.
//!
//! Code is the expensive part (a JavaScript engine compiles for tens of
//! seconds) and the same for every hook, so a component is made into
//! [`Code`] once and linked for each hook it is tried against.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime::component::{Component, Linker};

use crate::hook::Hook;
use crate::host::{CompileError, Compiled, Import, PluginHost, Pre};
use crate::precompiled::{Precompiler, SealError};
use crate::wit;

/// Where a component's code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// This process compiled it before and kept it.
    Cached,
    /// Loaded from a precompiled artifact.
    Precompiled,
    /// Compiled just now.
    Compiled,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cached => "cached",
            Origin::Precompiled => "precompiled",
            Origin::Compiled => "compiled",
        }
    }
}

/// A component made into code for this host's engine, before it is
/// linked for a hook.
pub struct Code {
    pub digest: Arc<str>,
    pub origin: Origin,
    component: Component,
}

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

    fn lock(&self) -> MutexGuard<'_, CompileCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl PluginHost {
    /// Compiles `bytes` for `hook`, or returns the cached compilation of
    /// the same digest. CPU-heavy the first time: call it off the async
    /// runtime.
    pub fn compile(&self, hook: Hook, bytes: &[u8]) -> Result<Arc<Compiled>, CompileError> {
        self.compile_with(hook, bytes, None).map(|(c, _)| c)
    }

    /// [`Self::compile`], loading the code from `artifact` (a
    /// precompiled artifact of the component, `precompiled.rs`) when it is
    /// this engine's and intact; otherwise, or without one, it compiles.
    /// A refused artifact is logged and counted, never an error.
    pub fn compile_with(
        &self,
        hook: Hook,
        bytes: &[u8],
        artifact: Option<&[u8]>,
    ) -> Result<(Arc<Compiled>, Origin), CompileError> {
        preflight(bytes, self.limits().max_component_bytes)?;
        let digest: Arc<str> = digest(bytes).into();
        if let Some(c) = self.code_state().lock().get(&(digest.clone(), hook)) {
            return Ok((c, Origin::Cached));
        }
        let code = self.code_of(bytes, digest, artifact)?;
        Ok((self.link(hook, &code)?, code.origin))
    }

    /// The component's code, from `artifact` when it loads, else compiled.
    pub fn code(&self, bytes: &[u8], artifact: Option<&[u8]>) -> Result<Code, CompileError> {
        preflight(bytes, self.limits().max_component_bytes)?;
        self.code_of(bytes, digest(bytes).into(), artifact)
    }

    fn code_of(
        &self,
        bytes: &[u8],
        digest: Arc<str>,
        artifact: Option<&[u8]>,
    ) -> Result<Code, CompileError> {
        if let Some(artifact) = artifact {
            let max = self.limits().max_precompiled_bytes;
            match self.code_state().precompiler.load(artifact, &digest, max) {
                Ok(component) => {
                    crate::metrics::precompiled("loaded");
                    return Ok(Code {
                        digest,
                        origin: Origin::Precompiled,
                        component,
                    });
                }
                Err(e) => {
                    crate::metrics::precompiled("rejected");
                    tracing::warn!(digest = %digest, error = %e, "a precompiled artifact was refused; compiling the component instead");
                }
            }
        }
        crate::metrics::compiling();
        let component =
            Component::from_binary(self.engine(), bytes).map_err(|e| CompileError::Unreadable {
                message: format!("{e:#}"),
                source: switchboard_backbone::cause(e),
            })?;
        Ok(Code {
            digest,
            origin: Origin::Compiled,
            component,
        })
    }

    /// Links `code` for `hook` (its world, the host's imports, the
    /// locked-down WASI) and keeps the result for reuse.
    pub fn link(&self, hook: Hook, code: &Code) -> Result<Arc<Compiled>, CompileError> {
        let key = (code.digest.clone(), hook);
        if let Some(c) = self.code_state().lock().get(&key) {
            return Ok(c);
        }
        let component = &code.component;
        let wrong = |e: wasmtime::Error| CompileError::WrongWorld {
            hook,
            world: hook.world(),
            detail: format!("{e:#}"),
            source: switchboard_backbone::cause(e),
        };
        let mut linker = Linker::new(self.engine());
        wit::add_host_to_linker(&mut linker).map_err(wrong)?;
        // A locked-down WASI (`wasi.rs`) for language runtimes; anything
        // else a component imports is linked to traps.
        crate::wasi::add_to_linker(&mut linker).map_err(wrong)?;
        crate::wasi::link_the_rest_to_traps(&mut linker, component, self.engine())
            .map_err(wrong)?;
        let pre = linker.instantiate_pre(component).map_err(wrong)?;
        let pre = match hook {
            Hook::Moderation => Pre::Moderation(wit::ModeratorPre::new(pre).map_err(wrong)?),
            Hook::EditPolicy => {
                Pre::EditPolicy(wit::edit::EditPolicyPluginPre::new(pre).map_err(wrong)?)
            }
            Hook::FanOut => Pre::FanOut(wit::fan_out::FanOutPluginPre::new(pre).map_err(wrong)?),
        };
        let image = component.image_range();
        let code_bytes = (image.end as usize).saturating_sub(image.start as usize);
        let compiled = Arc::new(Compiled {
            digest: code.digest.clone(),
            hook,
            code_bytes,
            component: component.clone(),
            pre,
        });
        let mut cache = self.code_state().lock();
        let limits = self.limits();
        cache.insert(
            key,
            compiled.clone(),
            limits.compiled_cache_entries,
            limits.compiled_cache_bytes,
        );
        crate::metrics::compiled_cached(cache.entries.len(), cache.bytes);
        Ok(compiled)
    }

    /// What the component imports, and how each import is linked.
    pub fn imports(&self, bytes: &[u8]) -> Result<Vec<Import>, CompileError> {
        Ok(self.imports_of(&self.code(bytes, None)?))
    }

    /// What `code`'s component imports, and how each import is linked.
    pub fn imports_of(&self, code: &Code) -> Vec<Import> {
        code.component
            .component_type()
            .imports(self.engine())
            .map(|(name, _)| Import {
                name: name.to_owned(),
                linked: crate::wasi::linked(name),
            })
            .collect()
    }

    /// The precompiled artifact of a compiled component, for another
    /// process or a later run to load instead of compiling.
    pub fn seal(&self, compiled: &Compiled) -> Result<Vec<u8>, SealError> {
        self.code_state()
            .precompiler
            .seal(&compiled.component, &compiled.digest)
    }

    /// The artifact of `code`.
    pub fn seal_code(&self, code: &Code) -> Result<Vec<u8>, SealError> {
        self.code_state()
            .precompiler
            .seal(&code.component, &code.digest)
    }

    /// What code this host's engine makes: the key of its artifacts.
    pub fn fingerprint(&self) -> &crate::precompiled::Fingerprint {
        self.code_state().precompiler.fingerprint()
    }

    /// Whether this process has the component of `digest` compiled for
    /// `hook` (a deploy of it needs no compiler).
    pub fn is_compiled(&self, digest: &str, hook: Hook) -> bool {
        self.code_state()
            .lock()
            .contains(&(Arc::from(digest), hook))
    }

    /// How many compiled components this process keeps for reuse.
    pub fn compiled_cached(&self) -> usize {
        self.code_state().lock().entries.len()
    }

    /// Bytes of compiled code this process keeps for reuse.
    pub fn compiled_cached_bytes(&self) -> usize {
        self.code_state().lock().bytes
    }
}

/// Compiled components by digest and hook: a component is compiled once
/// per process, whichever tenants deploy it, while it stays among the
/// most recently used, within `compiled_cache_entries` and
/// `compiled_cache_bytes`.
#[derive(Default)]
struct CompileCache {
    entries: HashMap<(Arc<str>, Hook), (Arc<Compiled>, u64)>,
    /// Ticks at every use; an entry's tick says when it was last used.
    clock: u64,
    /// The entries' code bytes together.
    bytes: usize,
}

impl CompileCache {
    /// Whether `key` is kept, without counting it as a use.
    fn contains(&self, key: &(Arc<str>, Hook)) -> bool {
        self.entries.contains_key(key)
    }

    fn get(&mut self, key: &(Arc<str>, Hook)) -> Option<Arc<Compiled>> {
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
    fn insert(
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

/// Tells the two common mistakes apart before the parser's message: not
/// WebAssembly at all, and a core module where a component is needed.
/// The checks an upload passes before the compiler sees it: its size,
/// and a component's header (not a core module, not something else).
pub fn preflight(bytes: &[u8], max_bytes: usize) -> Result<(), CompileError> {
    if bytes.len() > max_bytes {
        return Err(CompileError::TooLarge {
            size: bytes.len(),
            max: max_bytes,
        });
    }
    check_header(bytes)
}

fn check_header(bytes: &[u8]) -> Result<(), CompileError> {
    const MAGIC: &[u8] = b"\0asm";
    // A component's version and layer fields; a core module has 1, 0, 0, 0.
    const CORE_MODULE: &[u8] = &[1, 0, 0, 0];
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(CompileError::NotAComponent(
            "this is not WebAssembly (it does not start with \\0asm)".into(),
        ));
    }
    if &bytes[4..8] == CORE_MODULE {
        return Err(CompileError::NotAComponent(
            "this is a core WebAssembly module, not a component: build for wasm32-wasip2 \
             (or wrap the module with `wasm-tools component new`)"
                .into(),
        ));
    }
    Ok(())
}

/// The content digest a component is known by: `sha256:<hex>`.
pub fn digest(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in d.as_ref() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}
