//! Checks of tiered storage (F14): the backend's side (old buckets found,
//! read and marked archived) and what readers see through the archive tier.

use std::sync::Arc;

use switchboard_protocol::{ClientMsgId, Content, ConversationKind, Message, Timestamp};

use crate::{BucketKey, HistoryQuery, MessageKey, Mutation, SentKey, Store, StoreError};

use super::support::{conv, create, device, key, tenant, text_message, unique_tenant, user};

/// A day well before every other check's messages (UTC day 19000 is in
/// 2022), so that only this conversation's buckets are old.
const OLD_DAY: u32 = 19_000;

/// A message created on day `OLD_DAY + day`.
fn old_message(c: &str, seq: u64, day: u32) -> Message {
    let mut m = text_message(c, seq, "a", "phone", &format!("old-{seq}"));
    m.created_at =
        Timestamp::from_unix_ms(i64::from(OLD_DAY + day) * 86_400_000 + seq as i64 * 1000);
    m
}

/// A conversation over three days: seqs 1-3 on the first, 4-6 on the
/// second, 7-9 on the third; seq 2 and 5 edited, 3 and 4 deleted (4 after
/// an edit), bob's phone with every message in its inbox.
async fn seed_old_conversation(store: &dyn Store, t: &str, c: &str) {
    let tt = tenant(t);
    store
        .register_device(&tt, &user("b"), &device("phone"))
        .await
        .unwrap();
    let start = i64::from(OLD_DAY) * 86_400_000;
    store
        .commit(vec![create(
            t,
            c,
            ConversationKind::Group,
            &["a", "b"],
            start,
        )])
        .await
        .unwrap();
    let messages = (1..=9)
        .map(|seq| old_message(c, seq, ((seq - 1) / 3) as u32))
        .collect();
    let edit = |seq, text: &str| Mutation::Edit {
        key: key(t, c),
        seq,
        content: Content::Text { text: text.into() },
        editor: user("a"),
        at: Timestamp::from_unix_ms(start + 90_000_000 + seq as i64),
        inbox: true,
        custom: None,
    };
    let delete = |seq| Mutation::Delete {
        key: key(t, c),
        seq,
        at: Timestamp::from_unix_ms(start + 95_000_000 + seq as i64),
        inbox: true,
    };
    store
        .commit(vec![
            Mutation::Append {
                key: key(t, c),
                expected_last_seq: 0,
                messages,
                inbox: true,
            },
            edit(2, "two, edited"),
            edit(2, "two, edited again"),
            edit(5, "five, edited"),
            delete(3),
            edit(4, "four, edited before its deletion"),
            delete(4),
        ])
        .await
        .unwrap();
}

fn bucket(t: &str, c: &str, day: u32) -> BucketKey {
    BucketKey {
        tenant: tenant(t),
        conversation_id: conv(c),
        day: OLD_DAY + day,
    }
}

/// The backend's side of tiered storage (F14): finding old buckets,
/// reading them, and the archive mark removing their rows.
pub async fn old_buckets_move_to_the_archive(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("archive");
    let tt = tenant(t);
    let (b, phone) = (user("b"), device("phone"));
    seed_old_conversation(store, t, "c").await;

    // The scan finds the two days before the cutoff, also one row at a time.
    let mut found = Vec::new();
    let mut cursor = None;
    loop {
        let scan = store
            .archive_candidates(OLD_DAY + 2, cursor, 1)
            .await
            .unwrap();
        found.extend(scan.buckets.into_iter().filter(|k| k.tenant == tt));
        cursor = scan.next;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(found, vec![bucket(t, "c", 0), bucket(t, "c", 1)]);

    let whole = store
        .bucket_contents(&bucket(t, "c", 0), 0, 100)
        .await
        .unwrap();
    assert_eq!((whole.first_seq, whole.last_seq), (1, 3));
    let seqs: Vec<u64> = whole.messages.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert_eq!(
        whole.versions.len(),
        1,
        "seq 2 has versions, deleted 3 none"
    );
    assert_eq!(whole.versions[0].0, 2);
    assert_eq!(whole.versions[0].1.len(), 3);
    let part = store
        .bucket_contents(&bucket(t, "c", 1), 4, 1)
        .await
        .unwrap();
    assert_eq!((part.first_seq, part.last_seq), (4, 6));
    assert_eq!(
        part.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![5]
    );
    assert_eq!(
        store.bucket_contents(&bucket(t, "c", 7), 0, 10).await,
        Err(StoreError::NotFound)
    );

    let objects = crate::archive::MemoryObjects::default();
    for day in [0, 1] {
        let moved = crate::archive::archive_bucket(store, &objects, &bucket(t, "c", day))
            .await
            .unwrap();
        assert_eq!(moved, 3);
    }
    assert!(matches!(
        store.bucket_contents(&bucket(t, "c", 0), 0, 100).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        crate::archive::archive_bucket(store, &objects, &bucket(t, "c", 0)).await,
        Err(StoreError::Conflict(_))
    ));
    // A mark that names the wrong range is refused.
    assert!(matches!(
        store
            .commit(vec![Mutation::Archive {
                bucket: bucket(t, "c", 2),
                first_seq: 7,
                last_seq: 8,
                object: "x".into(),
            }])
            .await,
        Err(StoreError::Conflict(_))
    ));

    let archived = store
        .archived_buckets(&key(t, "c"), 0, u64::MAX)
        .await
        .unwrap();
    let spans: Vec<(u32, u64, u64)> = archived
        .iter()
        .map(|a| (a.day - OLD_DAY, a.first_seq, a.last_seq))
        .collect();
    assert_eq!(spans, vec![(1, 4, 6), (0, 1, 3)], "newest first");
    assert_eq!(
        archived[1].object,
        crate::archive::object_name(&bucket(t, "c", 0))
    );
    let overlapping = |after, before| async move {
        store
            .archived_buckets(&key(t, "c"), after, before)
            .await
            .unwrap()
            .iter()
            .map(|a| a.day - OLD_DAY)
            .collect::<Vec<_>>()
    };
    assert_eq!(overlapping(3, 5).await, vec![1]);
    assert_eq!(overlapping(2, 4).await, vec![0]);
    assert_eq!(overlapping(6, u64::MAX).await, Vec::<u32>::new());
    assert!(
        store
            .archive_candidates(OLD_DAY + 2, None, 1_000_000)
            .await
            .unwrap()
            .buckets
            .iter()
            .all(|k| k.tenant != tt)
    );

    // The live rows are gone; the ids still lead to their seq; the inbox
    // names live rows only; the idempotency keys went with the rows. (Only
    // reads that stay clear of the archived range: the suite also runs on
    // the served store, which reads archives from its own blob store.)
    let live = store
        .history(
            &tt,
            &conv("c"),
            &b,
            HistoryQuery {
                before_seq: None,
                after_seq: Some(6),
                limit: 100,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        live.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![9, 8, 7]
    );
    let inbox = store.inbox(&tt, &b, &phone, None, 100).await.unwrap();
    assert_eq!(
        inbox.iter().map(|m| m.seq).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    let id1 = MessageKey {
        tenant: tt.clone(),
        conversation_id: conv("c"),
        message_id: old_message("c", 1, 0).message_id,
    };
    assert_eq!(
        store.message_seqs(vec![id1.clone()]).await.unwrap(),
        vec![Some(1)]
    );
    let sent1 = SentKey {
        tenant: tt.clone(),
        conversation_id: conv("c"),
        sender: user("a"),
        client_msg_id: ClientMsgId::new("old-1").unwrap(),
    };
    assert_eq!(store.find_sent(vec![sent1]).await.unwrap(), vec![None]);
    // The conversation keeps its position.
    let states = store.sequencer_states(vec![key(t, "c")]).await.unwrap();
    assert_eq!(states[0].as_ref().unwrap().last_seq, 9);

    // Restoring puts a row back once; a live row is never overwritten.
    let restore = |text: &str| {
        let mut m = old_message("c", 1, 0);
        m.content = Some(Content::Text { text: text.into() });
        Mutation::Restore {
            key: key(t, "c"),
            message: Box::new(m),
            versions: Vec::new(),
        }
    };
    store.commit(vec![restore("restored")]).await.unwrap();
    store.commit(vec![restore("again")]).await.unwrap();
    let one = store.find_messages(vec![id1]).await.unwrap().remove(0);
    assert_eq!(
        one.and_then(|m| m.content),
        Some(Content::Text {
            text: "restored".into()
        })
    );
}

/// Everything a reader can see of a conversation, for before/after.
async fn everything_visible(store: &dyn Store, t: &str, c: &str) -> Vec<String> {
    let (tt, cc, reader) = (tenant(t), conv(c), user("b"));
    let mut out = Vec::new();
    let all = store
        .history(
            &tt,
            &cc,
            &reader,
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 1000,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    out.push(serde_json::to_string(&all).unwrap());
    // Page by page, two at a time, as a client scrolls back.
    let mut before = None;
    loop {
        let page = store
            .history(
                &tt,
                &cc,
                &reader,
                HistoryQuery {
                    before_seq: before,
                    after_seq: None,
                    limit: 2,
                    thread_root: None,
                },
            )
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.seq);
        out.push(serde_json::to_string(&page).unwrap());
    }
    for after in [0, 2, 5] {
        let page = store.replay(&tt, &cc, &reader, after, 4).await.unwrap();
        out.push(serde_json::to_string(&page).unwrap());
    }
    let ids: Vec<MessageKey> = all
        .iter()
        .map(|m| MessageKey {
            tenant: tt.clone(),
            conversation_id: cc.clone(),
            message_id: m.message_id,
        })
        .collect();
    out.push(serde_json::to_string(&store.find_messages(ids).await.unwrap()).unwrap());
    for m in &all {
        let versions = store
            .versions(&tt, &cc, &reader, m.message_id)
            .await
            .unwrap();
        out.push(format!(
            "{} {}",
            m.seq,
            serde_json::to_string(&versions).unwrap()
        ));
    }
    out
}

/// Tiered storage as readers see it (F14): history, replay, lookups and
/// versions read the same before and after old buckets are archived,
/// edits and deletes included; archived messages can still be edited and
/// deleted; a lost object is a clear error. Takes the store as an `Arc`
/// because [`crate::archive::Tiered`] holds it.
pub async fn tiered_reads_are_unchanged(store: &Arc<dyn Store>) {
    use crate::archive::{MemoryObjects, Tiered, archive_bucket};

    let store = store.clone();
    let t = &unique_tenant("tiered");
    let tt = tenant(t);
    seed_old_conversation(store.as_ref(), t, "c").await;
    let before = everything_visible(store.as_ref(), t, "c").await;

    let objects = Arc::new(MemoryObjects::default());
    let tiered: Arc<dyn Store> = Arc::new(Tiered::new(store.clone(), objects.clone()));
    for day in [0, 1] {
        archive_bucket(tiered.as_ref(), objects.as_ref(), &bucket(t, "c", day))
            .await
            .unwrap();
    }
    let raw = store
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(raw.len(), 3, "the old days left the live rows");
    assert_eq!(everything_visible(tiered.as_ref(), t, "c").await, before);

    // The sender's index outlives archiving: the backend names the
    // archived seqs, the tier reads them, as history shows them.
    let raw = store
        .sent_by(&key(t, "c"), &user("a"), None, 100)
        .await
        .unwrap();
    assert_eq!(
        raw.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=9).rev().collect::<Vec<_>>()
    );
    assert!(
        raw.iter().any(|r| r.message.is_none()),
        "archived rows name their seq only"
    );
    let through: Vec<_> = tiered
        .sent_by(&key(t, "c"), &user("a"), None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.message.unwrap())
        .collect();
    let shown = tiered
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(through, shown);
    let older = tiered
        .sent_by(&key(t, "c"), &user("a"), Some(5), 2)
        .await
        .unwrap();
    assert_eq!(older.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![4, 3]);

    // Membership is checked as before.
    assert_eq!(
        tiered
            .history(
                &tt,
                &conv("c"),
                &user("mallory"),
                HistoryQuery {
                    before_seq: None,
                    after_seq: None,
                    limit: 10,
                    thread_root: None,
                }
            )
            .await,
        Err(StoreError::NotAMember)
    );

    // Edits and deletes of archived messages: the edited one gets a third
    // version, the deleted one loses its versions.
    let at = Timestamp::from_unix_ms(2_000_000_000_000);
    tiered
        .commit(vec![
            Mutation::Edit {
                key: key(t, "c"),
                seq: 2,
                content: Content::Text {
                    text: "two, edited after archiving".into(),
                },
                editor: user("a"),
                at,
                inbox: true,
                custom: None,
            },
            Mutation::Delete {
                key: key(t, "c"),
                seq: 5,
                at,
                inbox: true,
            },
        ])
        .await
        .unwrap();
    let all = tiered
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|m| m.seq).collect::<Vec<_>>(),
        (1..=9).rev().collect::<Vec<_>>()
    );
    let two = all.iter().find(|m| m.seq == 2).unwrap();
    assert_eq!(
        two.content,
        Some(Content::Text {
            text: "two, edited after archiving".into()
        })
    );
    let five = all.iter().find(|m| m.seq == 5).unwrap();
    assert!(five.content.is_none() && five.deleted_at.is_some());
    let versions = |seq: u64| {
        let tiered = &tiered;
        let tt = tt.clone();
        async move {
            tiered
                .versions(
                    &tt,
                    &conv("c"),
                    &user("b"),
                    old_message("c", seq, 0).message_id,
                )
                .await
                .unwrap()
        }
    };
    assert_eq!(versions(2).await.len(), 4);
    assert!(versions(5).await.is_empty());
    assert!(versions(4).await.is_empty(), "deleted before archiving");
    assert_eq!(versions(1).await.len(), 0, "never edited");

    // A lost object: a clear error naming it, not a shorter history.
    let object = crate::archive::object_name(&bucket(t, "c", 0));
    assert!(objects.remove(&object));
    let cold: Arc<dyn Store> = Arc::new(Tiered::new(store.clone(), objects.clone()));
    match cold
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 100,
                thread_root: None,
            },
        )
        .await
    {
        Err(StoreError::ArchiveUnreadable { object: named, .. }) => assert_eq!(named, object),
        other => panic!("expected ArchiveUnreadable, got {other:?}"),
    }
    // What is newer than the lost day still reads.
    let recent = cold
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            HistoryQuery {
                before_seq: None,
                after_seq: Some(3),
                limit: 100,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(recent.len(), 6);
}

/// Expiry in the archive (v1.2): the archive tier rewrites a bucket's
/// object with the messages due deleted (by seq, or all created by a
/// cutoff), their versions gone; the other days are left alone, and a
/// second time changes nothing.
pub async fn expiry_rewrites_archived_buckets(store: &Arc<dyn Store>) {
    use crate::archive::{
        ArchiveObjects, MemoryObjects, Tiered, archive_bucket, decode, object_name,
    };

    let store = store.clone();
    let t = &unique_tenant("archexp");
    seed_old_conversation(store.as_ref(), t, "c").await;
    let objects = Arc::new(MemoryObjects::default());
    let tiered: Arc<dyn Store> = Arc::new(Tiered::new(store.clone(), objects.clone()));
    for day in [0, 1] {
        archive_bucket(tiered.as_ref(), objects.as_ref(), &bucket(t, "c", day))
            .await
            .unwrap();
    }
    let at = Timestamp::from_unix_ms(2_000_000_000_000);
    let cutoff = old_message("c", 2, 0).created_at;
    let expire = |day: u32, seqs: Vec<u64>, cutoff: Option<Timestamp>| Mutation::ExpireArchived {
        bucket: bucket(t, "c", day),
        seqs,
        cutoff,
        at,
    };
    tiered
        .commit(vec![expire(0, vec![], Some(cutoff))])
        .await
        .unwrap();
    tiered.commit(vec![expire(1, vec![5], None)]).await.unwrap();
    let read = || async {
        tiered
            .history(
                &tenant(t),
                &conv("c"),
                &user("b"),
                HistoryQuery {
                    before_seq: None,
                    after_seq: None,
                    limit: 100,
                    thread_root: None,
                },
            )
            .await
            .unwrap()
    };
    let history = read().await;
    let gone: Vec<u64> = history
        .iter()
        .filter(|m| m.content.is_none())
        .map(|m| m.seq)
        .rev()
        .collect();
    // 3 and 4 were deleted before; 1, 2 by the cutoff, 5 by its seq.
    assert_eq!(gone, vec![1, 2, 3, 4, 5]);
    let five = history.iter().find(|m| m.seq == 5).unwrap();
    assert_eq!(five.deleted_at, Some(at));
    assert!(history.iter().any(|m| m.seq == 6 && m.content.is_some()));
    for (day, edited) in [(0, 2), (1, 5)] {
        let name = object_name(&bucket(t, "c", day));
        let contents = decode(&name, &objects.get(&name).await.unwrap()).unwrap();
        assert!(
            contents.versions.iter().all(|(seq, _)| *seq != edited),
            "the versions of {edited} went"
        );
        let text = serde_json::to_string(&contents).unwrap();
        assert!(!text.contains(", edited"), "{text}");
    }
    let versions = tiered
        .versions(
            &tenant(t),
            &conv("c"),
            &user("b"),
            old_message("c", 2, 0).message_id,
        )
        .await
        .unwrap();
    assert!(versions.is_empty());
    // Again: nothing changes.
    tiered
        .commit(vec![expire(0, vec![1, 2], Some(cutoff))])
        .await
        .unwrap();
    assert_eq!(read().await, history);
    // Without the tier, a backend refuses it.
    assert!(matches!(
        store.commit(vec![expire(0, vec![1], None)]).await,
        Err(StoreError::Unavailable(_))
    ));
}
