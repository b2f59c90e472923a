//! Checks of the v1.2 safety rows: a conversation's policy (in its
//! record and the sequencer's state), bans, and blocks (listed, and a
//! direct conversation's state saying who blocks whom).

use std::sync::Arc;

use switchboard_protocol::reports::{Report, ReportAction, ReportReason, ReportStatus};
use switchboard_protocol::safety::{Ban, ConversationPolicy};
use switchboard_protocol::{Content, ConversationKind, MessageId, Timestamp};

use super::support::{
    conv, create, device, everything, key, seed_conversation, tenant, unique_tenant, user,
};
use crate::{Mutation, Store, StoreError};

pub async fn policies_bans_and_blocks_are_stored_and_shown(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("safety");
    store
        .commit(vec![
            create(t, "g", ConversationKind::Group, &["ann", "bob"], 10),
            create(t, "d", ConversationKind::Direct, &["ann", "bob"], 10),
        ])
        .await
        .unwrap();

    // A policy, and the conversation's custom fields (v1.3), show in the
    // record, the list and the sequencer's state; the defaults remove
    // them.
    let policy = ConversationPolicy {
        slow_mode_secs: 30,
        retention_days: Some(7),
        disappearing_secs: None,
        frozen: true,
    };
    // And (v1.3) the conversation's mutes, which its owners and admins
    // read from the record and its writer from the state.
    let mutes = vec![switchboard_protocol::moderation::Mute {
        user_id: user("bob"),
        by: user("ann"),
        muted_at: Timestamp::from_unix_ms(10),
        until: Some(Timestamp::from_unix_ms(5_000)),
    }];
    let custom: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"topic":"release","color":3}"#).unwrap();
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy,
            custom: custom.clone(),
            channel: Default::default(),
            mutes: mutes.clone(),
        }])
        .await
        .unwrap();
    let detail = store
        .conversation(&tenant(t), &conv("g"), &user("bob"))
        .await
        .unwrap();
    assert_eq!(
        (detail.record.policy, &detail.record.custom),
        (policy, &custom)
    );
    assert_eq!(detail.record.mutes, mutes);
    let listed = store
        .conversation_page(&tenant(t), &user("bob"), everything())
        .await
        .unwrap();
    let g = listed
        .iter()
        .find(|s| s.record.conversation_id == conv("g"))
        .unwrap();
    assert_eq!((g.record.policy, &g.record.custom), (policy, &custom));
    let states = store
        .sequencer_states(vec![key(t, "g"), key(t, "d")])
        .await
        .unwrap();
    assert_eq!(states[0].as_ref().unwrap().policy, policy);
    assert_eq!(states[0].as_ref().unwrap().custom, custom);
    assert_eq!(states[0].as_ref().unwrap().mutes, mutes);
    assert!(states[1].as_ref().unwrap().policy.is_default());
    assert!(states[1].as_ref().unwrap().custom.is_empty());
    // Custom fields alone keep the row.
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy: ConversationPolicy::default(),
            custom: custom.clone(),
            channel: Default::default(),
            mutes: Vec::new(),
        }])
        .await
        .unwrap();
    let states = store.sequencer_states(vec![key(t, "g")]).await.unwrap();
    assert_eq!(states[0].as_ref().unwrap().custom, custom);
    assert!(states[0].as_ref().unwrap().mutes.is_empty());
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy: ConversationPolicy::default(),
            custom: Default::default(),
            channel: Default::default(),
            mutes: Vec::new(),
        }])
        .await
        .unwrap();
    let detail = store
        .conversation(&tenant(t), &conv("g"), &user("ann"))
        .await
        .unwrap();
    assert!(detail.record.policy.is_default());
    assert!(detail.record.custom.is_empty());
    // A policy of a conversation that does not exist is refused.
    let missing = store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "nope"),
            policy,
            custom: Default::default(),
            channel: Default::default(),
            mutes: Vec::new(),
        }])
        .await;
    assert_eq!(missing, Err(StoreError::NotFound));

    // Bans: newest first, one per user (a second replaces the first),
    // lifted by an unban.
    let ban = |u: &str, at: i64, until: Option<i64>| Ban {
        user_id: user(u),
        by: user("ann"),
        banned_at: Timestamp::from_unix_ms(at),
        until: until.map(Timestamp::from_unix_ms),
    };
    store
        .commit(vec![
            Mutation::Ban {
                key: key(t, "g"),
                ban: ban("cat", 100, None),
            },
            Mutation::Ban {
                key: key(t, "g"),
                ban: ban("dan", 200, Some(5_000)),
            },
        ])
        .await
        .unwrap();
    store
        .commit(vec![Mutation::Ban {
            key: key(t, "g"),
            ban: ban("cat", 300, Some(9_000)),
        }])
        .await
        .unwrap();
    let bans = store.bans(&key(t, "g")).await.unwrap();
    assert_eq!(
        bans,
        vec![ban("cat", 300, Some(9_000)), ban("dan", 200, Some(5_000))]
    );
    store
        .commit(vec![Mutation::Unban {
            key: key(t, "g"),
            user: user("dan"),
        }])
        .await
        .unwrap();
    assert_eq!(
        store.bans(&key(t, "g")).await.unwrap(),
        vec![ban("cat", 300, Some(9_000))]
    );
    assert!(store.bans(&key(t, "d")).await.unwrap().is_empty());

    // Blocks: the blocker's list, newest first; a direct conversation's
    // state names who blocks; an unblock undoes it; idempotent.
    let block = |u: &str, target: &str, at: Option<i64>| Mutation::SetBlock {
        tenant: tenant(t),
        user: user(u),
        target: user(target),
        at: at.map(Timestamp::from_unix_ms),
    };
    store
        .commit(vec![
            block("bob", "ann", Some(50)),
            block("bob", "eve", Some(60)),
        ])
        .await
        .unwrap();
    store
        .commit(vec![block("bob", "ann", Some(50))])
        .await
        .unwrap();
    let blocks = store.blocks(&tenant(t), &user("bob")).await.unwrap();
    let names: Vec<&str> = blocks.iter().map(|b| b.user_id.as_str()).collect();
    assert_eq!(names, ["eve", "ann"]);
    assert_eq!(blocks[1].blocked_at, Timestamp::from_unix_ms(50));
    assert!(
        store
            .blocks(&tenant(t), &user("ann"))
            .await
            .unwrap()
            .is_empty()
    );
    let states = store
        .sequencer_states(vec![key(t, "d"), key(t, "g")])
        .await
        .unwrap();
    let blocked_by: Vec<&str> = states[0]
        .as_ref()
        .unwrap()
        .blocked_by
        .iter()
        .map(|u| u.as_str())
        .collect();
    assert_eq!(blocked_by, ["bob"]);
    // Groups never say who blocks whom.
    assert!(states[1].as_ref().unwrap().blocked_by.is_empty());
    store
        .commit(vec![block("bob", "ann", None), block("bob", "ann", None)])
        .await
        .unwrap();
    let states = store.sequencer_states(vec![key(t, "d")]).await.unwrap();
    assert!(states[0].as_ref().unwrap().blocked_by.is_empty());
    let names: Vec<String> = store
        .blocks(&tenant(t), &user("bob"))
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.user_id.as_str().to_owned())
        .collect();
    assert_eq!(names, ["eve"]);
}

pub async fn reports_are_listed_by_status_newest_first_and_counted(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("reports");
    let report = |id: u64, status: ReportStatus| Report {
        report_id: MessageId::from_u64(id),
        conversation_id: conv("g"),
        message_id: MessageId::from_u64(id + 1000),
        reporter: user("ann"),
        sender_id: user("eve"),
        reason: ReportReason::Spam,
        note: Some(format!("note {id}")),
        created_at: Timestamp::from_unix_ms(id as i64),
        status,
        message: None,
        resolved_at: None,
        resolved_by: None,
        action: None,
    };
    let put = |r: Report| Mutation::PutReport {
        tenant: tenant(t),
        report: Box::new(r),
    };
    store
        .commit(vec![
            put(report(10, ReportStatus::Open)),
            put(report(20, ReportStatus::Open)),
            put(report(30, ReportStatus::Resolved)),
        ])
        .await
        .unwrap();
    let ids = |reports: Vec<Report>| -> Vec<u64> {
        reports.iter().map(|r| r.report_id.as_u64()).collect()
    };
    let owner = tenant(t);
    let list = |status, before: Option<u64>, limit| {
        store.reports(&owner, status, before.map(MessageId::from_u64), limit)
    };
    assert_eq!(
        ids(list(ReportStatus::Open, None, 10).await.unwrap()),
        [20, 10]
    );
    assert_eq!(
        ids(list(ReportStatus::Resolved, None, 10).await.unwrap()),
        [30]
    );
    assert_eq!(
        ids(list(ReportStatus::Open, Some(20), 10).await.unwrap()),
        [10]
    );
    assert_eq!(ids(list(ReportStatus::Open, None, 1).await.unwrap()), [20]);
    let mut resolved = report(10, ReportStatus::Resolved);
    resolved.action = Some(ReportAction::Dismiss);
    store.commit(vec![put(resolved.clone())]).await.unwrap();
    assert_eq!(ids(list(ReportStatus::Open, None, 10).await.unwrap()), [20]);
    assert_eq!(
        ids(list(ReportStatus::Resolved, None, 10).await.unwrap()),
        [30, 10]
    );
    assert_eq!(
        ids(list(ReportStatus::Resolved, Some(30), 10).await.unwrap()),
        [10]
    );
    assert_eq!(
        store
            .report(&tenant(t), MessageId::from_u64(10))
            .await
            .unwrap(),
        Some(resolved)
    );
    assert_eq!(
        store
            .report(&tenant(t), MessageId::from_u64(11))
            .await
            .unwrap(),
        None
    );
    let counts = store.open_reports().await.unwrap();
    assert!(counts.contains(&(tenant(t), 1)), "{counts:?}");
    // Another tenant sees none of them.
    let other = unique_tenant("reports-other");
    assert!(
        store
            .reports(&tenant(&other), ReportStatus::Open, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn expired_messages_go_as_deletions_and_leave_the_inboxes(store: &Arc<dyn Store>) {
    let store: &dyn Store = store.as_ref();
    let t = &unique_tenant("expiry");
    let tt = tenant(t);
    store
        .register_device(&tt, &user("b"), &device("phone"))
        .await
        .unwrap();
    seed_conversation(store, t, "c", &["a", "b"], 5).await;
    // Message 2 was edited: its versions go with it.
    store
        .commit(vec![Mutation::Edit {
            key: key(t, "c"),
            seq: 2,
            content: Content::Text {
                text: "edited".into(),
            },
            editor: user("a"),
            at: Timestamp::from_unix_ms(1_780_000_100_000),
            inbox: false,
            custom: None,
        }])
        .await
        .unwrap();
    // Messages 1 to 3 are due (seed messages are 1 ms apart).
    let cutoff = Timestamp::from_unix_ms(1_780_000_000_003);
    let scan = store.expired(&key(t, "c"), 0, cutoff, 2).await.unwrap();
    assert_eq!(
        (scan.seqs.clone(), scan.last_seen, scan.done),
        (vec![1, 2], 2, false)
    );
    let rest = store.expired(&key(t, "c"), 2, cutoff, 10).await.unwrap();
    assert_eq!(
        (rest.seqs.clone(), rest.last_seen, rest.done),
        (vec![3], 3, true)
    );
    let at = Timestamp::from_unix_ms(1_780_000_200_000);
    store
        .commit(vec![Mutation::Expire {
            key: key(t, "c"),
            seqs: vec![1, 2, 3],
            at,
            unindex: Vec::new(),
        }])
        .await
        .unwrap();
    let page = store
        .history(
            &tt,
            &conv("c"),
            &user("b"),
            crate::HistoryQuery {
                before_seq: None,
                after_seq: None,
                limit: 10,
                thread_root: None,
            },
        )
        .await
        .unwrap();
    for m in &page {
        if m.seq <= 3 {
            assert_eq!(
                (m.content.is_none(), m.deleted_at),
                (true, Some(at)),
                "{m:?}"
            );
        } else {
            assert!(m.content.is_some() && m.deleted_at.is_none());
        }
    }
    assert_eq!(page.len(), 5, "the rows keep their seq");
    let message_id = page.iter().find(|m| m.seq == 2).unwrap().message_id;
    let versions = store
        .versions(&tt, &conv("c"), &user("b"), message_id)
        .await
        .unwrap();
    assert!(
        versions
            .iter()
            .all(|v| !matches!(v.content, Content::Text { .. })),
        "no version keeps the text: {versions:?}"
    );
    let inbox: Vec<u64> = store
        .inbox(&tt, &user("b"), &device("phone"), None, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(inbox, vec![4, 5]);
    // Done: nothing more is due, and expiring again changes nothing.
    let after = store.expired(&key(t, "c"), 3, cutoff, 10).await.unwrap();
    assert!(after.seqs.is_empty() && after.done);
    let again = store.expired(&key(t, "c"), 0, cutoff, 10).await.unwrap();
    assert!(again.seqs.is_empty());
    store
        .commit(vec![Mutation::Expire {
            key: key(t, "c"),
            seqs: vec![1, 2, 3],
            at,
            unindex: Vec::new(),
        }])
        .await
        .unwrap();
    // Messages with an `expires_at` are found by it, whatever their order.
    let expiring_message = |seq: u64, at: Option<i64>| {
        let mut m = super::support::text_message("c", seq, "a", "phone", &format!("x-{seq}"));
        m.expires_at = at.map(Timestamp::from_unix_ms);
        m
    };
    store
        .commit(vec![Mutation::Append {
            key: key(t, "c"),
            expected_last_seq: 5,
            messages: vec![
                expiring_message(6, Some(1_780_000_000_050)),
                expiring_message(7, Some(1_780_000_000_020)),
                expiring_message(8, None),
            ],
            inbox: true,
        }])
        .await
        .unwrap();
    let ck = key(t, "c");
    let due = |now: i64| store.due(&ck, Timestamp::from_unix_ms(now), 10);
    let at_ms = |d: Vec<(Timestamp, u64)>| -> Vec<(i64, u64)> {
        d.into_iter().map(|(t, s)| (t.unix_ms(), s)).collect()
    };
    assert_eq!(
        at_ms(due(1_780_000_000_030).await.unwrap()),
        [(1_780_000_000_020, 7)]
    );
    assert_eq!(
        at_ms(due(1_780_000_000_100).await.unwrap()),
        [(1_780_000_000_020, 7), (1_780_000_000_050, 6)]
    );
    store
        .commit(vec![Mutation::Expire {
            key: key(t, "c"),
            seqs: vec![7],
            at,
            unindex: vec![(Timestamp::from_unix_ms(1_780_000_000_020), 7)],
        }])
        .await
        .unwrap();
    assert_eq!(
        at_ms(due(1_780_000_000_100).await.unwrap()),
        [(1_780_000_000_050, 6)]
    );
    let inbox: Vec<u64> = store
        .inbox(&tt, &user("b"), &device("phone"), None, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(inbox, vec![4, 5, 6, 8], "only 7's entry went");

    // The conversations to look at: those with a lifetime only.
    store
        .commit(vec![
            Mutation::SetPolicy {
                key: key(t, "c"),
                policy: ConversationPolicy {
                    slow_mode_secs: 0,
                    retention_days: Some(3),
                    disappearing_secs: Some(60),
                    frozen: false,
                },
                custom: Default::default(),
                channel: Default::default(),
                mutes: Vec::new(),
            },
            create(t, "slow", ConversationKind::Group, &["a"], 10),
            Mutation::SetPolicy {
                key: key(t, "slow"),
                policy: ConversationPolicy {
                    slow_mode_secs: 5,
                    ..Default::default()
                },
                // A conversation's own fields (v1.3) share the row: no
                // lifetime either.
                custom: serde_json::from_str(r#"{"topic":"x"}"#).unwrap(),
                channel: Default::default(),
                mutes: Vec::new(),
            },
        ])
        .await
        .unwrap();
    let mut found = Vec::new();
    let mut cursor = None;
    loop {
        let step = store.expiring(cursor.take(), 2).await.unwrap();
        found.extend(step.conversations);
        match step.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let mine: Vec<_> = found.iter().filter(|(k, _)| k.tenant == tt).collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].0, key(t, "c"));
    assert_eq!(mine[0].1.lifetime_ms(), Some(60_000));

    // What a tenant's default retention applies to: every conversation
    // of the tenant, with a policy or not, and no other tenant's.
    let other = &unique_tenant("expiry-other");
    store
        .commit(vec![create(
            other,
            "x",
            ConversationKind::Group,
            &["a"],
            10,
        )])
        .await
        .unwrap();
    let mut listed = Vec::new();
    let mut cursor = None;
    loop {
        let step = store
            .tenant_conversations(&tt, cursor.take(), 1)
            .await
            .unwrap();
        listed.extend(step.conversations);
        match step.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    listed.sort();
    assert_eq!(listed, vec![conv("c"), conv("slow")]);
}
