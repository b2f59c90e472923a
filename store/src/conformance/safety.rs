//! Checks of the v1.2 safety rows: a conversation's policy (in its
//! record and the sequencer's state), bans, and blocks (listed, and a
//! direct conversation's state saying who blocks whom).

use std::sync::Arc;

use switchboard_protocol::reports::{Report, ReportAction, ReportReason, ReportStatus};
use switchboard_protocol::safety::{Ban, ConversationPolicy};
use switchboard_protocol::{ConversationKind, MessageId, Timestamp};

use super::support::{conv, create, everything, key, tenant, unique_tenant, user};
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

    // A policy shows in the record, the list and the sequencer's state;
    // the default removes it.
    let policy = ConversationPolicy {
        slow_mode_secs: 30,
        retention_days: Some(7),
        disappearing_secs: None,
    };
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy,
        }])
        .await
        .unwrap();
    let detail = store
        .conversation(&tenant(t), &conv("g"), &user("bob"))
        .await
        .unwrap();
    assert_eq!(detail.record.policy, policy);
    let listed = store
        .conversation_page(&tenant(t), &user("bob"), everything())
        .await
        .unwrap();
    let g = listed
        .iter()
        .find(|s| s.record.conversation_id == conv("g"))
        .unwrap();
    assert_eq!(g.record.policy, policy);
    let states = store
        .sequencer_states(vec![key(t, "g"), key(t, "d")])
        .await
        .unwrap();
    assert_eq!(states[0].as_ref().unwrap().policy, policy);
    assert!(states[1].as_ref().unwrap().policy.is_default());
    store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "g"),
            policy: ConversationPolicy::default(),
        }])
        .await
        .unwrap();
    let detail = store
        .conversation(&tenant(t), &conv("g"), &user("ann"))
        .await
        .unwrap();
    assert!(detail.record.policy.is_default());
    // A policy of a conversation that does not exist is refused.
    let missing = store
        .commit(vec![Mutation::SetPolicy {
            key: key(t, "nope"),
            policy,
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
