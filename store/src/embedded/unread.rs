//! Unread counts over fjall (issue 43): the `uncounted` index and each
//! sender's `sent_by` rows read after a member's read mark, counted by
//! `rules::unread::unread`; the index filled once from the messages a
//! store of an earlier layout holds.

use std::collections::HashSet;

use fjall::{Database, Readable};
use switchboard_protocol::Message;

use super::codec::{decode, storage};
use super::keys::{BACKFILL_BATCH, Key, Spaces, trailing_u64};
use crate::StoreResult;
use crate::rules::unread::{LOOKED_AT, unread};

/// What `u` would call unread in conversation `c`, whose last seq is
/// `last`, after `read`: messages that count, from others, not from one
/// of `blocked`.
#[allow(clippy::too_many_arguments)]
pub(super) fn unread_count<R: Readable>(
    r: &R,
    s: &Spaces,
    t: &str,
    u: &str,
    c: &str,
    read: u64,
    last: u64,
    blocked: &HashSet<String>,
) -> StoreResult<u64> {
    if last <= read {
        return Ok(0);
    }
    let uncounted = seqs_between(r, &s.uncounted, Key::new().s(t).s(c), read, last)?;
    let mut passed_over = Vec::new();
    for sender in std::iter::once(u).chain(blocked.iter().map(String::as_str)) {
        let theirs = Key::new().s(t).s(sender).s(c);
        passed_over.extend(seqs_between(r, &s.sent_by, theirs, read, last)?);
    }
    Ok(unread(read, last, &uncounted, passed_over))
}

/// The trailing seqs of the keys under `prefix` in `(after, to]`,
/// ascending, at most [`LOOKED_AT`].
fn seqs_between<R: Readable>(
    r: &R,
    space: &fjall::Keyspace,
    prefix: Key,
    after: u64,
    to: u64,
) -> StoreResult<Vec<u64>> {
    let low = prefix.clone().n(after.saturating_add(1)).bytes();
    let high = prefix.n(to).bytes();
    r.range(space, low..=high)
        .take(LOOKED_AT)
        .map(|g| trailing_u64(&g.key().map_err(storage)?))
        .collect()
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

/// Fills `uncounted` from the live messages, once: a store of an earlier
/// layout never wrote it, and its system messages and thread replies
/// would otherwise count. A message's row has the message's own key
/// (tenant, conversation, seq). Messages archived or expired before the
/// upgrade are not looked for: they count as every message did before
/// unread counts were exact. The index of layouts 6 and 7 (`counted`, a
/// row per message that counts) goes.
pub(super) fn fill_uncounted(db: &Database, s: &Spaces) -> StoreResult<()> {
    const OLD_INDEX: &str = "counted";
    if db.keyspace_exists(OLD_INDEX) {
        let old = db
            .keyspace(OLD_INDEX, fjall::KeyspaceCreateOptions::default)
            .map_err(storage)?;
        db.delete_keyspace(old).map_err(storage)?;
        s.meta.remove("unread_counted").map_err(storage)?;
    }
    const DONE: &str = "unread_uncounted";
    if s.meta.contains_key(DONE).map_err(storage)? {
        return Ok(());
    }
    let snap = db.snapshot();
    let mut batch = db.batch();
    let mut rows = 0usize;
    for g in snap.iter(&s.messages) {
        let (k, v) = g.into_inner().map_err(storage)?;
        let m: Message = decode(&v)?;
        if !crate::rules::unread::counts(&m) {
            batch.insert(&s.uncounted, k.to_vec(), []);
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
        tracing::info!(rows, "the messages that do not count as unread are indexed");
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
    /// then still count, a system message no more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_from_before_the_index_counts_its_unread_messages() {
        let dir = tempfile::tempdir().unwrap();
        let config = EmbeddedConfig::in_dir(dir.path());
        let unread = |store: &EmbeddedStore| {
            let (snap, s) = (store.db.snapshot(), store.spaces.clone());
            super::unread_count(&snap, &s, "t", "bob", "c", 0, 3, &Default::default()).unwrap()
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
            for g in snap.iter(&store.spaces.uncounted) {
                let (k, _) = g.into_inner().unwrap();
                store.spaces.uncounted.remove(k).unwrap();
            }
            store.spaces.meta.remove("unread_uncounted").unwrap();
            assert_eq!(unread(&store), 3, "the system message counts");
            // Layouts 6 and 7 kept a row per message that counts.
            let old = store
                .db
                .keyspace("counted", fjall::KeyspaceCreateOptions::default)
                .unwrap();
            old.insert("t\0c\0", "ann").unwrap();
        }
        let store = Arc::new(reopen(&config).await);
        assert_eq!(unread(&store), 2);
        assert!(!store.db.keyspace_exists("counted"), "the old index went");
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
        let unread = |read: u64, last: u64| {
            let snap = store.db.snapshot();
            super::unread_count(
                &snap,
                &store.spaces,
                "t",
                "bob",
                "c",
                read,
                last,
                &Default::default(),
            )
            .unwrap()
        };
        assert_eq!(unread(0, MAX_UNREAD_COUNTED), 999);
        store
            .commit(vec![send(MAX_UNREAD_COUNTED + 1, MAX_UNREAD_COUNTED + 1)])
            .await
            .unwrap();
        let last = MAX_UNREAD_COUNTED + 1;
        assert_eq!(unread(0, last), 999);
        assert_eq!(unread(1, last), 999);
        assert_eq!(unread(2, last), 998);
    }
}
