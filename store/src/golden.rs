//! Fixtures of the stored formats: one message, as every backend must
//! keep writing and reading it. A change to a message's JSON, a key
//! layout or the archive object format breaks a golden test, so that it
//! is made on purpose, with a migration, and never by accident (stored
//! data outlives the code that wrote it).
//!
//! Built only for tests and with the `conformance` feature.
#![allow(clippy::unwrap_used)]

use switchboard_protocol::{
    ClientMsgId, Content, ConversationId, DeviceId, Message, MessageId, MessageVersion, Timestamp,
    UserId,
};

/// The tenant and conversation of the fixtures.
pub const TENANT: &str = "acme";
pub const CONVERSATION: &str = "general";

/// A message as the sequencer builds it.
pub fn message() -> Message {
    Message::plain(
        MessageId::from_u64(0x0123_4567_89ab_cdef),
        ConversationId::new(CONVERSATION).unwrap(),
        7,
        UserId::new("alice").unwrap(),
        DeviceId::new("phone").unwrap(),
        ClientMsgId::new("c-42").unwrap(),
        Some(Content::Text {
            text: "hello, world".into(),
        }),
        Timestamp::from_unix_ms(1_780_000_000_000),
    )
}

/// `message()` as JSON, in the embedded store's `messages` rows, in
/// Scylla's `messages.body` and in archive objects: with the v1.1 fields
/// (reply, thread, reactions, mentions).
pub const MESSAGE_JSON: &str = concat!(
    r#"{"message_id":"81985529216486895","conversation_id":"general","seq":7,"#,
    r#""sender_id":"alice","sender_device":"phone","client_msg_id":"c-42","#,
    r#""content":{"kind":"text","text":"hello, world"},"created_at":"2026-05-28T20:26:40.000Z","#,
    r#""edited_at":null,"deleted_at":null,"reply_to":null,"thread_id":null,"reactions":[],"#,
    r#""mentions":[],"mention_all":false}"#
);

/// `message()` as rows and archive objects written before v1.1 hold it:
/// it still reads as the same message (the v1.1 fields take their
/// defaults), so no stored message needs rewriting.
pub const MESSAGE_JSON_V1: &str = concat!(
    r#"{"message_id":"81985529216486895","conversation_id":"general","seq":7,"#,
    r#""sender_id":"alice","sender_device":"phone","client_msg_id":"c-42","#,
    r#""content":{"kind":"text","text":"hello, world"},"created_at":"2026-05-28T20:26:40.000Z","#,
    r#""edited_at":null,"deleted_at":null}"#
);

/// The version an edit stores as the original.
pub fn original_version() -> MessageVersion {
    MessageVersion {
        version: 1,
        content: Content::Text {
            text: "hello, world".into(),
        },
        at: Timestamp::from_unix_ms(1_780_000_000_000),
        editor: UserId::new("alice").unwrap(),
    }
}

/// `original_version()` as JSON, in version rows and archive objects.
pub const VERSION_JSON: &str = concat!(
    r#"{"version":1,"content":{"kind":"text","text":"hello, world"},"#,
    r#""at":"2026-05-28T20:26:40.000Z","editor":"alice"}"#
);

/// The archive object of the bucket holding `message()` after an edit
/// (its versions), before LZ4 framing.
pub const ARCHIVE_JSON: &str = concat!(
    r#"{"format":1,"bucket":{"tenant":"acme","conversation_id":"general","day":20601},"#,
    r#""first_seq":7,"last_seq":7,"messages":["#,
    r#"{"message_id":"81985529216486895","conversation_id":"general","seq":7,"#,
    r#""sender_id":"alice","sender_device":"phone","client_msg_id":"c-42","#,
    r#""content":{"kind":"text","text":"hello, world"},"created_at":"2026-05-28T20:26:40.000Z","#,
    r#""edited_at":null,"deleted_at":null,"reply_to":null,"thread_id":null,"reactions":[],"#,
    r#""mentions":[],"mention_all":false}],"#,
    r#""versions":[[7,[{"version":1,"content":{"kind":"text","text":"hello, world"},"#,
    r#""at":"2026-05-28T20:26:40.000Z","editor":"alice"}]]]}"#
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_and_a_version_keep_their_json() {
        assert_eq!(serde_json::to_string(&message()).unwrap(), MESSAGE_JSON);
        assert_eq!(
            serde_json::from_str::<Message>(MESSAGE_JSON).unwrap(),
            message()
        );
        assert_eq!(
            serde_json::from_str::<Message>(MESSAGE_JSON_V1).unwrap(),
            message()
        );
        assert_eq!(
            serde_json::to_string(&original_version()).unwrap(),
            VERSION_JSON
        );
        assert_eq!(
            serde_json::from_str::<MessageVersion>(VERSION_JSON).unwrap(),
            original_version()
        );
    }
}
