//! What compiling a component yields and how it can fail, with no
//! engine state: the code linked for a hook ([`Compiled`]), the refusals
//! ([`CompileError`]) and call failures ([`CallError`]), where code came
//! from ([`Origin`]), and the checks and digest of an upload's bytes.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::Component;

use crate::hook::Hook;
use crate::wit::{self, CallState};

/// A component compiled for one hook, ready to instantiate.
pub struct Compiled {
    pub digest: Arc<str>,
    pub hook: Hook,
    /// Bytes of its compiled code image: what keeping it costs.
    pub code_bytes: usize,
    /// What its artifact is made of (`PluginHost::seal`).
    pub(crate) component: Component,
    pub(crate) pre: Pre,
}

impl Compiled {
    /// The WIT world the component targets.
    pub fn world(&self) -> &'static str {
        let [v4, v3, v2, v1] = self.hook.worlds();
        match self.pre {
            Pre::ModerationV4(_) | Pre::EditPolicyV4(_) | Pre::FanOutV4(_) => v4,
            Pre::ModerationV3(_) | Pre::EditPolicyV3(_) | Pre::FanOutV3(_) => v3,
            Pre::ModerationV2(_) | Pre::EditPolicyV2(_) | Pre::FanOutV2(_) => v2,
            Pre::Moderation(_) | Pre::EditPolicy(_) | Pre::FanOut(_) => v1,
        }
    }
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("digest", &self.digest)
            .field("hook", &self.hook)
            .finish_non_exhaustive()
    }
}

pub(crate) enum Pre {
    /// A `switchboard:plugin@0.1.0` moderator: messages only.
    Moderation(wit::ModeratorPre<CallState>),
    /// A `switchboard:plugin@0.2.0` moderator: messages with their reply,
    /// thread and mentions, and reactions.
    ModerationV2(wit::v2::ModeratorPre<CallState>),
    /// A `switchboard:plugin@0.3.0` moderator: also custom messages and
    /// a message's `custom` fields (v1.3).
    ModerationV3(wit::v3::ModeratorPre<CallState>),
    /// A `switchboard:plugin@0.4.0` moderator: also link previews.
    ModerationV4(wit::v4::ModeratorPre<CallState>),
    EditPolicy(wit::edit::EditPolicyPluginPre<CallState>),
    EditPolicyV2(wit::v2::edit::EditPolicyPluginPre<CallState>),
    EditPolicyV3(wit::v3::edit::EditPolicyPluginPre<CallState>),
    EditPolicyV4(wit::v4::edit::EditPolicyPluginPre<CallState>),
    FanOut(wit::fan_out::FanOutPluginPre<CallState>),
    FanOutV2(wit::v2::fan_out::FanOutPluginPre<CallState>),
    FanOutV3(wit::v3::fan_out::FanOutPluginPre<CallState>),
    FanOutV4(wit::v4::fan_out::FanOutPluginPre<CallState>),
}

/// Why a component is refused.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error("the component is {size} bytes, over the limit of {max}")]
    TooLarge { size: usize, max: usize },
    /// The bytes are not a component at all (the header check says why;
    /// there is no underlying error).
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    /// The engine could not read the component. `message` is its error
    /// with the whole chain, as shown; `source` is that error.
    #[error("not a WebAssembly component: {message}")]
    Unreadable {
        message: String,
        #[source]
        source: switchboard_nats::Cause,
    },
    /// The made-up input of the trial call did not build (our bug, not
    /// the component's); it reads as it always did.
    #[error("not a WebAssembly component: {0}")]
    TrialInput(#[source] switchboard_protocol::ids::IdError),
    /// `detail` is the linker's error with its whole chain, as shown;
    /// `source` is that error.
    #[error("the component does not fit the {hook} hook (world {world}): {detail}")]
    WrongWorld {
        hook: Hook,
        world: &'static str,
        detail: String,
        #[source]
        source: switchboard_nats::Cause,
    },
    #[error("the component failed its trial call: {0}")]
    TrialCall(CallError),
}

/// Why a call failed. Every one is counted and logged by the registry,
/// which applies the hook's failure policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("ran past its deadline of {0:?}")]
    Deadline(Duration),
    #[error("ran out of fuel")]
    Fuel,
    #[error("went over its memory or table cap")]
    Memory,
    #[error("overflowed its stack")]
    Stack,
    #[error("trapped: {0}")]
    Trap(String),
    #[error("could not be instantiated: {0}")]
    Instantiate(String),
    #[error("returned output Switchboard refuses: {0}")]
    Output(String),
    #[error("is quarantined after failing too often")]
    Quarantined,
    #[error("could not be loaded by this process: {0}")]
    NotLoaded(String),
}

/// One interface a component imports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Import {
    pub name: String,
    /// `provided`: the host's (`log`, `config`); `wasi`: the locked-down
    /// WASI (`wasi.rs`); `trap`: linked to a function that fails the call
    /// if it is ever called.
    pub linked: &'static str,
}

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
