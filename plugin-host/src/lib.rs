//! Tenant Wasm plugins (F22, I5): the host that runs them and the
//! registry that deploys them.
//!
//! A plugin is a WebAssembly component built against the WIT package in
//! `wit/` (`switchboard:plugin@0.4.0`, or 0.3.0, 0.2.0 or 0.1.0, which
//! the host keeps loading), exporting one hook: moderation (messages,
//! reactions and link previews), edit policy or fan-out policy. [`host::PluginHost`] compiles each
//! component once per content digest and calls it synchronously in a fresh
//! store per call, under a deadline (epoch interruption), a fuel budget, a
//! memory and table cap and a bounded pool of instances. [`registry`] keeps
//! which version each tenant runs for each hook, watching the `sb_plugins`
//! KV bucket and loading components from the `sb_plugin_code` object
//! store, and swaps versions atomically: a call resolves its version once.
//! [`deploy`] is what the admin API does: validate, store, activate, roll
//! back, list, and keep each tenant's stored components within their caps.
//! [`compiler`] runs every compilation off the async runtime, a bounded
//! number at once and each within a time bound.
//!
//! **Architecture invariant:** plugin code never runs outside
//! [`host::PluginHost::call`]'s limits, and a plugin only ever sees what
//! one tenant's hook call passes it.

mod agreement;
mod artifacts;
pub mod code;
mod compile_cache;
mod compiled;
pub mod compiler;
pub mod deploy;
mod deploy_error;
pub mod deploy_jobs;
pub mod deploy_service;
mod engine;
pub mod fanout;
mod follow;
pub mod hook;
pub mod host;
pub mod limits;
mod listing;
pub mod metrics;
pub mod objects;
mod pool;
pub mod precompiled;
pub mod preview;
mod quarantine;
mod record;
pub mod registry;
mod retention;
mod rewrite;
pub mod screen;
pub mod shadow;
mod version;
mod wasi;
mod wit;

pub use hook::{
    EditAction, EditRequest, Hook, Moderation, ModerationInput, PreviewInput, ReactionInput,
};
pub use host::{CallError, PluginHost};
pub use limits::PluginLimits;
pub use registry::{Plugins, VersionRecord};
