//! Turning a component's bytes into code linked for a hook, once: the
//! checks an upload passes before the compiler sees it, its digest, its
//! code (compiled, or loaded from a precompiled artifact,
//! `precompiled.rs`), its linking to the hook's world, and the compiled
//! components a process keeps by digest and hook.
//!
//! Code is the expensive part (a JavaScript engine compiles for tens of
//! seconds) and the same for every hook, so a component is made into
//! [`Code`] once and linked for each hook it is tried against.

use std::sync::Arc;

use wasmtime::component::{Component, InstancePre, Linker};

use crate::compiled::{CompileError, Compiled, Import, Origin, Pre, digest, preflight};
use crate::hook::Hook;
use crate::host::PluginHost;
use crate::precompiled::SealError;
use crate::wit::{self, CallState};

/// A component made into code for this host's engine, before it is
/// linked for a hook.
pub struct Code {
    pub digest: Arc<str>,
    pub origin: Origin,
    component: Component,
}

/// The first of a hook's packages, newest first, that the component
/// exports; refused with why the newest did not fit.
fn newest(
    pre: InstancePre<CallState>,
    wrong: impl Fn(wasmtime::Error) -> CompileError,
    packages: [fn(InstancePre<CallState>) -> wasmtime::Result<Pre>; 4],
) -> Result<Pre, CompileError> {
    let mut first_error = None;
    for package in packages {
        match package(pre.clone()) {
            Ok(p) => return Ok(p),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(wrong(first_error.unwrap_or_else(|| {
        wasmtime::Error::msg("no package of the hook fits")
    })))
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
                source: switchboard_nats::cause(e),
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
            source: switchboard_nats::cause(e),
        };
        let mut linker = Linker::new(self.engine());
        wit::add_host_to_linker(&mut linker).map_err(wrong)?;
        // A locked-down WASI (`wasi.rs`) for language runtimes; anything
        // else a component imports is linked to traps.
        crate::wasi::add_to_linker(&mut linker).map_err(wrong)?;
        crate::wasi::link_the_rest_to_traps(&mut linker, component, self.engine())
            .map_err(wrong)?;
        let pre = linker.instantiate_pre(component).map_err(wrong)?;
        // The newest package first; a component built against an older
        // one still loads as that.
        let pre = match hook {
            Hook::Moderation => newest(
                pre,
                wrong,
                [
                    |p| wit::v4::ModeratorPre::new(p).map(Pre::ModerationV4),
                    |p| wit::v3::ModeratorPre::new(p).map(Pre::ModerationV3),
                    |p| wit::v2::ModeratorPre::new(p).map(Pre::ModerationV2),
                    |p| wit::ModeratorPre::new(p).map(Pre::Moderation),
                ],
            )?,
            Hook::EditPolicy => newest(
                pre,
                wrong,
                [
                    |p| wit::v4::edit::EditPolicyPluginPre::new(p).map(Pre::EditPolicyV4),
                    |p| wit::v3::edit::EditPolicyPluginPre::new(p).map(Pre::EditPolicyV3),
                    |p| wit::v2::edit::EditPolicyPluginPre::new(p).map(Pre::EditPolicyV2),
                    |p| wit::edit::EditPolicyPluginPre::new(p).map(Pre::EditPolicy),
                ],
            )?,
            Hook::FanOut => newest(
                pre,
                wrong,
                [
                    |p| wit::v4::fan_out::FanOutPluginPre::new(p).map(Pre::FanOutV4),
                    |p| wit::v3::fan_out::FanOutPluginPre::new(p).map(Pre::FanOutV3),
                    |p| wit::v2::fan_out::FanOutPluginPre::new(p).map(Pre::FanOutV2),
                    |p| wit::fan_out::FanOutPluginPre::new(p).map(Pre::FanOut),
                ],
            )?,
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
