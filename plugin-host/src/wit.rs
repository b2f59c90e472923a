//! The WIT package's bindings (`wit/0.1.0`), the host imports a plugin
//! gets, and conversions between the WIT types and Switchboard's.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_protocol::content::Media;
use switchboard_protocol::{Content, ConversationKind, TenantId};

use crate::hook::Hook;

wasmtime::component::bindgen!({
    path: "../wit/0.1.0",
    world: "moderator",
});

pub(crate) mod edit {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "edit-policy-plugin",
        with: {
            "switchboard:plugin/host": super::switchboard::plugin::host,
        },
    });
}

pub(crate) mod fan_out {
    wasmtime::component::bindgen!({
        path: "../wit/0.1.0",
        world: "fan-out-plugin",
        with: {
            "switchboard:plugin/host": super::switchboard::plugin::host,
            "switchboard:plugin/types": super::switchboard::plugin::types,
        },
    });
}

use self::switchboard::plugin::{host, types};

/// Longest log line a plugin may write; longer ones are cut.
const MAX_LOG_LINE: usize = 1024;

/// What a call's store holds: whose call it is, the version's
/// configuration, and the call's limits.
pub(crate) struct CallState {
    pub tenant: TenantId,
    pub hook: Hook,
    pub digest: Arc<str>,
    pub config: Arc<BTreeMap<String, String>>,
    pub log_lines: u32,
    pub max_log_lines: u32,
    pub limiter: CallLimiter,
    /// When the call started: what the virtual wall clock reads.
    pub started: std::time::SystemTime,
    /// The call's WASI, made on its first WASI call (`wasi.rs`).
    pub wasi: Option<crate::wasi::CallWasi>,
}

impl wasmtime_wasi::WasiView for CallState {
    fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
        let started = self.started;
        let wasi = self
            .wasi
            .get_or_insert_with(|| crate::wasi::CallWasi::new(started));
        wasmtime_wasi::WasiCtxView {
            ctx: &mut wasi.ctx,
            table: &mut wasi.table,
        }
    }
}

/// Caps memory and tables, and remembers that it refused, so a failure
/// can be reported as the memory cap rather than a bare trap.
pub(crate) struct CallLimiter {
    pub memory_bytes: usize,
    pub table_elements: usize,
    pub refused: bool,
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired <= self.memory_bytes;
        self.refused |= !ok;
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired <= self.table_elements;
        self.refused |= !ok;
        Ok(ok)
    }
}

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        if self.log_lines >= self.max_log_lines {
            return;
        }
        self.log_lines += 1;
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let (tenant, hook, digest) = (self.tenant.as_str(), self.hook.as_str(), &*self.digest);
        match level {
            host::Level::Debug => {
                tracing::debug!(target: "plugin", tenant, hook, digest, "{message}")
            }
            host::Level::Info => {
                tracing::info!(target: "plugin", tenant, hook, digest, "{message}")
            }
            host::Level::Warn => {
                tracing::warn!(target: "plugin", tenant, hook, digest, "{message}")
            }
            host::Level::Error => {
                tracing::error!(target: "plugin", tenant, hook, digest, "{message}")
            }
        }
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }
}

pub(crate) fn add_host_to_linker(
    linker: &mut wasmtime::component::Linker<CallState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    types::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    Ok(())
}

pub(crate) fn kind(kind: ConversationKind) -> types::ConversationKind {
    match kind {
        ConversationKind::Direct => types::ConversationKind::Direct,
        ConversationKind::Group => types::ConversationKind::Group,
        ConversationKind::Channel => types::ConversationKind::Channel,
    }
}

/// Content a plugin may see; `None` for ciphertext and system content,
/// which are never passed to plugins.
pub(crate) fn content_to_wit(content: &Content) -> Option<types::Content> {
    let media = |m: &Media| types::Media {
        blob_ref: m.blob_ref.clone(),
        mime: m.mime.clone(),
        size: m.size,
        caption: m.caption.clone(),
    };
    Some(match content {
        Content::Text { text } => types::Content::Text(text.clone()),
        Content::Image(m) => types::Content::Image(media(m)),
        Content::File(m) => types::Content::File(media(m)),
        Content::Voice(m) => types::Content::Voice(media(m)),
        Content::Ciphertext { .. } | Content::System(_) => return None,
    })
}

pub(crate) fn content_from_wit(content: types::Content) -> Content {
    let media = |m: types::Media| Media {
        blob_ref: m.blob_ref,
        mime: m.mime,
        size: m.size,
        caption: m.caption,
    };
    match content {
        types::Content::Text(text) => Content::Text { text },
        types::Content::Image(m) => Content::Image(media(m)),
        types::Content::File(m) => Content::File(media(m)),
        types::Content::Voice(m) => Content::Voice(media(m)),
    }
}
