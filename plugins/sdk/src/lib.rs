//! The Switchboard plugin SDK: write a tenant plugin for one hook in a
//! dozen lines of Rust.
//!
//! Enable the feature of the hook the plugin exports (`moderation`,
//! `edit-policy` or `fan-out`), implement the hook's trait, and name the
//! type in the hook's macro:
//!
//! ```ignore
//! use switchboard_plugin::moderation::{Message, Moderator, Verdict};
//!
//! struct NoShouting;
//!
//! impl Moderator for NoShouting {
//!     fn moderate(message: Message) -> Verdict {
//!         match message.text() {
//!             Some(t) if t.len() > 8 && !t.chars().any(char::is_lowercase) => {
//!                 Verdict::reject("please do not shout")
//!             }
//!             _ => Verdict::Allow,
//!         }
//!     }
//! }
//!
//! switchboard_plugin::moderator!(NoShouting);
//! ```
//!
//! A moderator may also decide reactions (`Moderator::moderate_reaction`;
//! without it every reaction is allowed) and link previews
//! (`Moderator::moderate_preview`: keep, drop or rewrite a stored
//! message's card; without it every card shows), and sees a message's
//! reply, thread and mentions, custom messages (`Content::Custom`) and
//! the message's own `custom` fields (JSON text).
//!
//! The bindings are generated from `wit/plugin.wit`, a copy of the host's
//! `switchboard:plugin@0.4.0` package. Build for `wasm32-wasip2`; the
//! result is the component to deploy. `config`, `config_or`,
//! `config_parse` and the log functions are the host's two imports.

#[cfg(any(
    all(feature = "moderation", feature = "edit-policy"),
    all(feature = "moderation", feature = "fan-out"),
    all(feature = "edit-policy", feature = "fan-out"),
))]
compile_error!(
    "a plugin exports one hook: enable one of the features moderation, edit-policy, fan-out"
);

#[cfg(not(any(feature = "moderation", feature = "edit-policy", feature = "fan-out")))]
compile_error!("enable the feature of the plugin's hook: moderation, edit-policy or fan-out");

/// Moderation: allow, reject or rewrite a message before it is stored,
/// and allow or refuse a reaction being added.
#[cfg(feature = "moderation")]
pub mod moderation {
    wit_bindgen::generate!({
        path: "wit",
        world: "moderator",
        pub_export_macro: true,
        export_macro_name: "export_moderator",
        default_bindings_module: "switchboard_plugin::moderation",
    });

    pub use exports::switchboard::plugin::moderation::{
        Guest, LinkPreview, Message, Preview, PreviewImage, PreviewVerdict, Reaction,
        ReactionVerdict, Verdict,
    };
    pub use switchboard::plugin::types::{Content, ConversationKind, CustomContent, Media};

    /// A moderator: decides each message before it is stored and, if it
    /// wants to, each reaction being added.
    pub trait Moderator {
        fn moderate(message: Message) -> Verdict;

        /// A reaction being added (taking one back is never asked);
        /// allowed unless a moderator says otherwise.
        fn moderate_reaction(reaction: Reaction) -> ReactionVerdict {
            let _ = reaction;
            ReactionVerdict::Allow
        }

        /// A link preview of a stored message, before the members see
        /// it; shown as made unless a moderator says otherwise.
        fn moderate_preview(preview: Preview) -> PreviewVerdict {
            let _ = preview;
            PreviewVerdict::Allow
        }
    }

    impl Preview {
        /// The host of the card's link (`example.com` of
        /// `https://example.com:8443/a`), lowercased.
        pub fn host(&self) -> String {
            let rest = self.card.url.split_once("://").map_or("", |(_, r)| r);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host = match host.strip_prefix('[') {
                Some(v6) => v6.split(']').next().unwrap_or(""),
                None => host.split(':').next().unwrap_or(""),
            };
            host.to_lowercase()
        }
    }

    impl Message {
        /// The text, a media item's caption, or a custom message's
        /// fallback text: what people read.
        pub fn text(&self) -> Option<&str> {
            match &self.content {
                Content::Text(t) => Some(t),
                Content::Image(m) | Content::File(m) | Content::Voice(m) => m.caption.as_deref(),
                Content::Custom(c) => c.fallback_text.as_deref(),
            }
        }

        /// Whether it names `user`: mentions them, or everyone.
        pub fn mentions_user(&self, user: &str) -> bool {
            self.mention_all || self.mentions.iter().any(|m| m == user)
        }
    }

    impl ReactionVerdict {
        /// Store nothing; the reacting user is told `reason`.
        pub fn reject(reason: impl Into<String>) -> Self {
            ReactionVerdict::Reject(reason.into())
        }
    }

    impl Verdict {
        /// Store nothing; the sender is told `reason`.
        pub fn reject(reason: impl Into<String>) -> Self {
            Verdict::Reject(reason.into())
        }

        /// Store `text` instead (for media, as the caption; for a custom
        /// message, as its fallback text).
        pub fn rewrite_text(message: &Message, text: impl Into<String>) -> Self {
            let text = text.into();
            let media = |m: &Media| Media {
                caption: Some(text.clone()),
                ..m.clone()
            };
            Verdict::Rewrite(match &message.content {
                Content::Text(_) => Content::Text(text.clone()),
                Content::Image(m) => Content::Image(media(m)),
                Content::File(m) => Content::File(media(m)),
                Content::Voice(m) => Content::Voice(media(m)),
                Content::Custom(c) => Content::Custom(CustomContent {
                    fallback_text: Some(text.clone()),
                    ..c.clone()
                }),
            })
        }
    }

    pub(crate) use switchboard::plugin::host;
}

/// Makes `$plugin` (a type implementing
/// [`moderation::Moderator`]) the component's moderation hook.
#[cfg(feature = "moderation")]
#[macro_export]
macro_rules! moderator {
    ($plugin:ident) => {
        /// The WIT export, handing each call to the plugin's `Moderator`.
        struct SwitchboardModerator;

        impl $crate::moderation::Guest for SwitchboardModerator {
            fn moderate(message: $crate::moderation::Message) -> $crate::moderation::Verdict {
                <$plugin as $crate::moderation::Moderator>::moderate(message)
            }

            fn moderate_reaction(
                reaction: $crate::moderation::Reaction,
            ) -> $crate::moderation::ReactionVerdict {
                <$plugin as $crate::moderation::Moderator>::moderate_reaction(reaction)
            }

            fn moderate_preview(
                preview: $crate::moderation::Preview,
            ) -> $crate::moderation::PreviewVerdict {
                <$plugin as $crate::moderation::Moderator>::moderate_preview(preview)
            }
        }

        $crate::moderation::export_moderator!(SwitchboardModerator with_types_in $crate::moderation);
    };
}

/// Edit policy: who may edit or delete which message, and when.
#[cfg(feature = "edit-policy")]
pub mod edit_policy {
    wit_bindgen::generate!({
        path: "wit",
        world: "edit-policy-plugin",
        pub_export_macro: true,
        export_macro_name: "export_edit_policy",
        default_bindings_module: "switchboard_plugin::edit_policy",
    });

    pub use exports::switchboard::plugin::edit_policy::{
        Action, Decision, Guest as EditPolicy, Request,
    };

    impl Request {
        /// Whether the actor sent the message.
        pub fn by_sender(&self) -> bool {
            self.actor == self.sender
        }

        /// Milliseconds since the message was sent.
        pub fn age_ms(&self) -> i64 {
            self.now_ms - self.created_at_ms
        }
    }

    impl Decision {
        /// Refuse, telling the actor `reason`.
        pub fn deny(reason: impl Into<String>) -> Self {
            Decision::Deny(reason.into())
        }
    }

    pub(crate) use switchboard::plugin::host;
}

/// Makes `$plugin` (a type implementing [`edit_policy::EditPolicy`]) the
/// component's edit policy.
#[cfg(feature = "edit-policy")]
#[macro_export]
macro_rules! edit_policy {
    ($plugin:ident) => {
        $crate::edit_policy::export_edit_policy!($plugin with_types_in $crate::edit_policy);
    };
}

/// Fan-out policy: whether a conversation's messages are fanned out on
/// write or on read.
#[cfg(feature = "fan-out")]
pub mod fan_out {
    wit_bindgen::generate!({
        path: "wit",
        world: "fan-out-plugin",
        pub_export_macro: true,
        export_macro_name: "export_fan_out",
        default_bindings_module: "switchboard_plugin::fan_out",
    });

    pub use exports::switchboard::plugin::fan_out::{Conversation, Guest as FanOutPolicy, Mode};
    pub use switchboard::plugin::types::ConversationKind;

    pub(crate) use switchboard::plugin::host;
}

/// Makes `$plugin` (a type implementing [`fan_out::FanOutPolicy`]) the
/// component's fan-out policy.
#[cfg(feature = "fan-out")]
#[macro_export]
macro_rules! fan_out_policy {
    ($plugin:ident) => {
        $crate::fan_out::export_fan_out!($plugin with_types_in $crate::fan_out);
    };
}

#[cfg(feature = "moderation")]
use moderation::host;

#[cfg(all(feature = "edit-policy", not(feature = "moderation")))]
use edit_policy::host;

#[cfg(all(
    feature = "fan-out",
    not(feature = "moderation"),
    not(feature = "edit-policy")
))]
use fan_out::host;

/// A configuration value deployed with this version (`config.<key>`).
pub fn config(key: &str) -> Option<String> {
    host::config(key)
}

/// A configuration value, or `default` when it is not set.
pub fn config_or(key: &str, default: &str) -> String {
    config(key).unwrap_or_else(|| default.to_owned())
}

/// A configuration value parsed as a `T`; `None` when it is not set or
/// does not parse.
pub fn config_parse<T: core::str::FromStr>(key: &str) -> Option<T> {
    config(key)?.trim().parse().ok()
}

/// Logs under the process's `plugin` target, tagged with the tenant, the
/// hook and the component's digest (16 lines a call at most).
pub fn debug(message: &str) {
    host::log(host::Level::Debug, message);
}

pub fn info(message: &str) {
    host::log(host::Level::Info, message);
}

pub fn warn(message: &str) {
    host::log(host::Level::Warn, message);
}

pub fn error(message: &str) {
    host::log(host::Level::Error, message);
}
