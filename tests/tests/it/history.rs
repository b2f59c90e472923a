//! F19: history newest first, paginated by `seq`, for members only.

use switchboard_client::rest::HistoryParams;
use switchboard_protocol::ConversationKind;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

#[tokio::test]
async fn history_pages_newest_first_by_seq() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    for i in 0..7 {
        alice
            .send(&send_frame(&conv, &format!("h{i}"), &format!("m{i}")))
            .await
            .unwrap();
    }
    for i in 0..7 {
        expect_ack(&mut alice, &format!("h{i}")).await;
    }
    let rest = cluster.rest(0, "bob");
    let page = |before, after, limit| {
        let rest = rest.clone();
        let conv = conv.clone();
        async move {
            let p = rest
                .history(
                    &conv,
                    HistoryParams {
                        before_seq: before,
                        after_seq: after,
                        limit,
                    },
                )
                .await
                .unwrap();
            (
                p.messages.iter().map(|m| m.seq).collect::<Vec<_>>(),
                p.next_before_seq,
            )
        }
    };
    assert_eq!(page(None, None, Some(3)).await, (vec![7, 6, 5], Some(5)));
    assert_eq!(page(Some(5), None, Some(3)).await, (vec![4, 3, 2], Some(2)));
    assert_eq!(page(Some(2), None, Some(3)).await, (vec![1], None));
    assert_eq!(page(None, Some(4), None).await, (vec![7, 6, 5], None));
    assert_eq!(
        page(None, None, Some(1000)).await.0.len(),
        7,
        "limit is capped, not refused"
    );

    // Non-members and unknown conversations.
    let eve = cluster.rest(0, "eve");
    let e = eve
        .history(&conv, HistoryParams::default())
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(403), Some("not_a_member")));
    let e = eve.conversation(&conv).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(403), Some("not_a_member")));
    let e = rest
        .history("no-such-conversation", HistoryParams::default())
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(404), Some("not_found")));
}

#[tokio::test]
async fn membership_changes_are_messages_and_gate_access() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let alice = cluster.rest(0, "alice");
    let view = alice.add_members(&conv, &["carol"]).await.unwrap();
    assert_eq!(view.last_seq, 1, "the change is a system message");
    let carol = cluster.rest(0, "carol");
    carol
        .history(&conv, HistoryParams::default())
        .await
        .unwrap();

    // Only the creator (or an admin) removes others; anyone may leave.
    let bob = cluster.rest(0, "bob");
    let e = bob.remove_member(&conv, "carol").await.unwrap_err();
    assert_eq!(e.code(), Some("forbidden"));
    bob.remove_member(&conv, "bob").await.unwrap();
    let e = bob
        .history(&conv, HistoryParams::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("not_a_member"));

    // A removed member can no longer send.
    let mut ws = cluster.ws(0, "bob", "b").await;
    ws.send(&send_frame(&conv, "late", "hello?")).await.unwrap();
    let (code, request, id, _) = expect_error(&mut ws).await;
    assert_eq!(code.as_str(), "not_a_member");
    assert_eq!(request.as_deref(), Some("send_message"));
    assert_eq!(id.as_deref(), Some("late"));

    // Direct conversations: one per pair, and closed membership.
    let (first, created) = alice
        .create_conversation(ConversationKind::Direct, &["dave"], None)
        .await
        .unwrap();
    assert!(created);
    let (again, created) = cluster
        .rest(0, "dave")
        .create_conversation(ConversationKind::Direct, &["alice"], None)
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again.conversation_id, first.conversation_id);
    let e = alice
        .add_members(first.conversation_id.as_str(), &["eve"])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("conflict"));
}
