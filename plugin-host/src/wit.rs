//! The WIT packages' bindings (`wit/0.1.0`; `wit/0.2.0` for the
//! moderator that sees replies, threads, mentions and reactions;
//! `wit/0.3.0` for the one that also sees custom messages and fields;
//! `wit/0.4.0` for the one that also decides link previews),
//! the host imports a plugin gets, and conversions between the WIT types
//! and Switchboard's.

use std::collections::BTreeMap;
use std::sync::Arc;

use switchboard_protocol::content::{CustomContent, Media};
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

/// `switchboard:plugin@0.2.0`: the moderator that sees replies, threads,
/// mentions and reactions; edit policy and fan-out as in 0.1.0.
pub(crate) mod v2 {
    wasmtime::component::bindgen!({
        path: "../wit/0.2.0",
        world: "moderator",
    });

    pub(crate) mod edit {
        wasmtime::component::bindgen!({
            path: "../wit/0.2.0",
            world: "edit-policy-plugin",
            with: {
                "switchboard:plugin/host": super::switchboard::plugin::host,
            },
        });
    }

    pub(crate) mod fan_out {
        wasmtime::component::bindgen!({
            path: "../wit/0.2.0",
            world: "fan-out-plugin",
            with: {
                "switchboard:plugin/host": super::switchboard::plugin::host,
                "switchboard:plugin/types": super::switchboard::plugin::types,
            },
        });
    }
}

/// `switchboard:plugin@0.3.0`: the moderator that also sees custom
/// messages and a message's `custom` fields (v1.3); edit policy and
/// fan-out as before.
pub(crate) mod v3 {
    wasmtime::component::bindgen!({
        path: "../wit/0.3.0",
        world: "moderator",
    });

    pub(crate) mod edit {
        wasmtime::component::bindgen!({
            path: "../wit/0.3.0",
            world: "edit-policy-plugin",
            with: {
                "switchboard:plugin/host": super::switchboard::plugin::host,
            },
        });
    }

    pub(crate) mod fan_out {
        wasmtime::component::bindgen!({
            path: "../wit/0.3.0",
            world: "fan-out-plugin",
            with: {
                "switchboard:plugin/host": super::switchboard::plugin::host,
                "switchboard:plugin/types": super::switchboard::plugin::types,
            },
        });
    }
}

/// `switchboard:plugin@0.4.0`: the moderator that also decides link
/// previews (v1.3); edit policy and fan-out as before.
pub(crate) mod v4 {
    wasmtime::component::bindgen!({
        path: "../wit/0.4.0",
        world: "moderator",
    });

    pub(crate) mod edit {
        wasmtime::component::bindgen!({
            path: "../wit/0.4.0",
            world: "edit-policy-plugin",
            with: {
                "switchboard:plugin/host": super::switchboard::plugin::host,
            },
        });
    }

    pub(crate) mod fan_out {
        wasmtime::component::bindgen!({
            path: "../wit/0.4.0",
            world: "fan-out-plugin",
            with: {
                "switchboard:plugin/host": super::switchboard::plugin::host,
                "switchboard:plugin/types": super::switchboard::plugin::types,
            },
        });
    }
}

use self::switchboard::plugin::{host, types};

/// What a call's store holds: whose call it is, the version's
/// configuration, and the call's limits.
pub(crate) struct CallState {
    pub tenant: TenantId,
    pub hook: Hook,
    pub digest: Arc<str>,
    pub config: Arc<BTreeMap<String, String>>,
    pub log_lines: u32,
    pub max_log_lines: u32,
    pub max_log_line_bytes: usize,
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
impl v2::switchboard::plugin::types::Host for CallState {}
impl v3::switchboard::plugin::types::Host for CallState {}
impl v4::switchboard::plugin::types::Host for CallState {}

/// Each later package's `host` interface is 0.1.0's, under its own names.
macro_rules! same_host {
    ($($v:ident)::+) => {
        impl $($v)::+::Host for CallState {
            fn log(&mut self, level: $($v)::+::Level, message: String) {
                use $($v)::+::Level;
                let level = match level {
                    Level::Debug => host::Level::Debug,
                    Level::Info => host::Level::Info,
                    Level::Warn => host::Level::Warn,
                    Level::Error => host::Level::Error,
                };
                host::Host::log(self, level, message);
            }

            fn config(&mut self, key: String) -> Option<String> {
                host::Host::config(self, key)
            }
        }
    };
}

same_host!(v2::switchboard::plugin::host);
same_host!(v3::switchboard::plugin::host);
same_host!(v4::switchboard::plugin::host);

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        if self.log_lines >= self.max_log_lines {
            return;
        }
        self.log_lines += 1;
        let message = log_line(&message, self.max_log_line_bytes);
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

/// A plugin's log message as one line of the process's log: control
/// characters (newlines included), line separators and the invisible
/// marks that reorder text are escaped (`\n`, `\u{202e}`), as is the
/// backslash itself, so a plugin cannot start a line of its own or make
/// one read as another; then cut to `max_bytes`, ending in `…` if cut.
pub(crate) fn log_line(message: &str, max_bytes: usize) -> String {
    const CUT: &str = "…";
    let room = max_bytes.saturating_sub(CUT.len());
    let mut line = String::with_capacity(message.len().min(max_bytes));
    // Where the line can be cut to leave room for the mark: after the
    // last whole character (or escape) that ends within `room`.
    let mut cut_at = 0;
    let mut piece = String::new();
    for c in message.chars() {
        piece.clear();
        match c {
            '\\' => piece.push_str("\\\\"),
            '\n' => piece.push_str("\\n"),
            '\r' => piece.push_str("\\r"),
            '\t' => piece.push_str("\\t"),
            c if c.is_control() || reorders_or_breaks(c) => {
                piece.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => piece.push(c),
        }
        if line.len() + piece.len() > max_bytes {
            line.truncate(cut_at);
            line.push_str(CUT);
            return line;
        }
        line.push_str(&piece);
        if line.len() <= room {
            cut_at = line.len();
        }
    }
    line
}

/// Characters that are not control characters but break a line or
/// reorder how it reads: line and paragraph separators, bidirectional
/// marks, embeddings, overrides and isolates, and the byte-order mark.
fn reorders_or_breaks(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{feff}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

pub(crate) fn add_host_to_linker(
    linker: &mut wasmtime::component::Linker<CallState>,
) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    types::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    v2::switchboard::plugin::host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    v2::switchboard::plugin::types::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    v3::switchboard::plugin::host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    v3::switchboard::plugin::types::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    v4::switchboard::plugin::host::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    v4::switchboard::plugin::types::add_to_linker::<CallState, HasSelf<CallState>>(linker, |s| s)?;
    Ok(())
}

/// The conversions of one WIT package version's shared types: its
/// `conversation-kind` and `content` are the same in every version.
macro_rules! conversions {
    // How a custom message reaches a package: as its own kind where it
    // has one, else as its text.
    (@custom $c:ident, $C:ident, $custom_to:ident) => {
        $C::Custom($custom_to($c))
    };
    (@custom $c:ident, $C:ident) => {
        $C::Text($c.text())
    };
    ($($types:ident)::+, $kind:ident, $to:ident, $from:ident $(, custom: $custom_to:ident, $custom_from:ident)?) => {
        pub(crate) fn $kind(kind: ConversationKind) -> $($types)::+::ConversationKind {
            use $($types)::+::ConversationKind as K;
            match kind {
                ConversationKind::Direct => K::Direct,
                ConversationKind::Group => K::Group,
                ConversationKind::Channel => K::Channel,
            }
        }

        /// Content a plugin may see; `None` for ciphertext and system
        /// content, which are never passed to plugins. A custom message
        /// (v1.3) is its text (`fallback_text`, or `[type]`) where the
        /// package has no kind for it; a poll is its text in every
        /// package (the question, then a `- ` line per option).
        pub(crate) fn $to(content: &Content) -> Option<$($types)::+::Content> {
            use $($types)::+::{Content as C, Media as M};
            let media = |m: &Media| M {
                blob_ref: m.blob_ref.clone(),
                mime: m.mime.clone(),
                size: m.size,
                caption: m.caption.clone(),
            };
            Some(match content {
                Content::Text { text } => C::Text(text.clone()),
                Content::Image(m) => C::Image(media(m)),
                Content::File(m) => C::File(media(m)),
                Content::Voice(m) => C::Voice(media(m)),
                Content::Custom(c) => conversions!(@custom c, C $(, $custom_to)?),
                Content::Poll(p) => C::Text(p.text()),
                Content::Ciphertext { .. } | Content::System(_) => return None,
            })
        }

        /// A rewrite's content as Switchboard's; `Err` says why it is
        /// none (a custom message's `data` that is no JSON object).
        pub(crate) fn $from(content: $($types)::+::Content) -> Result<Content, String> {
            use $($types)::+::{Content as C, Media as M};
            let media = |m: M| Media {
                blob_ref: m.blob_ref,
                mime: m.mime,
                size: m.size,
                caption: m.caption,
            };
            Ok(match content {
                C::Text(text) => Content::Text { text },
                C::Image(m) => Content::Image(media(m)),
                C::File(m) => Content::File(media(m)),
                C::Voice(m) => Content::Voice(media(m)),
                $(C::Custom(c) => $custom_from(c)?,)?
            })
        }
    };
}

conversions!(types, kind, content_to_wit, content_from_wit);
conversions!(
    v2::switchboard::plugin::types,
    kind_v2,
    content_to_wit_v2,
    content_from_wit_v2
);
conversions!(
    v3::switchboard::plugin::types,
    kind_v3,
    content_to_wit_v3,
    content_from_wit_v3,
    custom: custom_to_v3,
    custom_from_v3
);
conversions!(
    v4::switchboard::plugin::types,
    kind_v4,
    content_to_wit_v4,
    content_from_wit_v4,
    custom: custom_to_v4,
    custom_from_v4
);

/// How 0.3.0 and later packages show a custom message (`data` as JSON
/// text) and take one back (its `data` must be a JSON object).
macro_rules! custom_conversions {
    ($($types:ident)::+, $to:ident, $from:ident) => {
        fn $to(c: &CustomContent) -> $($types)::+::CustomContent {
            $($types)::+::CustomContent {
                custom_type: c.custom_type.clone(),
                data: serde_json::Value::Object(c.data.clone()).to_string(),
                fallback_text: c.fallback_text.clone(),
            }
        }

        fn $from(c: $($types)::+::CustomContent) -> Result<Content, String> {
            let data = serde_json::from_str(&c.data)
                .map_err(|e| format!("the custom content's data is no JSON object: {e}"))?;
            Ok(Content::Custom(CustomContent {
                custom_type: c.custom_type,
                data,
                fallback_text: c.fallback_text,
            }))
        }
    };
}

custom_conversions!(v3::switchboard::plugin::types, custom_to_v3, custom_from_v3);
custom_conversions!(v4::switchboard::plugin::types, custom_to_v4, custom_from_v4);

#[cfg(test)]
mod tests {
    use super::log_line;

    #[test]
    fn a_plugin_cannot_forge_log_lines() {
        let cases: &[(&str, &str)] = &[
            ("plain words", "plain words"),
            (
                "ok\nERROR gateway: tenant=other admin token leaked",
                "ok\\nERROR gateway: tenant=other admin token leaked",
            ),
            ("a\r\nb\tc", "a\\r\\nb\\tc"),
            ("\u{1b}[31mred", "\\u{1b}[31mred"),
            ("left\u{202e}thgir", "left\\u{202e}thgir"),
            ("next\u{2028}line", "next\\u{2028}line"),
            ("back\\nslash", "back\\\\nslash"),
            ("\u{85}nel \u{7f}del", "\\u{85}nel \\u{7f}del"),
            ("émoji 🙂 stays", "émoji 🙂 stays"),
        ];
        for (message, logged) in cases {
            assert_eq!(log_line(message, 1024), *logged, "{message:?}");
            assert!(!log_line(message, 1024).contains(['\n', '\r']));
        }
    }

    #[test]
    fn a_long_line_is_cut_at_its_limit_and_says_so() {
        // At the limit: kept whole.
        let at = "x".repeat(64);
        assert_eq!(log_line(&at, 64), at);
        // Just past it: cut, ending in the mark, within the limit.
        let past = "x".repeat(65);
        let cut = log_line(&past, 64);
        assert!(cut.ends_with('…'), "{cut}");
        assert_eq!(cut.len(), 64);
        // Escapes count toward the limit, and a character is never split.
        let newlines = "\n".repeat(64);
        let cut = log_line(&newlines, 64);
        assert!(cut.len() <= 64 && cut.ends_with('…'), "{cut:?}");
        assert!(cut.starts_with("\\n\\n"));
        let wide = "é".repeat(40);
        let cut = log_line(&wide, 64);
        assert!(cut.len() <= 64 && cut.ends_with('…'), "{cut:?}");
        // A huge message costs no more than its limit.
        assert!(log_line(&"y".repeat(10 << 20), 1024).len() <= 1024);
    }
}
