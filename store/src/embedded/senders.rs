//! The per-sender index over fjall (`sent_by`): what one user sent in a
//! conversation, newest first, found without reading anyone else's
//! messages. Commits write it beside the idempotency key; archiving keeps
//! it; the user's erasure removes it.
//!
//! A store made before the index gets it once, at open, from the
//! messages it holds live. Buckets archived by then are no longer here to
//! read: they are listed in `unindexed_buckets`, and `Tiered` reads them
//! whole when it looks for a sender's messages.

use fjall::{Database, Readable};
use switchboard_protocol::{Message, UserId};

use super::codec::{decode, storage};
use super::keys::{BACKFILL_BATCH, Key, Spaces, str_part, trailing_u64};
use super::read::message;
use super::rows::BucketRow;
use crate::{ConversationKey, SentBy, StoreResult};

pub(super) fn sent_by<R: Readable>(
    r: &R,
    s: &Spaces,
    key: &ConversationKey,
    sender: &UserId,
    before_seq: Option<u64>,
    limit: usize,
) -> StoreResult<Vec<SentBy>> {
    let (t, c) = (key.tenant.as_str(), key.conversation_id.as_str());
    let of = || Key::new().s(t).s(sender.as_str()).s(c);
    let range = of().bytes()..of().n(before_seq.unwrap_or(u64::MAX)).bytes();
    let mut out = Vec::new();
    for g in r.range(&s.sent_by, range).rev().take(limit) {
        let (k, _) = g.into_inner().map_err(storage)?;
        let seq = trailing_u64(&k)?;
        out.push(SentBy {
            seq,
            message: message(r, s, t, c, seq)?,
        });
    }
    Ok(out)
}

/// Fills the index of a store made before it, once (a `meta` flag says it
/// ran): a row per live message, and archived buckets marked.
pub(super) fn index_past_senders(db: &Database, s: &Spaces) -> StoreResult<()> {
    const DONE: &str = "senders_indexed";
    if s.meta.contains_key(DONE).map_err(storage)? {
        return Ok(());
    }
    let snap = db.snapshot();
    let mut batch = db.batch();
    for g in snap.iter(&s.messages) {
        let (k, v) = g.into_inner().map_err(storage)?;
        let m: Message = decode(&v)?;
        let (t, c) = (str_part(&k, 0)?, str_part(&k, 1)?);
        let row = Key::new().s(t).s(m.sender_id.as_str()).s(c).n(m.seq);
        batch.insert(&s.sent_by, row.bytes(), []);
        if batch.len() >= BACKFILL_BATCH {
            batch.commit().map_err(storage)?;
            batch = db.batch();
        }
    }
    for g in snap.iter(&s.buckets) {
        let (k, v) = g.into_inner().map_err(storage)?;
        if BucketRow::decode(&v)?.archived.is_some() {
            batch.insert(&s.unindexed_buckets, k.to_vec(), []);
        }
    }
    batch.insert(&s.meta, DONE, []);
    batch.commit().map_err(storage)?;
    db.persist(fjall::PersistMode::SyncAll).map_err(storage)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use fjall::Readable;
    use switchboard_protocol::{ConversationKind, Timestamp};

    use super::super::tests::reopen;
    use super::super::{EmbeddedConfig, EmbeddedStore};
    use crate::archive::{MemoryObjects, Tiered, archive_bucket};
    use crate::conformance::{create, key, text_message, user};
    use crate::{BucketKey, Mutation, Store};

    /// A store from before the index gets it at open: its live messages
    /// from their rows, an archived bucket read whole through the tier.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_from_before_the_index_gets_it_at_open() {
        const DAY: u32 = 19_000;
        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        let objects = Arc::new(MemoryObjects::default());
        let day_ms = |day: u32| i64::from(day) * 86_400_000;
        let messages = (1..=6)
            .map(|seq| {
                let who = if seq % 2 == 1 { "a" } else { "b" };
                let mut m = text_message("c", seq, who, "p", &format!("m{seq}"));
                // Two on each of three days.
                let day = DAY + u32::try_from((seq - 1) / 2).unwrap();
                m.created_at = Timestamp::from_unix_ms(day_ms(day) + i64::try_from(seq).unwrap());
                m
            })
            .collect();
        {
            let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&config).unwrap());
            store
                .commit(vec![create(
                    "t",
                    "c",
                    ConversationKind::Group,
                    &["a", "b"],
                    day_ms(DAY),
                )])
                .await
                .unwrap();
            store
                .commit(vec![Mutation::Append {
                    key: key("t", "c"),
                    expected_last_seq: 0,
                    messages,
                    inbox: false,
                }])
                .await
                .unwrap();
            let tiered = Tiered::new(store.clone(), objects.clone());
            let bucket = BucketKey {
                tenant: key("t", "c").tenant,
                conversation_id: key("t", "c").conversation_id,
                day: DAY,
            };
            archive_bucket(&tiered, objects.as_ref(), &bucket)
                .await
                .unwrap();
        }
        {
            // As an older release left it: no index, no flag.
            let store = reopen(&config).await;
            let snap = store.db.snapshot();
            for space in [&store.spaces.sent_by, &store.spaces.unindexed_buckets] {
                for g in snap.iter(space) {
                    let (k, _) = g.into_inner().unwrap();
                    space.remove(k).unwrap();
                }
            }
            store.spaces.meta.remove("senders_indexed").unwrap();
            let rows = crate::Reads::sent_by(&store, &key("t", "c"), &user("a"), None, 10).await;
            assert!(rows.unwrap().is_empty());
        }
        let store: Arc<dyn Store> = Arc::new(reopen(&config).await);
        // The backend lists a's live ones: seq 1 went to the archive (its
        // bucket's newest, seq 2, stays live by the archiver's rule).
        let live = store
            .sent_by(&key("t", "c"), &user("a"), None, 10)
            .await
            .unwrap();
        assert_eq!(live.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![5, 3]);
        let buckets = store
            .archived_buckets(&key("t", "c"), 0, u64::MAX)
            .await
            .unwrap();
        assert_eq!(buckets.len(), 1);
        assert!(!buckets[0].senders_indexed);
        // Through the tier: the archived one too, and paged by seq.
        let tiered: Arc<dyn Store> = Arc::new(Tiered::new(store.clone(), objects.clone()));
        let all = tiered
            .sent_by(&key("t", "c"), &user("a"), None, 10)
            .await
            .unwrap();
        let seqs: Vec<u64> = all.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![5, 3, 1]);
        assert!(
            all.iter()
                .all(|r| r.message.as_ref().is_some_and(|m| m.seq == r.seq))
        );
        let page = tiered
            .sent_by(&key("t", "c"), &user("a"), Some(5), 1)
            .await
            .unwrap();
        assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![3]);
        let page = tiered
            .sent_by(&key("t", "c"), &user("a"), Some(3), 1)
            .await
            .unwrap();
        assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1]);
        let b = tiered
            .sent_by(&key("t", "c"), &user("b"), None, 10)
            .await
            .unwrap();
        assert_eq!(b.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![6, 4, 2]);
    }
}
