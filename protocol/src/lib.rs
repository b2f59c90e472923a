//! The Switchboard client contract as Rust types: ids, the Snowflake
//! generator, message content, the message object, WebSocket frames, REST
//! bodies and error codes.
//!
//! This crate owns what `docs/protocol.md` says and nothing else. It does no IO,
//! knows no NATS subject and no storage layout; every other crate depends on
//! it and it depends on none of them.

pub mod channels;
pub mod content;
pub mod conversation;
pub mod custom;
pub mod error;
pub mod fields;
pub mod frames;
pub mod ids;
pub mod jobs;
pub mod keys;
pub mod membership;
pub mod message;
pub mod moderation;
pub mod poll;
pub mod previews;
pub mod profile;
pub mod push;
pub mod push_templates;
pub mod reaction;
pub mod reports;
pub mod safety;
pub mod scheduled;
#[cfg(feature = "schema")]
pub mod schema;
pub mod search;
pub mod server_api;
pub mod snowflake;
pub mod timestamp;
pub mod webhooks;

pub use content::{Content, ContentError, ContentLimits};
pub use conversation::{ConversationKind, ConversationView, MemberView};
pub use error::ErrorCode;
pub use frames::{
    AckStatus, ClientFrame, FrameError, PresenceInfo, PresenceStatus, ReceiptKind, SendAck,
    ServerFrame, TypingState,
};
pub use ids::{ClientMsgId, ConversationId, DeviceId, IdError, MessageId, TenantId, UserId};
pub use membership::{MemberSettings, NotificationLevel, Role};
pub use message::{Message, MessageVersion, MessageVersions, Reaction, ThreadSummary};
pub use reaction::ReactAction;
pub use snowflake::SnowflakeGenerator;
pub use timestamp::Timestamp;

/// The AsyncAPI 3 document of `/v1/ws` (generated from these types:
/// `schema.rs`), as gateways serve it at `/v1/asyncapi.json`.
pub const ASYNCAPI_JSON: &str = include_str!("../schema/asyncapi.json");

/// The JSON Schema of every frame (generated from these types).
pub const FRAMES_SCHEMA_JSON: &str = include_str!("../schema/frames.schema.json");
