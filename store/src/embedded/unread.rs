//! Unread counts over fjall (issue 43): the `counted` index read after a
//! member's read mark (`rules::unread` writes it), and filled once from
//! the messages a store of an earlier layout holds.

use std::collections::HashSet;

use fjall::{Database, Readable};
use switchboard_protocol::Message;

use super::codec::{decode, storage};
use super::keys::{BACKFILL_BATCH, Key, Spaces};
use crate::{MAX_UNREAD_COUNTED, StoreResult};

/// Rows of the `counted` index looked at for one unread count at most:
/// the reader's own messages and those of users they block are passed
/// over, so a count may look past [`MAX_UNREAD_COUNTED`] rows.
const MAX_LOOKED_AT: usize = 4 * MAX_UNREAD_COUNTED as usize;

/// What `u` would call unread in conversation `c` after `read`: counted
/// messages from others, not from one of `blocked`.
pub(super) fn unread_count<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    u: &str,
    c: &str,
    read: u64,
    blocked: &HashSet<String>,
) -> StoreResult<u64> {
    let prefix = Key::new().s(t).s(c).bytes();
    super::extras::count_after_where(r, &s.counted, prefix, read, MAX_LOOKED_AT, |sender| {
        let sender = std::str::from_utf8(sender).unwrap_or_default();
        sender != u && !blocked.contains(sender)
    })
}

/// The users `u` blocks, as a set of ids: read once for a page of counts.
pub(super) fn blocked_set<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    u: &str,
) -> StoreResult<HashSet<String>> {
    Ok(super::safety::blocks(r, s, t, u)?
        .into_iter()
        .map(|b| b.user_id.as_str().to_owned())
        .collect())
}

/// Fills `counted` from the live messages, once: a store of an earlier
/// layout never wrote it, and its unread messages would otherwise stop
/// counting at the upgrade. A message's row has the message's own key
/// (tenant, conversation, seq). Archived messages are not read (they are
/// days old; one unread since then no longer counts).
pub(super) fn count_past_messages(db: &Database, s: &Spaces) -> StoreResult<()> {
    const DONE: &str = "unread_counted";
    if s.meta.contains_key(DONE).map_err(storage)? {
        return Ok(());
    }
    let snap = db.snapshot();
    let mut batch = db.batch();
    let mut rows = 0usize;
    for g in snap.iter(&s.messages) {
        let (k, v) = g.into_inner().map_err(storage)?;
        let m: Message = decode(&v)?;
        if crate::rules::unread::counts(&m) {
            batch.insert(&s.counted, k.to_vec(), m.sender_id.as_str().as_bytes());
            rows += 1;
        }
        if batch.len() >= BACKFILL_BATCH {
            batch.commit().map_err(storage)?;
            batch = db.batch();
        }
    }
    batch.insert(&s.meta, DONE, []);
    batch.commit().map_err(storage)?;
    db.persist(fjall::PersistMode::SyncAll).map_err(storage)?;
    if rows > 0 {
        tracing::info!(rows, "unread counts filled from the stored messages");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use fjall::Readable;
    use switchboard_protocol::ConversationKind;

    use super::super::tests::reopen;
    use super::super::{EmbeddedConfig, EmbeddedStore};
    use crate::conformance::{conv, create, key, tenant, text_message, user};
    use crate::{MAX_UNREAD_COUNTED, Mutation, Reads, Store};

    /// A store from before the index gets it at open: the messages unread
    /// then still count, a system message does not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_from_before_the_index_counts_its_unread_messages() {
        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        let unread = |store: &EmbeddedStore| {
            let (snap, s) = (store.db.snapshot(), store.spaces.clone());
            super::unread_count(&snap, &s, "t", "bob", "c", 0, &Default::default()).unwrap()
        };
        {
            let store = EmbeddedStore::open(&config).unwrap();
            let mut messages: Vec<_> = (1..=3)
                .map(|seq| text_message("c", seq, "ann", "p", &format!("m{seq}")))
                .collect();
            messages[2].content = Some(
                serde_json::from_value(serde_json::json!({
                    "kind": "system", "event": "members_added", "actor": "ann", "user_ids": ["bob"]
                }))
                .unwrap(),
            );
            store
                .commit(vec![
                    create("t", "c", ConversationKind::Group, &["ann", "bob"], 1),
                    Mutation::Append {
                        key: key("t", "c"),
                        expected_last_seq: 0,
                        messages,
                        inbox: false,
                    },
                ])
                .await
                .unwrap();
            assert_eq!(unread(&store), 2);
        }
        {
            // As an older release left it: no index, no flag.
            let store = reopen(&config).await;
            let snap = store.db.snapshot();
            for g in snap.iter(&store.spaces.counted) {
                let (k, _) = g.into_inner().unwrap();
                store.spaces.counted.remove(k).unwrap();
            }
            store.spaces.meta.remove("unread_counted").unwrap();
            assert_eq!(unread(&store), 0);
        }
        let store = Arc::new(reopen(&config).await);
        assert_eq!(unread(&store), 2);
        let detail = store
            .conversation(&tenant("t"), &conv("c"), &user("bob"))
            .await
            .unwrap();
        assert_eq!(detail.reader_unread_count, 2);
    }

    /// 999 unread count as 999, one more still as 999 (the limits table);
    /// read past one of them, 999 are left.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn counts_stop_at_999() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(&EmbeddedConfig::in_dir(dir.path())).unwrap();
        let send = |from: u64, to: u64| Mutation::Append {
            key: key("t", "c"),
            expected_last_seq: from - 1,
            messages: (from..=to)
                .map(|seq| text_message("c", seq, "ann", "p", &format!("m{seq}")))
                .collect(),
            inbox: false,
        };
        store
            .commit(vec![
                create("t", "c", ConversationKind::Group, &["ann", "bob"], 1),
                send(1, MAX_UNREAD_COUNTED),
            ])
            .await
            .unwrap();
        let unread = |read: u64| {
            let snap = store.db.snapshot();
            super::unread_count(
                &snap,
                &store.spaces,
                "t",
                "bob",
                "c",
                read,
                &Default::default(),
            )
            .unwrap()
        };
        assert_eq!(unread(0), 999);
        store
            .commit(vec![send(MAX_UNREAD_COUNTED + 1, MAX_UNREAD_COUNTED + 1)])
            .await
            .unwrap();
        assert_eq!(unread(0), 999);
        assert_eq!(unread(1), 999);
        assert_eq!(unread(2), 998);
    }
}
