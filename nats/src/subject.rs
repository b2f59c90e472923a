//! The subjects of the message path, built here: ingest, gateway and
//! conversation events, the session registry's sync, the store service. The push pipeline's live in
//! `push_jobs.rs`, the parked commands' here too (`parked`); streams and
//! buckets name theirs in `definitions.rs`.
//!
//! | subject | kind | carries |
//! |---|---|---|
//! | `sb.in.<partition>.<tenant>.<conversation>` | JetStream `SB_INGEST` | commands to the conversation's writer |
//! | `sb.in.<partition>.batch` | JetStream `SB_INGEST` | several sends for the partition's writer, one per line |
//! | `sb.gw.<gateway>` | core | events for users connected to one gateway, several to a message |
//! | `sb.sessions.sync` | core, request/replies | every router confirms it routes by a registry revision |
//! | `sb.conv.<tenant>.<conversation>` | core | messages of a conversation that fans out on read |
//! | `sb.store.read`, `.marks`, `.write` | core, request/reply (NATS micro service `switchboard-store`) | the store service: reads, a gateway's writes of its users' marks and devices, and the writers' commits |
//! | `sb.plugins.status.<tenant>.<hook>` | core, request/replies | how each process runs a tenant's plugin (`switchboard-plugin-host`'s registry) |
//!
//! Ids may contain `.`, the subject separator, so they are escaped as
//! `%2E` when they become a token. `%` is not an id character, so the
//! escape is unambiguous, and no id character is a wildcard.

use switchboard_protocol::{ConversationId, TenantId};

pub const INGEST_PREFIX: &str = "sb.in";
/// The store service's endpoints, one per kind of caller, so that the
/// backbone's permissions can give each to the roles that may use it.
pub const STORE_READ: &str = "sb.store.read";
/// The store service's one subject before it had endpoints: reads and
/// marks only, for gateways of the earlier release during an upgrade.
pub const STORE_LEGACY: &str = "sb.store";
pub const STORE_MARKS: &str = "sb.store.marks";
pub const STORE_WRITE: &str = "sb.store.write";
/// Asks every process that routes events whether its view of the session
/// registry has applied a revision (`sessions.rs`).
pub const SESSIONS_SYNC: &str = "sb.sessions.sync";
/// Queue group of the store service, so a restarted owner never answers twice.
pub const STORE_QUEUE_GROUP: &str = "store";

/// Escapes an id into one subject token.
pub fn token(id: &str) -> std::borrow::Cow<'_, str> {
    if id.contains('.') {
        std::borrow::Cow::Owned(id.replace('.', "%2E"))
    } else {
        std::borrow::Cow::Borrowed(id)
    }
}

/// The partition that owns a conversation: FNV-1a over tenant and
/// conversation, mixed by a 64-bit finalizer, modulo the partition count.
/// Stable across processes, versions and machines (unlike std's randomly
/// keyed hasher), because every gateway must route a conversation to the
/// same partition. The finalizer matters: FNV-1a's low bits depend only
/// on the inputs' low bits (the lowest is the parity of the odd bytes), so
/// ids that repeat a part, as `dm:<a>:<b>` ids do, would crowd into a few
/// partitions of an even count.
pub fn partition_of(tenant: &TenantId, conversation: &ConversationId, partitions: u16) -> u16 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let bytes = tenant
        .as_str()
        .bytes()
        .chain(std::iter::once(0xff))
        .chain(conversation.as_str().bytes());
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(PRIME);
    }
    // MurmurHash3's fmix64: every output bit depends on every input bit.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h % u64::from(partitions.max(1))) as u16
}

/// Where a command for this conversation is published.
pub fn ingest(partition: u16, tenant: &TenantId, conversation: &ConversationId) -> String {
    format!(
        "{INGEST_PREFIX}.{partition}.{}.{}",
        token(tenant.as_str()),
        token(conversation.as_str())
    )
}

/// Where a gateway publishes several sends for one partition together
/// (header `Sb-Commands`). One token shorter than any command's own
/// subject, so the two never meet.
pub fn ingest_batch(partition: u16) -> String {
    format!("{INGEST_PREFIX}.{partition}.batch")
}

/// Where a command that could not be applied is set aside: its ingest
/// subject under `sb.parked` instead of `sb.in` (`SB_PARKED`).
pub fn parked(ingest_subject: &str) -> String {
    let rest = ingest_subject
        .strip_prefix(INGEST_PREFIX)
        .and_then(|r| r.strip_prefix('.'))
        .unwrap_or(ingest_subject);
    format!("sb.parked.{rest}")
}

/// The filter of a partition's writer consumer.
pub fn ingest_partition_filter(partition: u16) -> String {
    format!("{INGEST_PREFIX}.{partition}.>")
}

/// Live messages of a conversation that fans out on read, for every gateway
/// with a connected member.
pub fn conversation_events(tenant: &TenantId, conversation: &ConversationId) -> String {
    format!(
        "sb.conv.{}.{}",
        token(tenant.as_str()),
        token(conversation.as_str())
    )
}

/// Events for the users connected to one gateway.
pub fn gateway_events(gateway: &str) -> String {
    format!("sb.gw.{}", token(gateway))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> TenantId {
        TenantId::new(s).unwrap()
    }
    fn c(s: &str) -> ConversationId {
        ConversationId::new(s).unwrap()
    }

    #[test]
    fn dots_in_ids_do_not_split_tokens() {
        assert_eq!(
            ingest(3, &t("acme.eu"), &c("a.b")),
            "sb.in.3.acme%2Eeu.a%2Eb"
        );
        assert_eq!(
            conversation_events(&t("acme"), &c("j.doe@x")),
            "sb.conv.acme.j%2Edoe@x"
        );
        assert_eq!(gateway_events("gw.1"), "sb.gw.gw%2E1");
        // Distinct ids stay distinct subjects.
        assert_ne!(ingest(0, &t("a.b"), &c("c")), ingest(0, &t("a"), &c("b.c")));
    }

    #[test]
    fn partitions_are_stable_and_spread() {
        // Pinned values: changing the hash sends conversations to other
        // writers, so an upgrade that changes it must drain the ingest
        // streams first (it last changed with the per-partition streams,
        // whose upgrade drains them anyway; nats/README.md).
        assert_eq!(partition_of(&t("demo"), &c("general"), 16), 1);
        assert_eq!(partition_of(&t("demo"), &c("general"), 64), 17);
        let mut counts = [0u32; 16];
        for i in 0..16_000 {
            counts[usize::from(partition_of(&t("demo"), &c(&format!("c{i}")), 16))] += 1;
        }
        for n in counts {
            assert!((800..1200).contains(&n), "{counts:?}");
        }
        // Direct conversations repeat their users' ids: still spread, over
        // an even count too.
        for partitions in [6u16, 16] {
            let mut counts = vec![0u32; usize::from(partitions)];
            for i in 0..1600 {
                let dm = c(&format!("dm:u{i}a:u{i}b"));
                counts[usize::from(partition_of(&t("acme"), &dm, partitions))] += 1;
            }
            let fair = 1600 / u32::from(partitions);
            for n in &counts {
                assert!(
                    (fair * 7 / 10..fair * 13 / 10).contains(n),
                    "{partitions}: {counts:?}"
                );
            }
        }
        // The tenant is part of the key.
        let differs = (0..100).any(|i| {
            let conv = c(&format!("c{i}"));
            partition_of(&t("a"), &conv, 16) != partition_of(&t("b"), &conv, 16)
        });
        assert!(differs);
    }
}
