//! Keyspaces and the byte layout of keys and fixed-size values.
//!
//! Keys are tuples that start with the partition the Scylla schema would
//! use (tenant and conversation, or tenant, user and device), encoded so
//! that byte order is tuple order: a string is its bytes and a 0x00
//! terminator (no id or `client_msg_id` contains 0x00), an integer is
//! big-endian. A prefix scan on the encoded leading parts reads one
//! partition.

use fjall::{Database, Keyspace, KeyspaceCreateOptions};

use super::codec::storage;
use crate::{StoreError, StoreResult};

/// The layout's version. 2 added the keyspaces of v1.1 (member states,
/// reactions, pins, threads, mentions), 3 those of v1.2 (policies, bans,
/// blocks, reports, expiries), 4 `joined` (erasure), filled from the
/// current memberships as it opens (`erasure::record_joined`), 5
/// `profiles` (v1.3), 6 `counted` (unread counts), 7 `directory`,
/// `invites` and `invite_codes` (v1.3 open channels), 8 `uncounted` in
/// place of `counted` (filled as it opens, `unread::fill_uncounted`); an
/// older store becomes version 8 as it opens, since the others start
/// empty (`check_schema`).
pub(super) const SCHEMA_VERSION: &[u8] = b"8";

/// The versions a store of this release upgrades as it opens.
pub(super) const UPGRADABLE_VERSIONS: &[&[u8]] = &[b"1", b"2", b"3", b"4", b"5", b"6", b"7"];

/// Rows written per batch while an index of a new layout is filled from
/// older rows as the store opens.
pub(super) const BACKFILL_BATCH: usize = 10_000;

/// Every keyspace of the store.
pub(super) struct Spaces {
    /// tenant, conversation → `ConversationMeta` JSON (what rarely changes).
    pub conversations: Keyspace,
    /// tenant, conversation, user → joined (i64 Unix ms). Written only by
    /// membership changes, so scanning a conversation's members stays cheap.
    pub members: Keyspace,
    /// tenant, conversation, user → delivered seq, read seq. Rewritten by
    /// sends and acks (an LSM keeps every version until it flushes, so these
    /// hot rows live apart from the rows that get scanned).
    pub member_marks: Keyspace,
    /// tenant, user, conversation → (): a user's conversations.
    pub user_conversations: Keyspace,
    /// tenant, user, conversation → (): every conversation the user ever
    /// joined, kept when they leave: what an erasure visits (v1.2).
    pub joined: Keyspace,
    /// tenant, conversation, user → (): members who have sent there.
    pub speakers: Keyspace,
    /// tenant, user, conversation, at (i64 Unix ms) → the actor: the
    /// user's unsolicited adds of the last day.
    pub unsolicited: Keyspace,
    /// tenant, conversation, seq → `Message` JSON.
    pub messages: Keyspace,
    /// tenant, conversation, sender, client_msg_id → seq: idempotency keys.
    pub sent: Keyspace,
    /// tenant, conversation, message id (u64) → seq.
    pub message_index: Keyspace,
    /// tenant, sender, conversation, seq → (): the messages each user
    /// sent, kept when their bucket is archived (the export reads them).
    pub sent_by: Keyspace,
    /// tenant, conversation, UTC day (u32) → (): buckets archived before
    /// `sent_by` existed, whose messages it lacks.
    pub unindexed_buckets: Keyspace,
    /// tenant, conversation, seq, version (u64) → `MessageVersion` JSON: the
    /// versions of edited messages.
    pub versions: Keyspace,
    /// tenant, user, device, conversation, seq → (): undelivered messages.
    pub inbox: Keyspace,
    /// tenant, user, device → first seen (i64 Unix ms).
    pub devices: Keyspace,
    /// tenant, blob_ref, conversation, seq → (): the messages that
    /// reference an uploaded blob (members of their conversations may
    /// download it; the collector keeps it while there is one). Rows
    /// written before issue 26 have no seq: they keep their blob for good.
    pub media_refs: Keyspace,
    /// tenant, user, device, conversation → the device's delivered seq.
    pub device_cursors: Keyspace,
    /// tenant, conversation, UTC day (u32) → first seq; once archived also
    /// the last seq and the archive object (`rows::BucketRow`).
    pub buckets: Keyspace,
    /// tenant, conversation, user → `MemberState` JSON: a given role and
    /// the member's own settings (v1.1); no row for the default.
    pub member_states: Keyspace,
    /// tenant, conversation, seq, user, emoji → when (i64 Unix ms): who
    /// reacted with what (v1.1). The counts live on the message.
    pub reactions: Keyspace,
    /// tenant, conversation, message id (u64) → `PinRow` JSON (v1.1).
    pub pins: Keyspace,
    /// tenant, conversation, root seq, seq → (): a thread's replies (v1.1).
    pub thread_replies: Keyspace,
    /// tenant, user, conversation, root seq → the user's read mark in the
    /// thread: the threads a user took part in (v1.1).
    pub thread_marks: Keyspace,
    /// tenant, user, conversation, seq → (): messages that mention the
    /// user, or all (v1.1).
    pub mentions: Keyspace,
    /// tenant, conversation → `ConversationPolicy` JSON (v1.2); no row
    /// for the default.
    pub policies: Keyspace,
    /// tenant, conversation, user → `Ban` JSON (v1.2).
    pub bans: Keyspace,
    /// tenant, user, blocked user → since (i64 Unix ms) (v1.2).
    pub blocks: Keyspace,
    /// tenant, report id (u64) → `Report` JSON (v1.2).
    pub reports: Keyspace,
    /// tenant, user → `Profile` JSON (v1.3); no row for a user who never
    /// set one.
    pub profiles: Keyspace,
    /// tenant, conversation, seq → (): the messages that do not count
    /// toward unread counts (`rules::unread`).
    pub uncounted: Keyspace,
    /// tenant, conversation → `Listing` JSON: the tenant's public
    /// channels (v1.3).
    pub directory: Keyspace,
    /// tenant, conversation, code → `Invite` JSON (v1.3).
    pub invites: Keyspace,
    /// tenant, code → conversation: finds an invite by its code (v1.3).
    pub invite_codes: Keyspace,
    /// tenant, report id (u64) → (): the open reports.
    pub open_reports: Keyspace,
    /// tenant, conversation, expires at (u64 Unix ms), seq → (): the
    /// messages with an `expires_at` (v1.2).
    pub expiries: Keyspace,
    /// Store-wide facts such as the schema version.
    pub meta: Keyspace,
}

impl Spaces {
    pub fn open(db: &Database) -> StoreResult<Self> {
        let open = |name: &str| {
            db.keyspace(name, KeyspaceCreateOptions::default)
                .map_err(storage)
        };
        Ok(Self {
            conversations: open("conversations")?,
            members: open("members")?,
            member_marks: open("member_marks")?,
            user_conversations: open("user_conversations")?,
            joined: open("joined")?,
            speakers: open("speakers")?,
            unsolicited: open("unsolicited")?,
            messages: open("messages")?,
            sent: open("sent")?,
            message_index: open("message_index")?,
            sent_by: open("sent_by")?,
            unindexed_buckets: open("unindexed_buckets")?,
            versions: open("versions")?,
            inbox: open("inbox")?,
            devices: open("devices")?,
            media_refs: open("media_refs")?,
            device_cursors: open("device_cursors")?,
            buckets: open("buckets")?,
            member_states: open("member_states")?,
            reactions: open("reactions")?,
            pins: open("pins")?,
            thread_replies: open("thread_replies")?,
            thread_marks: open("thread_marks")?,
            mentions: open("mentions")?,
            policies: open("policies")?,
            bans: open("bans")?,
            blocks: open("blocks")?,
            reports: open("reports")?,
            profiles: open("profiles")?,
            uncounted: open("uncounted")?,
            directory: open("directory")?,
            invites: open("invites")?,
            invite_codes: open("invite_codes")?,
            open_reports: open("open_reports")?,
            expiries: open("expiries")?,
            meta: open("meta")?,
        })
    }
}

/// Records the schema version in a new store and refuses an unknown one.
pub(super) fn check_schema(db: &fjall::Database, spaces: &Spaces) -> StoreResult<()> {
    match spaces.meta.get("schema_version").map_err(storage)? {
        Some(v) if v.as_ref() == SCHEMA_VERSION => Ok(()),
        // Every layout change so far added keyspaces, which start empty:
        // the upgrade is the new version number.
        Some(v) if UPGRADABLE_VERSIONS.contains(&v.as_ref()) => {
            tracing::info!(
                from = %String::from_utf8_lossy(&v),
                to = %String::from_utf8_lossy(SCHEMA_VERSION),
                "upgrading the embedded store's layout"
            );
            spaces
                .meta
                .insert("schema_version", SCHEMA_VERSION)
                .map_err(storage)?;
            db.persist(fjall::PersistMode::SyncAll).map_err(storage)
        }
        Some(v) => Err(StoreError::Corrupt(format!(
            "store schema version {} is not {}",
            String::from_utf8_lossy(&v),
            String::from_utf8_lossy(SCHEMA_VERSION)
        ))),
        None => {
            spaces
                .meta
                .insert("schema_version", SCHEMA_VERSION)
                .map_err(storage)?;
            db.persist(fjall::PersistMode::SyncAll).map_err(storage)
        }
    }
}

/// Builds an encoded key.
#[derive(Default, Clone)]
pub(super) struct Key(Vec<u8>);

impl Key {
    pub fn new() -> Self {
        Self(Vec::with_capacity(64))
    }

    /// A string part.
    pub fn s(mut self, part: &str) -> Self {
        self.0.extend_from_slice(part.as_bytes());
        self.0.push(0);
        self
    }

    /// An integer part.
    pub fn n(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn day(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bytes(self) -> Vec<u8> {
        self.0
    }
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("malformed {what}"))
}

/// The `i`th string part of an encoded key.
pub(super) fn str_part(key: &[u8], i: usize) -> StoreResult<&str> {
    let part = key
        .split(|b| *b == 0)
        .nth(i)
        .ok_or_else(|| corrupt("key"))?;
    std::str::from_utf8(part).map_err(|_| corrupt("key"))
}

/// The string part right after `prefix` (which must end where a part
/// does): for keys whose earlier parts hold integers, whose bytes may be
/// 0 and so cannot be split on.
pub(super) fn str_after<'a>(key: &'a [u8], prefix: &[u8]) -> StoreResult<&'a str> {
    let rest = key.strip_prefix(prefix).ok_or_else(|| corrupt("key"))?;
    let end = rest
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| corrupt("key"))?;
    std::str::from_utf8(&rest[..end]).map_err(|_| corrupt("key"))
}

/// The integer that ends an encoded key.
pub(super) fn trailing_u64(key: &[u8]) -> StoreResult<u64> {
    let start = key.len().checked_sub(8).ok_or_else(|| corrupt("key"))?;
    let bytes: [u8; 8] = key[start..].try_into().map_err(|_| corrupt("key"))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The day that ends a `buckets` key.
pub(super) fn trailing_day(key: &[u8]) -> StoreResult<u32> {
    let start = key.len().checked_sub(4).ok_or_else(|| corrupt("key"))?;
    let bytes: [u8; 4] = key[start..].try_into().map_err(|_| corrupt("key"))?;
    Ok(u32::from_be_bytes(bytes))
}

/// Fixed-size values: big-endian 64-bit words.
pub(super) fn words<const N: usize>(values: [u64; N]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

pub(super) fn read_words<const N: usize>(bytes: &[u8]) -> StoreResult<[u64; N]> {
    if bytes.len() != N * 8 {
        return Err(corrupt("value"));
    }
    let mut out = [0u64; N];
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        out[i] = u64::from_be_bytes(b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_is_tuple_order() {
        let k = |a: &str, n: u64| Key::new().s(a).n(n).bytes();
        assert!(k("ab", 9) < k("abc", 1), "a shorter string sorts first");
        assert!(k("a", 1) < k("a", 2));
        assert!(k("a", 255) < k("a", 256), "integers are big-endian");
        let key = Key::new().s("t").s("conv").n(42).bytes();
        assert_eq!(str_part(&key, 1).unwrap(), "conv");
        assert_eq!(trailing_u64(&key).unwrap(), 42);
        assert_eq!(
            read_words::<2>(&words([1, u64::MAX])).unwrap(),
            [1, u64::MAX]
        );
        assert!(read_words::<2>(&[0; 3]).is_err());
    }
}
