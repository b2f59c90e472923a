//! The redb tables. Keys are tuples that start with the partition the
//! Scylla schema would use (tenant and conversation, or tenant, user and
//! device), so both backends answer the same queries the same way.
//! Rows that hold protocol objects are JSON, the same bytes the API serves.

use redb::TableDefinition;

/// Greater than every id: ids only use ASCII characters below 0x7f.
pub(super) const AFTER_ANY_ID: &str = "\u{7f}";

/// (tenant, conversation) → `ConversationRecord` JSON.
pub(super) const CONVERSATIONS: TableDefinition<(&str, &str), &[u8]> =
    TableDefinition::new("conversations");
/// (tenant, conversation, user) → `MemberRecord` JSON.
pub(super) const MEMBERS: TableDefinition<(&str, &str, &str), &[u8]> =
    TableDefinition::new("members");
/// (tenant, user, conversation) → (): the conversations of a user.
pub(super) const USER_CONVERSATIONS: TableDefinition<(&str, &str, &str), ()> =
    TableDefinition::new("user_conversations");
/// (tenant, conversation, seq) → `Message` JSON.
pub(super) const MESSAGES: TableDefinition<(&str, &str, u64), &[u8]> =
    TableDefinition::new("messages");
/// (tenant, conversation, sender, client_msg_id) → seq: idempotency keys.
pub(super) const SENT: TableDefinition<(&str, &str, &str, &str), u64> =
    TableDefinition::new("sent");
/// (tenant, user, device, conversation, seq) → (): undelivered messages.
pub(super) const INBOX: TableDefinition<(&str, &str, &str, &str, u64), ()> =
    TableDefinition::new("inbox");
/// (tenant, user, device) → first seen, Unix ms.
pub(super) const DEVICES: TableDefinition<(&str, &str, &str), i64> =
    TableDefinition::new("devices");
/// (tenant, user, device, conversation) → the device's delivered mark.
pub(super) const DEVICE_CURSORS: TableDefinition<(&str, &str, &str, &str), u64> =
    TableDefinition::new("device_cursors");
/// (tenant, conversation, UTC day) → (first seq, last seq) of that bucket.
pub(super) const BUCKETS: TableDefinition<(&str, &str, u32), (u64, u64)> =
    TableDefinition::new("buckets");
/// Store-wide facts such as the schema version.
pub(super) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");

pub(super) const SCHEMA_VERSION: &str = "1";
