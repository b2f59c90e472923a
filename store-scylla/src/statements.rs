//! Every statement the store runs, prepared once at connect.
//!
//! Each names the table's whole partition key with `=`; clustering columns
//! are restricted as a prefix in schema order, with a range only on the
//! last restricted one; no ALLOW FILTERING, no IN, no lightweight
//! transactions. The full scans (inbox sweep, archive candidates, policies,
//! open reports, and an erasure's look for others' blocks of the user) have
//! no WHERE at all and are paged, by a resumable cursor or by the driver.
//! The unit test at the end checks all of this against
//! `deploy/scylla/schema.cql`.

use scylla::client::session::Session;
use switchboard_store::StoreResult;

use crate::cql::{BigInt, Int, Read, Text, TinyInt, Write};

/// Conversation row: kind, title, created_at, created_by, last_seq,
/// last_message, last_activity.
pub(crate) type ConversationRow = (
    String,
    Option<String>,
    i64,
    String,
    i64,
    Option<String>,
    i64,
);

/// Bucket row: day, first_seq, last_seq, archive_object.
pub(crate) type BucketRow = (i32, i64, Option<i64>, Option<String>);

/// Inbox scan row: tenant, user, device, conversation, seq, written_at,
/// and the write time of written_at.
pub(crate) type InboxScanRow = (
    String,
    String,
    String,
    String,
    i64,
    Option<i64>,
    Option<i64>,
);

macro_rules! statements {
    ($($name:ident: $ty:ty = $cql:literal;)+) => {
        pub(crate) struct Statements {
            $(pub(crate) $name: $ty,)+
        }

        impl Statements {
            pub(crate) async fn prepare(session: &Session) -> StoreResult<Self> {
                Ok(Self {
                    $($name: <$ty>::prepare(session, $cql).await?,)+
                })
            }
        }

        #[cfg(test)]
        pub(crate) fn shapes() -> Vec<crate::cql::Shape> {
            vec![$(<$ty>::shape(stringify!($name), $cql),)+]
        }
    };
}

statements! {
    // --- schema_version
    schema_version: Read<(Text,), (i32,)> =
        "SELECT version FROM schema_version WHERE component = ?";

    // --- conversations
    conversation: Read<(Text, Text), ConversationRow> =
        "SELECT kind, title, created_at, created_by, last_seq, last_message, last_activity FROM conversations WHERE tenant = ? AND conversation_id = ?";
    conversation_activity: Read<(Text, Text), (i64,)> =
        "SELECT last_activity FROM conversations WHERE tenant = ? AND conversation_id = ?";
    conversation_origin: Read<(Text, Text), (String, String)> =
        "SELECT kind, created_by FROM conversations WHERE tenant = ? AND conversation_id = ?";
    insert_conversation: Write<(Text, Text, Text, Text, BigInt, Text, BigInt, Text, BigInt, BigInt)> =
        "INSERT INTO conversations (tenant, conversation_id, kind, title, created_at, created_by, last_seq, last_message, last_activity) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?";
    set_position: Write<(BigInt, BigInt, Text, BigInt, Text, Text)> =
        "UPDATE conversations USING TIMESTAMP ? SET last_seq = ?, last_message = ?, last_activity = ? WHERE tenant = ? AND conversation_id = ?";
    set_last_message: Write<(BigInt, Text, Text, Text)> =
        "UPDATE conversations USING TIMESTAMP ? SET last_message = ? WHERE tenant = ? AND conversation_id = ?";
    set_creator: Write<(BigInt, Text, Text, Text)> =
        "UPDATE conversations USING TIMESTAMP ? SET created_by = ? WHERE tenant = ? AND conversation_id = ?";

    // --- members and marks
    member: Read<(Text, Text, Text), (i64,)> =
        "SELECT joined_at FROM members WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    members: Read<(Text, Text), (String, i64)> =
        "SELECT user_id, joined_at FROM members WHERE tenant = ? AND conversation_id = ?";
    insert_member: Write<(Text, Text, Text, BigInt, BigInt)> =
        "INSERT INTO members (tenant, conversation_id, user_id, joined_at) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_member: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM members USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    marks_of: Read<(Text, Text, Text), (i8, i64)> =
        "SELECT mark, seq FROM member_marks WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    all_marks: Read<(Text, Text), (String, i8, i64)> =
        "SELECT user_id, mark, seq FROM member_marks WHERE tenant = ? AND conversation_id = ?";
    insert_mark: Write<(Text, Text, Text, TinyInt, BigInt, BigInt)> =
        "INSERT INTO member_marks (tenant, conversation_id, user_id, mark, seq) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_marks_below: Write<(BigInt, Text, Text, Text, TinyInt, BigInt)> =
        "DELETE FROM member_marks USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND user_id = ? AND mark = ? AND seq < ?";
    delete_marks_of: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM member_marks USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    user_conversations: Read<(Text, Text), (String,)> =
        "SELECT conversation_id FROM user_conversations WHERE tenant = ? AND user_id = ?";
    insert_user_conversation: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO user_conversations (tenant, user_id, conversation_id) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_user_conversation: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM user_conversations USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND conversation_id = ?";
    user_conversations_after: Read<(Text, Text, Text, Int), (String,)> =
        "SELECT conversation_id FROM user_conversations WHERE tenant = ? AND user_id = ? AND conversation_id > ? LIMIT ?";
    delete_user_conversations_of: Write<(BigInt, Text, Text)> =
        "DELETE FROM user_conversations USING TIMESTAMP ? WHERE tenant = ? AND user_id = ?";

    // --- the conversations a user ever joined (erasure, v1.2)
    joined: Read<(Text, Text), (String,)> =
        "SELECT conversation_id FROM joined WHERE tenant = ? AND user_id = ?";
    joined_after: Read<(Text, Text, Text, Int), (String,)> =
        "SELECT conversation_id FROM joined WHERE tenant = ? AND user_id = ? AND conversation_id > ? LIMIT ?";
    insert_joined: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO joined (tenant, user_id, conversation_id) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_joined: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM joined USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND conversation_id = ?";
    delete_joined_of: Write<(BigInt, Text, Text)> =
        "DELETE FROM joined USING TIMESTAMP ? WHERE tenant = ? AND user_id = ?";

    // --- members' v1.1 state (given role, own settings)
    member_state: Read<(Text, Text, Text), (String,)> =
        "SELECT state FROM member_states WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    member_states: Read<(Text, Text), (String, String)> =
        "SELECT user_id, state FROM member_states WHERE tenant = ? AND conversation_id = ?";
    insert_member_state: Write<(Text, Text, Text, Text, BigInt)> =
        "INSERT INTO member_states (tenant, conversation_id, user_id, state) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_member_state: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM member_states USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND user_id = ?";

    // --- reactions and pins (v1.1)
    user_reactions: Read<(Text, Text, Int, BigInt, Text), (String,)> =
        "SELECT emoji FROM reactions WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq = ? AND user_id = ?";
    insert_reaction: Write<(Text, Text, Int, BigInt, Text, Text, BigInt, BigInt)> =
        "INSERT INTO reactions (tenant, conversation_id, day, seq, user_id, emoji, reacted_at) VALUES (?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_reaction: Write<(BigInt, Text, Text, Int, BigInt, Text, Text)> =
        "DELETE FROM reactions USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq = ? AND user_id = ? AND emoji = ?";
    delete_reactions_of: Write<(BigInt, Text, Text, Int, BigInt)> =
        "DELETE FROM reactions USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq = ?";
    reactions_of_day: Read<(Text, Text, Int), (i64, String, String)> =
        "SELECT seq, user_id, emoji FROM reactions WHERE tenant = ? AND conversation_id = ? AND day = ?";
    reactions_between: Read<(Text, Text, Int, BigInt, BigInt), (i64, String)> =
        "SELECT seq, user_id FROM reactions WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq > ? AND seq <= ?";
    pins: Read<(Text, Text), (i64, String, i64)> =
        "SELECT message_id, pinned_by, pinned_at FROM pins WHERE tenant = ? AND conversation_id = ?";
    insert_pin: Write<(Text, Text, BigInt, Text, BigInt, BigInt)> =
        "INSERT INTO pins (tenant, conversation_id, message_id, pinned_by, pinned_at) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_pin: Write<(BigInt, Text, Text, BigInt)> =
        "DELETE FROM pins USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND message_id = ?";

    // --- policies, bans, blocks (v1.2)
    policy: Read<(Text, Text), (String,)> =
        "SELECT policy FROM conversation_policies WHERE tenant = ? AND conversation_id = ?";
    insert_policy: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO conversation_policies (tenant, conversation_id, policy) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_policy: Write<(BigInt, Text, Text)> =
        "DELETE FROM conversation_policies USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ?";
    bans: Read<(Text, Text), (String,)> =
        "SELECT ban FROM bans WHERE tenant = ? AND conversation_id = ?";
    insert_ban: Write<(Text, Text, Text, Text, BigInt)> =
        "INSERT INTO bans (tenant, conversation_id, user_id, ban) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_ban: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM bans USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    blocks: Read<(Text, Text), (String, i64)> =
        "SELECT blocked_id, blocked_at FROM blocks WHERE tenant = ? AND user_id = ?";
    block: Read<(Text, Text, Text), (i64,)> =
        "SELECT blocked_at FROM blocks WHERE tenant = ? AND user_id = ? AND blocked_id = ?";
    insert_block: Write<(Text, Text, Text, BigInt, BigInt)> =
        "INSERT INTO blocks (tenant, user_id, blocked_id, blocked_at) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_block: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM blocks USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND blocked_id = ?";
    delete_blocks_of: Write<(BigInt, Text, Text)> =
        "DELETE FROM blocks USING TIMESTAMP ? WHERE tenant = ? AND user_id = ?";
    scan_blocks: Read<(), (String, String, String)> =
        "SELECT tenant, user_id, blocked_id FROM blocks";

    // --- open channels (v1.3)
    directory: Read<(Text, Text, Int), (String, String)> =
        "SELECT conversation_id, listing FROM directory WHERE tenant = ? AND conversation_id > ? LIMIT ?";
    insert_listing: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO directory (tenant, conversation_id, listing) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_listing: Write<(BigInt, Text, Text)> =
        "DELETE FROM directory USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ?";
    invites: Read<(Text, Text), (String,)> =
        "SELECT invite FROM invites WHERE tenant = ? AND conversation_id = ?";
    invite: Read<(Text, Text, Text), (String,)> =
        "SELECT invite FROM invites WHERE tenant = ? AND conversation_id = ? AND code = ?";
    insert_invite: Write<(Text, Text, Text, Text, BigInt)> =
        "INSERT INTO invites (tenant, conversation_id, code, invite) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_invite: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM invites USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND code = ?";
    invite_code: Read<(Text, Text), (String,)> =
        "SELECT conversation_id FROM invite_codes WHERE tenant = ? AND code = ?";
    insert_invite_code: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO invite_codes (tenant, code, conversation_id) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_invite_code: Write<(BigInt, Text, Text)> =
        "DELETE FROM invite_codes USING TIMESTAMP ? WHERE tenant = ? AND code = ?";

    // --- profiles (v1.3)
    profile: Read<(Text, Text), (String,)> =
        "SELECT profile FROM profiles WHERE tenant = ? AND user_id = ?";
    insert_profile: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO profiles (tenant, user_id, profile) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_profile: Write<(BigInt, Text, Text)> =
        "DELETE FROM profiles USING TIMESTAMP ? WHERE tenant = ? AND user_id = ?";

    due: Read<(Text, Text, BigInt, Int), (i64, i64)> =
        "SELECT expires_at, seq FROM message_expiries WHERE tenant = ? AND conversation_id = ? AND expires_at <= ? LIMIT ?";
    insert_expiry: Write<(Text, Text, BigInt, BigInt, BigInt)> =
        "INSERT INTO message_expiries (tenant, conversation_id, expires_at, seq) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_expiry: Write<(BigInt, Text, Text, BigInt, BigInt)> =
        "DELETE FROM message_expiries USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND expires_at = ? AND seq = ?";
    scan_policies: Read<(), (String, String, String)> =
        "SELECT tenant, conversation_id, policy FROM conversation_policies";
    scan_conversations: Read<(), (String, String)> =
        "SELECT tenant, conversation_id FROM conversations";
    report: Read<(Text, BigInt), (String,)> =
        "SELECT report FROM reports WHERE tenant = ? AND report_id = ?";
    reports_before: Read<(Text, BigInt, Int), (String,)> =
        "SELECT report FROM reports WHERE tenant = ? AND report_id < ? LIMIT ?";
    open_reports_before: Read<(Text, BigInt, Int), (i64,)> =
        "SELECT report_id FROM open_reports WHERE tenant = ? AND report_id < ? LIMIT ?";
    scan_open_reports: Read<(), (String, i64)> =
        "SELECT tenant, report_id FROM open_reports";
    insert_report: Write<(Text, BigInt, Text, Text, BigInt)> =
        "INSERT INTO reports (tenant, report_id, status, report) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    insert_open_report: Write<(Text, BigInt, BigInt)> =
        "INSERT INTO open_reports (tenant, report_id) VALUES (?, ?) USING TIMESTAMP ?";
    delete_open_report: Write<(BigInt, Text, BigInt)> =
        "DELETE FROM open_reports USING TIMESTAMP ? WHERE tenant = ? AND report_id = ?";

    // --- threads and mentions (v1.1)
    thread_reply_seqs: Read<(Text, Text, BigInt, BigInt, BigInt, Int), (i64,)> =
        "SELECT seq FROM thread_replies WHERE tenant = ? AND conversation_id = ? AND root_seq = ? AND seq >= ? AND seq < ? ORDER BY seq DESC LIMIT ?";
    thread_replies_after: Read<(Text, Text, BigInt, BigInt, Int), (i64,)> =
        "SELECT seq FROM thread_replies WHERE tenant = ? AND conversation_id = ? AND root_seq = ? AND seq > ? LIMIT ?";
    insert_thread_reply: Write<(Text, Text, BigInt, BigInt, BigInt)> =
        "INSERT INTO thread_replies (tenant, conversation_id, root_seq, seq) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    thread_mark: Read<(Text, Text, Text, BigInt), (i64,)> =
        "SELECT read_seq FROM thread_marks WHERE tenant = ? AND user_id = ? AND conversation_id = ? AND root_seq = ?";
    thread_marks: Read<(Text, Text, Text), (i64, i64)> =
        "SELECT root_seq, read_seq FROM thread_marks WHERE tenant = ? AND user_id = ? AND conversation_id = ?";
    insert_thread_mark: Write<(Text, Text, Text, BigInt, BigInt, BigInt)> =
        "INSERT INTO thread_marks (tenant, user_id, conversation_id, root_seq, read_seq) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_thread_marks_of: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM thread_marks USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND conversation_id = ?";
    uncounted_between: Read<(Text, Text, BigInt, BigInt, Int), (i64,)> =
        "SELECT seq FROM uncounted WHERE tenant = ? AND conversation_id = ? AND seq > ? AND seq <= ? LIMIT ?";
    insert_uncounted: Write<(Text, Text, BigInt, BigInt)> =
        "INSERT INTO uncounted (tenant, conversation_id, seq) VALUES (?, ?, ?) USING TIMESTAMP ?";
    mentions_after: Read<(Text, Text, Text, BigInt, Int), (i64,)> =
        "SELECT seq FROM mentions WHERE tenant = ? AND user_id = ? AND conversation_id = ? AND seq > ? LIMIT ?";
    insert_mention: Write<(Text, Text, Text, BigInt, BigInt)> =
        "INSERT INTO mentions (tenant, user_id, conversation_id, seq) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_mentions_of: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM mentions USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND conversation_id = ?";
    delete_mention: Write<(BigInt, Text, Text, Text, BigInt)> =
        "DELETE FROM mentions USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND conversation_id = ? AND seq = ?";

    // --- who has spoken to whom (consent and presence)
    speaker: Read<(Text, Text, Text), (String,)> =
        "SELECT user_id FROM speakers WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    insert_speaker: Write<(Text, Text, Text, BigInt)> =
        "INSERT INTO speakers (tenant, conversation_id, user_id) VALUES (?, ?, ?) USING TIMESTAMP ?";
    delete_speaker: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM speakers USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND user_id = ?";
    unsolicited_since: Read<(Text, Text, BigInt), (i64,)> =
        "SELECT at FROM unsolicited_adds WHERE tenant = ? AND user_id = ? AND at >= ?";
    insert_unsolicited: Write<(Text, Text, BigInt, Text, Text, Int, BigInt)> =
        "INSERT INTO unsolicited_adds (tenant, user_id, at, conversation_id, actor) VALUES (?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?";
    delete_unsolicited_of: Write<(BigInt, Text, Text)> =
        "DELETE FROM unsolicited_adds USING TIMESTAMP ? WHERE tenant = ? AND user_id = ?";

    // --- messages, versions, buckets
    message: Read<(Text, Text, Int, BigInt), (String,)> =
        "SELECT body FROM messages WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq = ?";
    newest_first: Read<(Text, Text, Int, BigInt, BigInt, Int), (String,)> =
        "SELECT body FROM messages WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq >= ? AND seq < ? LIMIT ?";
    oldest_first: Read<(Text, Text, Int, BigInt, BigInt, Int), (String,)> =
        "SELECT body FROM messages WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq > ? AND seq <= ? ORDER BY seq ASC LIMIT ?";
    bucket_messages: Read<(Text, Text, Int), (String,)> =
        "SELECT body FROM messages WHERE tenant = ? AND conversation_id = ? AND day = ?";
    insert_message: Write<(Text, Text, Int, BigInt, Text, BigInt)> =
        "INSERT INTO messages (tenant, conversation_id, day, seq, body) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_bucket_messages: Write<(BigInt, Text, Text, Int)> =
        "DELETE FROM messages USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND day = ?";
    versions: Read<(Text, Text, Int, BigInt), (String,)> =
        "SELECT body FROM message_versions WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq = ?";
    versions_between: Read<(Text, Text, Int, BigInt, BigInt), (i64, String)> =
        "SELECT seq, body FROM message_versions WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq > ? AND seq <= ?";
    insert_version: Write<(Text, Text, Int, BigInt, Int, Text, BigInt)> =
        "INSERT INTO message_versions (tenant, conversation_id, day, seq, version, body) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_versions: Write<(BigInt, Text, Text, Int, BigInt)> =
        "DELETE FROM message_versions USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND day = ? AND seq = ?";
    delete_bucket_versions: Write<(BigInt, Text, Text, Int)> =
        "DELETE FROM message_versions USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND day = ?";
    buckets: Read<(Text, Text), BucketRow> =
        "SELECT day, first_seq, last_seq, archive_object FROM buckets WHERE tenant = ? AND conversation_id = ?";
    scan_buckets: Read<(), (String, String, i32, Option<String>)> =
        "SELECT tenant, conversation_id, day, archive_object FROM buckets";
    insert_bucket: Write<(Text, Text, Int, BigInt, BigInt)> =
        "INSERT INTO buckets (tenant, conversation_id, day, first_seq) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    archive_bucket: Write<(BigInt, BigInt, Text, Text, Text, Int)> =
        "UPDATE buckets USING TIMESTAMP ? SET last_seq = ?, archive_object = ? WHERE tenant = ? AND conversation_id = ? AND day = ?";

    // --- idempotency keys and the message-id index
    sent: Read<(Text, Text, Text, Text), (i64, i32)> =
        "SELECT seq, day FROM sent WHERE tenant = ? AND conversation_id = ? AND sender_id = ? AND client_msg_id = ?";
    insert_sent: Write<(Text, Text, Text, Text, BigInt, Int, BigInt)> =
        "INSERT INTO sent (tenant, conversation_id, sender_id, client_msg_id, seq, day) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_sent: Write<(BigInt, Text, Text, Text, Text)> =
        "DELETE FROM sent USING TIMESTAMP ? WHERE tenant = ? AND conversation_id = ? AND sender_id = ? AND client_msg_id = ?";
    sent_by_before: Read<(Text, Text, Text, BigInt, Int), (i64, i32)> =
        "SELECT seq, day FROM sent_by WHERE tenant = ? AND sender_id = ? AND conversation_id = ? AND seq < ? LIMIT ?";
    insert_sent_by: Write<(Text, Text, Text, BigInt, Int, BigInt)> =
        "INSERT INTO sent_by (tenant, sender_id, conversation_id, seq, day) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";
    sent_by_between: Read<(Text, Text, Text, BigInt, BigInt, Int), (i64,)> =
        "SELECT seq FROM sent_by WHERE tenant = ? AND sender_id = ? AND conversation_id = ? AND seq > ? AND seq <= ? ORDER BY seq ASC LIMIT ?";
    sent_by_seqs: Read<(Text, Text, Text), (i64,)> =
        "SELECT seq FROM sent_by WHERE tenant = ? AND sender_id = ? AND conversation_id = ?";
    delete_sent_by_of: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM sent_by USING TIMESTAMP ? WHERE tenant = ? AND sender_id = ? AND conversation_id = ?";
    unindexed_buckets: Read<(Text, Text), (i32,)> =
        "SELECT day FROM unindexed_buckets WHERE tenant = ? AND conversation_id = ?";
    index: Read<(Text, Text, BigInt), (i64, i32)> =
        "SELECT seq, day FROM message_index WHERE tenant = ? AND conversation_id = ? AND message_id = ?";
    insert_index: Write<(Text, Text, BigInt, BigInt, Int, BigInt)> =
        "INSERT INTO message_index (tenant, conversation_id, message_id, seq, day) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";

    // --- inbox, devices, cursors
    inbox: Read<(Text, Text, Text), (String, i64, i32)> =
        "SELECT conversation_id, seq, day FROM inbox WHERE tenant = ? AND user_id = ? AND device_id = ?";
    inbox_after: Read<(Text, Text, Text, Text, BigInt), (String, i64, i32)> =
        "SELECT conversation_id, seq, day FROM inbox WHERE tenant = ? AND user_id = ? AND device_id = ? AND (conversation_id, seq) > (?, ?)";
    scan_inbox: Read<(), InboxScanRow> =
        "SELECT tenant, user_id, device_id, conversation_id, seq, written_at, WRITETIME(written_at) FROM inbox";
    insert_inbox: Write<(Text, Text, Text, Text, BigInt, Int, BigInt, Int, BigInt)> =
        "INSERT INTO inbox (tenant, user_id, device_id, conversation_id, seq, day, written_at) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?";
    delete_inbox: Write<(BigInt, Text, Text, Text, Text, BigInt)> =
        "DELETE FROM inbox USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND device_id = ? AND conversation_id = ? AND seq = ?";
    delete_inbox_between: Write<(BigInt, Text, Text, Text, Text, BigInt, BigInt)> =
        "DELETE FROM inbox USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND device_id = ? AND conversation_id = ? AND seq > ? AND seq <= ?";
    delete_inbox_conversation: Write<(BigInt, Text, Text, Text, Text)> =
        "DELETE FROM inbox USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND device_id = ? AND conversation_id = ?";
    delete_device_inbox: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM inbox USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND device_id = ?";
    devices: Read<(Text, Text), (String,)> =
        "SELECT device_id FROM devices WHERE tenant = ? AND user_id = ?";
    device: Read<(Text, Text, Text), (i64,)> =
        "SELECT first_seen FROM devices WHERE tenant = ? AND user_id = ? AND device_id = ?";
    insert_device: Write<(Text, Text, Text, BigInt, BigInt)> =
        "INSERT INTO devices (tenant, user_id, device_id, first_seen) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_devices_of: Write<(BigInt, Text, Text)> =
        "DELETE FROM devices USING TIMESTAMP ? WHERE tenant = ? AND user_id = ?";
    cursor: Read<(Text, Text, Text, Text), (i64,)> =
        "SELECT delivered_seq FROM device_cursors WHERE tenant = ? AND user_id = ? AND device_id = ? AND conversation_id = ?";
    set_cursor: Write<(Text, Text, Text, Text, BigInt, BigInt)> =
        "INSERT INTO device_cursors (tenant, user_id, device_id, conversation_id, delivered_seq) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?";
    delete_device_cursors: Write<(BigInt, Text, Text, Text)> =
        "DELETE FROM device_cursors USING TIMESTAMP ? WHERE tenant = ? AND user_id = ? AND device_id = ?";

    // --- media
    legacy_media_refs: Read<(Text, Text), (String,)> =
        "SELECT conversation_id FROM media_refs WHERE tenant = ? AND blob_ref = ?";
    media_refs: Read<(Text, Text), (String,)> =
        "SELECT conversation_id FROM media_message_refs WHERE tenant = ? AND blob_ref = ?";
    insert_media_ref: Write<(Text, Text, Text, BigInt, BigInt)> =
        "INSERT INTO media_message_refs (tenant, blob_ref, conversation_id, seq) VALUES (?, ?, ?, ?) USING TIMESTAMP ?";
    delete_media_ref: Write<(BigInt, Text, Text, Text, BigInt)> =
        "DELETE FROM media_message_refs USING TIMESTAMP ? WHERE tenant = ? AND blob_ref = ? AND conversation_id = ? AND seq = ?";
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::collections::HashMap;

    use super::shapes;
    use crate::schema::{Table, tables};

    /// The CQL type of what a marker or a selected expression stands for.
    fn column_type<'a>(table: &'a Table, column: &str) -> &'a str {
        table
            .columns
            .get(column)
            .unwrap_or_else(|| panic!("{} has no column {column}", table.name))
    }

    fn split_list(list: &str) -> Vec<String> {
        list.split(',').map(|s| s.trim().to_owned()).collect()
    }

    /// Checks a WHERE clause against the primary key and returns the types
    /// of its markers, in order.
    fn check_where(name: &str, table: &Table, clause: &str) -> Vec<String> {
        let mut binds = Vec::new();
        // (column, operator) in order.
        let mut restricted: Vec<(String, String)> = Vec::new();
        for cond in clause.split(" AND ") {
            let cond = cond.trim();
            if let Some(rest) = cond.strip_prefix('(') {
                let (cols, tail) = rest.split_once(')').expect("tuple");
                let tail = tail.trim();
                let (op, values) = tail.split_once(' ').expect("tuple op");
                let cols = split_list(cols);
                assert_eq!(
                    values.matches('?').count(),
                    cols.len(),
                    "{name}: tuple arity"
                );
                for c in cols {
                    binds.push(column_type(table, &c).to_owned());
                    restricted.push((c, format!("tuple{op}")));
                }
                continue;
            }
            let parts: Vec<&str> = cond.split_whitespace().collect();
            assert_eq!(parts.len(), 3, "{name}: condition {cond:?}");
            assert_eq!(parts[2], "?", "{name}: every value is bound");
            assert!(
                ["=", "<", "<=", ">", ">="].contains(&parts[1]),
                "{name}: operator {}",
                parts[1]
            );
            binds.push(column_type(table, parts[0]).to_owned());
            restricted.push((parts[0].to_owned(), parts[1].to_owned()));
        }
        // The whole partition key, by equality.
        for pk in &table.partition_key {
            assert!(
                restricted.iter().any(|(c, op)| c == pk && op == "="),
                "{name}: partition key column {pk} not restricted by ="
            );
        }
        // Clustering columns: an equality prefix, then ranges on one
        // column only (or one multi-column slice), and nothing after.
        let clustering: Vec<&(String, String)> = restricted
            .iter()
            .filter(|(c, _)| !table.partition_key.contains(c))
            .collect();
        let mut position = 0;
        let mut range_on: Option<String> = None;
        let mut tuple_seen = false;
        for (c, op) in clustering {
            if op.starts_with("tuple") {
                // A multi-column slice: consecutive clustering columns from
                // the current position, and nothing after it.
                assert!(range_on.is_none(), "{name}: tuple after a range");
                assert_eq!(
                    table.clustering.get(position),
                    Some(c),
                    "{name}: tuple columns out of order"
                );
                position += 1;
                tuple_seen = true;
                continue;
            }
            assert!(!tuple_seen, "{name}: restriction after a tuple slice");
            if op == "=" {
                assert!(range_on.is_none(), "{name}: equality after a range");
                assert_eq!(
                    table.clustering.get(position),
                    Some(c),
                    "{name}: clustering column {c} skips a prefix"
                );
                position += 1;
            } else {
                match &range_on {
                    None => {
                        assert_eq!(
                            table.clustering.get(position),
                            Some(c),
                            "{name}: range on {c} is not the next clustering column"
                        );
                        range_on = Some(c.clone());
                    }
                    Some(r) => assert_eq!(r, c, "{name}: ranges on two columns"),
                }
            }
        }
        binds
    }

    fn check_statement(
        name: &str,
        cql: &str,
        tables: &HashMap<String, Table>,
    ) -> (Vec<String>, Option<Vec<String>>) {
        assert!(!cql.contains("ALLOW FILTERING"), "{name}");
        assert!(!cql.contains(" IN "), "{name}: IN");
        assert!(!cql.contains(" IF "), "{name}: lightweight transaction");
        assert!(!cql.contains(';'), "{name}");
        let table_of = |t: &str| {
            tables
                .get(t)
                .unwrap_or_else(|| panic!("{name}: no table {t}"))
        };
        if let Some(rest) = cql.strip_prefix("SELECT ") {
            let (cols, rest) = rest.split_once(" FROM ").expect("FROM");
            let (table, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            let table = table_of(table);
            let columns = split_list(cols)
                .iter()
                .map(|c| match c.strip_prefix("WRITETIME(") {
                    Some(inner) => {
                        column_type(table, inner.trim_end_matches(')'));
                        "bigint".to_owned()
                    }
                    None => column_type(table, c).to_owned(),
                })
                .collect();
            let mut binds = Vec::new();
            let mut rest = rest.trim();
            let mut limit = false;
            if let Some(r) = rest.strip_suffix(" LIMIT ?") {
                rest = r;
                limit = true;
            }
            let mut ordered = false;
            if let Some((r, order)) = rest.split_once(" ORDER BY ") {
                let (col, _dir) = order.split_once(' ').expect("direction");
                assert_eq!(
                    Some(&col.to_owned()),
                    table.clustering.first(),
                    "{name}: ORDER BY the first clustering column"
                );
                rest = r;
                ordered = true;
            }
            if let Some(clause) = rest.strip_prefix("WHERE ") {
                binds = check_where(name, table, clause);
            } else {
                assert!(rest.is_empty(), "{name}: {rest:?}");
                assert!(!ordered, "{name}: ORDER BY in a full scan");
            }
            if limit {
                binds.push("int".to_owned());
            }
            (binds, Some(columns))
        } else if let Some(rest) = cql.strip_prefix("INSERT INTO ") {
            let (table, rest) = rest.split_once(" (").expect("columns");
            let table = table_of(table);
            let (cols, rest) = rest.split_once(") VALUES (").expect("VALUES");
            let (values, using) = rest.split_once(')').expect("values end");
            let cols = split_list(cols);
            assert_eq!(values.matches('?').count(), cols.len(), "{name}");
            for key in table.partition_key.iter().chain(&table.clustering) {
                assert!(cols.contains(key), "{name}: key column {key} missing");
            }
            let mut binds: Vec<String> = cols
                .iter()
                .map(|c| column_type(table, c).to_owned())
                .collect();
            match using.trim() {
                "USING TIMESTAMP ?" => binds.push("bigint".into()),
                "USING TTL ? AND TIMESTAMP ?" => {
                    binds.push("int".into());
                    binds.push("bigint".into());
                }
                other => panic!("{name}: every write states its timestamp, not {other:?}"),
            }
            (binds, None)
        } else if let Some(rest) = cql.strip_prefix("UPDATE ") {
            let (table, rest) = rest.split_once(" USING TIMESTAMP ? SET ").expect(name);
            let table = table_of(table);
            let (sets, clause) = rest.split_once(" WHERE ").expect("WHERE");
            let mut binds = vec!["bigint".to_owned()];
            for set in split_list(sets) {
                let (col, value) = set.split_once(" = ").expect("SET col = ?");
                assert_eq!(value, "?");
                assert!(
                    !table.partition_key.iter().any(|k| k == col)
                        && !table.clustering.iter().any(|k| k == col),
                    "{name}: SET of a key column"
                );
                binds.push(column_type(table, col).to_owned());
            }
            let where_binds = check_where(name, table, clause);
            // An UPDATE names one row: the whole primary key by equality.
            assert_eq!(
                where_binds.len(),
                table.partition_key.len() + table.clustering.len(),
                "{name}: UPDATE of one whole row"
            );
            binds.extend(where_binds);
            (binds, None)
        } else if let Some(rest) = cql.strip_prefix("DELETE FROM ") {
            let (table, clause) = rest
                .split_once(" USING TIMESTAMP ? WHERE ")
                .unwrap_or_else(|| panic!("{name}: every write states its timestamp"));
            let table = table_of(table);
            let mut binds = vec!["bigint".to_owned()];
            binds.extend(check_where(name, table, clause));
            (binds, None)
        } else {
            panic!("{name}: unknown statement {cql}");
        }
    }

    #[test]
    fn every_statement_fits_the_schema() {
        let tables = tables();
        let shapes = shapes();
        assert!(shapes.len() > 40);
        for shape in shapes {
            let (binds, columns) = check_statement(shape.name, shape.cql, &tables);
            assert_eq!(
                binds, shape.binds,
                "{}: marker types of {}",
                shape.name, shape.cql
            );
            assert_eq!(
                columns,
                shape
                    .columns
                    .map(|c| c.into_iter().map(str::to_owned).collect()),
                "{}: column types of {}",
                shape.name,
                shape.cql
            );
        }
    }

    #[test]
    fn the_checker_catches_mistakes() {
        let tables = tables();
        let bad = [
            // Part of the partition key.
            "SELECT body FROM messages WHERE tenant = ? AND conversation_id = ?",
            // A range on a clustering column that is not the next one.
            "SELECT seq FROM inbox WHERE tenant = ? AND user_id = ? AND device_id = ? AND seq > ?",
            // A column that does not exist.
            "SELECT nope FROM messages WHERE tenant = ? AND conversation_id = ? AND day = ?",
            // A write without its timestamp.
            "DELETE FROM members WHERE tenant = ? AND conversation_id = ? AND user_id = ?",
            // Filtering.
            "SELECT body FROM messages WHERE tenant = ? AND conversation_id = ? AND day = ? ALLOW FILTERING",
        ];
        for cql in bad {
            let caught = std::panic::catch_unwind(|| check_statement("bad", cql, &tables));
            assert!(caught.is_err(), "{cql}");
        }
    }
}
