//! The conversation features of v1.1 through the contract's names:
//! roles, reactions, replies and threads, mentions and notification
//! settings, pins; and a device that was away while all of them happened
//! (with a gateway killed in the middle) learning every one.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_client::{RestClient, WsClient};
use switchboard_protocol::frames::PinAction;
use switchboard_protocol::{
    ClientFrame, Content, ConversationKind, ErrorCode, MessageId, ReactAction, ServerFrame, UserId,
};
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;

fn react_frame(conv: &str, message: MessageId, emoji: &str, action: ReactAction) -> ClientFrame {
    ClientFrame::React {
        conversation_id: conv.parse().unwrap(),
        message_id: message,
        emoji: emoji.into(),
        action,
    }
}

/// The next `reaction` frame: (user, emoji, action, counts).
async fn expect_reaction(ws: &mut WsClient) -> (String, String, ReactAction, Value) {
    expect(ws, "a reaction", |f| match f {
        ServerFrame::Reaction {
            user_id,
            emoji,
            action,
            counts,
            ..
        } => Some((
            user_id.as_str().to_owned(),
            emoji,
            action,
            serde_json::to_value(counts).unwrap(),
        )),
        _ => None,
    })
    .await
}

fn roles(view: &Value) -> Vec<(String, String)> {
    view["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["user_id"].as_str().unwrap().to_owned(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_decide_who_removes_pins_and_changes_roles() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "rowner", &["radmin", "rmember"])
        .await;
    let (owner, admin, member) = (
        cluster.rest(0, "rowner"),
        cluster.rest(0, "radmin"),
        cluster.rest(0, "rmember"),
    );
    let mut watcher = cluster.ws(0, "rmember", "w").await;
    let path = |rest: &str| format!("/v1/conversations/{group}{rest}");
    // The creator owns the group.
    let (status, view) = call(&member, "GET", &path(""), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        roles(&view),
        [
            ("radmin".into(), "member".into()),
            ("rmember".into(), "member".into()),
            ("rowner".into(), "owner".into())
        ]
    );
    // A member changes no role and removes nobody.
    let make = |role: &str| Some(json!({ "role": role }));
    let (status, body) = call(&member, "PATCH", &path("/members/radmin"), make("admin")).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    assert_eq!(
        member
            .remove_member(&group, "radmin")
            .await
            .unwrap_err()
            .status(),
        Some(403)
    );
    // The owner makes an admin: every member hears it in order.
    let (status, view) = call(&owner, "PATCH", &path("/members/radmin"), make("admin")).await;
    assert_eq!(status, 200);
    assert!(roles(&view).contains(&("radmin".into(), "admin".into())));
    let told = expect_message(&mut watcher).await;
    match told.content {
        Some(Content::System(e)) => {
            assert_eq!(e.event, "role_changed");
            assert_eq!(e.user_ids, [UserId::new("radmin").unwrap()]);
            assert_eq!(e.role, Some(switchboard_protocol::Role::Admin));
        }
        other => panic!("{other:?}"),
    }
    // An admin makes no owner and changes no owner's role...
    let (status, _) = call(&admin, "PATCH", &path("/members/rmember"), make("owner")).await;
    assert_eq!(status, 403);
    let (status, _) = call(&admin, "PATCH", &path("/members/rowner"), make("member")).await;
    assert_eq!(status, 403);
    // ...but removes a member, and pins.
    let (mid, _) = send_acked(
        &mut cluster.ws(0, "rowner", "p").await,
        &group,
        "pin-me",
        "pin me",
    )
    .await;
    let pin = Some(json!({ "message_id": mid.to_string() }));
    let (status, _) = call(&member, "POST", &path("/pins"), pin.clone()).await;
    assert_eq!(status, 403, "a member does not pin");
    let (status, _) = call(&admin, "POST", &path("/pins"), pin).await;
    assert_eq!(status, 204);
    // The last owner cannot step down; making another owner first, it can.
    let (status, body) = call(&owner, "PATCH", &path("/members/rowner"), make("member")).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("conflict")));
    let (status, _) = call(&owner, "PATCH", &path("/members/radmin"), make("owner")).await;
    assert_eq!(status, 200);
    let (status, _) = call(&owner, "PATCH", &path("/members/rowner"), make("member")).await;
    assert_eq!(status, 200);
    admin.remove_member(&group, "rmember").await.unwrap();
    // A direct conversation has no roles to change.
    let direct = cluster
        .create(ConversationKind::Direct, "rowner", &["radmin"])
        .await;
    let (status, _) = call(
        &owner,
        "PATCH",
        &format!("/v1/conversations/{direct}/members/radmin"),
        make("admin"),
    )
    .await;
    assert_eq!(status, 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_reach_every_member_and_show_as_the_readers_own() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster.create(ConversationKind::Group, "xa", &["xb"]).await;
    let mut a = cluster.ws(0, "xa", "d").await;
    let mut b = cluster.ws(0, "xb", "d").await;
    let (mid, _) = send_acked(&mut a, &group, "x1", "react to me").await;
    expect_message(&mut b).await;
    b.send(&react_frame(&group, mid, "👍", ReactAction::Add))
        .await
        .unwrap();
    for ws in [&mut a, &mut b] {
        let (who, emoji, action, counts) = expect_reaction(ws).await;
        assert_eq!(
            (who.as_str(), emoji.as_str(), action),
            ("xb", "👍", ReactAction::Add)
        );
        assert_eq!(counts, json!({"👍": 1}));
    }
    // Idempotent: the same again changes nothing; only b hears it again.
    b.send(&react_frame(&group, mid, "👍", ReactAction::Add))
        .await
        .unwrap();
    assert_eq!(expect_reaction(&mut b).await.3, json!({"👍": 1}));
    a.send(&react_frame(&group, mid, "🎉", ReactAction::Add))
        .await
        .unwrap();
    assert_eq!(expect_reaction(&mut a).await.3, json!({"👍": 1, "🎉": 1}));
    assert_eq!(expect_reaction(&mut b).await.1, "🎉");
    // History shows the counts and the reader's own.
    let (_, page) = call(
        &cluster.rest(0, "xb"),
        "GET",
        &format!("/v1/conversations/{group}/messages"),
        None,
    )
    .await;
    let reactions = page["messages"][0]["reactions"].clone();
    assert_eq!(
        reactions,
        json!([{"emoji": "👍", "count": 1, "me": true}, {"emoji": "🎉", "count": 1, "me": false}])
    );
    // Past a user's limit: an error naming the message.
    for i in 0..19 {
        b.send(&react_frame(
            &group,
            mid,
            &format!(":e{i}:"),
            ReactAction::Add,
        ))
        .await
        .unwrap();
        expect_reaction(&mut b).await;
    }
    b.send(&react_frame(&group, mid, ":one-more:", ReactAction::Add))
        .await
        .unwrap();
    let refused = expect_refusal(&mut b).await;
    assert_eq!(
        refused,
        (
            ErrorCode::Conflict,
            Some("react".to_owned()),
            Some(mid.to_string())
        )
    );
    // A bad emoji is refused at the gateway.
    b.send_text(json!({"type":"react","conversation_id":group,"message_id":mid.to_string(),"emoji":"a b","action":"add"}).to_string()).await.unwrap();
    assert_eq!(expect_error(&mut b).await.0, ErrorCode::InvalidFrame);
    // A deleted message takes none and keeps none.
    a.send(&delete_frame(&group, mid)).await.unwrap();
    let deleted = expect_update(&mut b).await;
    assert!(deleted.reactions.is_empty(), "{:?}", deleted.reactions);
    b.send(&react_frame(&group, mid, "👍", ReactAction::Remove))
        .await
        .unwrap();
    assert_eq!(expect_error(&mut b).await.0, ErrorCode::Conflict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_threads_and_mentions_are_checked_counted_and_listed() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster
        .create(ConversationKind::Group, "ta", &["tb", "tc"])
        .await;
    let other = cluster.create(ConversationKind::Group, "ta", &["tb"]).await;
    let mut a = cluster.ws(0, "ta", "d").await;
    let mut b = cluster.ws(0, "tb", "d").await;
    let (root, root_seq) = send_acked(&mut a, &group, "t-root", "a thread starts").await;
    let (elsewhere, _) = send_acked(&mut a, &other, "t-else", "another conversation").await;
    // What a send names must be a live message of the conversation, a
    // thread's root, and members.
    let root_s = root.to_string();
    let bad = [
        (
            json!({"reply_to": elsewhere.to_string()}),
            ErrorCode::InvalidRequest,
        ),
        (json!({"thread_id": "1"}), ErrorCode::InvalidRequest),
        (json!({"mentions": ["tz"]}), ErrorCode::InvalidRequest),
        (json!({"mention_all": true}), ErrorCode::Forbidden),
    ];
    for (i, (extra, code)) in bad.into_iter().enumerate() {
        let got = send_with(&mut b, &group, &format!("t-bad{i}"), "x", extra.clone()).await;
        assert_eq!(got.map_err(|e| e.0), Err(code), "{extra}");
    }
    // At most 50 mentions: 50 pass the gateway (and are then refused
    // for naming non-members), 51 are refused at once for their number.
    let names = |n: usize| -> Vec<String> { (0..n).map(|i| format!("tm{i}")).collect() };
    let (code, why) = send_with(&mut b, &group, "t-50", "x", json!({"mentions": names(50)}))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::InvalidRequest);
    assert!(!why.contains("at most"), "{why}");
    let (code, why) = send_with(&mut b, &group, "t-51", "x", json!({"mentions": names(51)}))
        .await
        .unwrap_err();
    assert_eq!(code, ErrorCode::InvalidRequest);
    assert!(why.contains("at most 50"), "{why}");
    // Replies in the thread; one quotes the other and mentions a member.
    let (r1, _) = send_with(
        &mut b,
        &group,
        "t-r1",
        "first reply",
        json!({"thread_id": root_s}),
    )
    .await
    .unwrap();
    let (_, r2_seq) = send_with(
        &mut b,
        &group,
        "t-r2",
        "second reply, @tc",
        json!({"thread_id": root_s, "reply_to": r1.to_string(), "mentions": ["tc"]}),
    )
    .await
    .unwrap();
    let nested = send_with(
        &mut b,
        &group,
        "t-nested",
        "x",
        json!({"thread_id": r1.to_string()}),
    )
    .await;
    assert_eq!(
        nested.map_err(|e| e.0),
        Err(ErrorCode::InvalidRequest),
        "a reply is no root"
    );
    // a hears the replies live, with their thread and mentions.
    let live: Vec<_> = [expect_message(&mut a).await, expect_message(&mut a).await].into();
    assert_eq!(live[1].thread_id, Some(root));
    assert_eq!(live[1].reply_to, Some(r1));
    assert_eq!(live[1].mentions, [UserId::new("tc").unwrap()]);
    // The thread pages on its own; its root counts its replies.
    let rest_a = cluster.rest(0, "ta");
    let (_, page) = call(
        &rest_a,
        "GET",
        &format!("/v1/conversations/{group}/messages?thread_id={root_s}"),
        None,
    )
    .await;
    let seqs: Vec<u64> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [r2_seq, r2_seq - 1, root_seq]);
    assert_eq!(page["messages"][2]["thread"]["reply_count"], 2);
    assert_eq!(page["messages"][2]["thread"]["participants"], json!(["tb"]));
    // The thread is a's (started) and b's (replied), with a's unread.
    let threads = |rest: RestClient| {
        let g = group.clone();
        async move {
            call(
                &rest,
                "GET",
                &format!("/v1/conversations/{g}/threads"),
                None,
            )
            .await
            .1
        }
    };
    let mine = threads(cluster.rest(0, "ta")).await;
    assert_eq!(mine["threads"][0]["reply_count"], 2);
    assert_eq!(mine["threads"][0]["unread_count"], 2);
    assert_eq!(
        threads(cluster.rest(0, "tb")).await["threads"][0]["unread_count"],
        0
    );
    assert_eq!(threads(cluster.rest(0, "tc")).await["threads"], json!([]));
    a.send(&ClientFrame::AckRead {
        conversation_id: group.parse().unwrap(),
        seq: r2_seq - 1,
        thread_id: Some(root),
    })
    .await
    .unwrap();
    // A thread root that is not there: an error that says so.
    a.send(&ClientFrame::AckRead {
        conversation_id: group.parse().unwrap(),
        seq: 1,
        thread_id: Some(MessageId::from_u64(42)),
    })
    .await
    .unwrap();
    let (code, _, _, message) = expect_error(&mut a).await;
    assert_eq!(code, ErrorCode::NotFound);
    assert!(message.contains("thread root 42"), "{message}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while threads(cluster.rest(0, "ta")).await["threads"][0]["unread_count"] != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the thread read mark never moved"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // tc was mentioned: counted in the list until read.
    let list = cluster.rest(0, "tc").conversations().await.unwrap();
    let entry = list
        .conversations
        .iter()
        .find(|c| c.conversation_id.as_str() == group)
        .unwrap();
    assert_eq!(entry.mention_count, 1);
    let detail = cluster.rest(0, "tc").conversation(&group).await.unwrap();
    assert_eq!(
        detail.mention_count, 1,
        "GET /v1/conversations/{{id}} counts too"
    );
    // The owner mentions all.
    let all = send_with(
        &mut a,
        &group,
        "t-all",
        "everyone!",
        json!({"mention_all": true}),
    )
    .await;
    assert!(all.is_ok(), "{all:?}");
    let list = cluster.rest(0, "tb").conversations().await.unwrap();
    let entry = list
        .conversations
        .iter()
        .find(|c| c.conversation_id.as_str() == group)
        .unwrap();
    assert_eq!(entry.mention_count, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_the_members_own_and_reach_their_other_devices() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let group = cluster.create(ConversationKind::Group, "sa", &["sb"]).await;
    let mut other_device = cluster.ws(0, "sb", "tablet").await;
    let rest = cluster.rest(0, "sb");
    let path = format!("/v1/conversations/{group}/settings");
    assert_eq!(
        call(&rest, "GET", &path, None).await.1,
        json!({"notifications": "all", "muted_until": null})
    );
    let quiet = json!({"notifications": "mentions", "muted_until": "2099-01-01T00:00:00.000Z"});
    let (status, body) = call(&rest, "PUT", &path, Some(quiet.clone())).await;
    assert_eq!((status, body), (200, quiet.clone()));
    let told = expect(&mut other_device, "settings_changed", |f| match f {
        ServerFrame::SettingsChanged { notifications, .. } => Some(notifications),
        _ => None,
    })
    .await;
    assert_eq!(told, switchboard_protocol::NotificationLevel::Mentions);
    assert_eq!(call(&rest, "GET", &path, None).await.1, quiet);
    let list = rest.conversations().await.unwrap();
    let entry = list
        .conversations
        .iter()
        .find(|c| c.conversation_id.as_str() == group)
        .unwrap();
    assert!(entry.muted);
    assert_eq!(
        entry.notifications,
        switchboard_protocol::NotificationLevel::Mentions
    );
    // Someone else's view is theirs.
    let (_, theirs) = call(&cluster.rest(0, "sa"), "GET", &path, None).await;
    assert_eq!(theirs["notifications"], "all");
    let (status, _) = call(&cluster.rest(0, "stranger"), "PUT", &path, Some(quiet)).await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_are_listed_newest_first_bounded_and_told() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nsends_per_second = 1000.0\nsend_burst = 1000.0\nrest_requests_per_second = 1000.0\nrest_request_burst = 1000.0\n".into(),
        ..Default::default()
    })
    .await;
    let direct = cluster
        .create(ConversationKind::Direct, "pa", &["pb"])
        .await;
    let mut a = cluster.ws(0, "pa", "d").await;
    let b = cluster.ws(0, "pb", "d").await;
    let mut ids = Vec::new();
    for i in 0..51 {
        ids.push(
            send_acked(&mut a, &direct, &format!("p{i}"), &format!("m{i}"))
                .await
                .0,
        );
    }
    // Either side of a direct conversation pins.
    let rest = cluster.rest(0, "pb");
    let pins = format!("/v1/conversations/{direct}/pins");
    for id in &ids[..50] {
        let (status, _) = call(
            &rest,
            "POST",
            &pins,
            Some(json!({"message_id": id.to_string()})),
        )
        .await;
        assert_eq!(status, 204);
    }
    let told = expect(&mut a, "pins_changed", |f| match f {
        ServerFrame::PinsChanged {
            message_id,
            action,
            by,
            ..
        } => Some((message_id, action, by)),
        _ => None,
    })
    .await;
    assert_eq!(told, (ids[0], PinAction::Pin, UserId::new("pb").unwrap()));
    let (status, body) = call(
        &rest,
        "POST",
        &pins,
        Some(json!({"message_id": ids[50].to_string()})),
    )
    .await;
    assert_eq!((status, body["code"].as_str()), (409, Some("conflict")));
    let (_, list) = call(&cluster.rest(0, "pa"), "GET", &pins, None).await;
    let listed = list["pins"].as_array().unwrap();
    assert_eq!(listed.len(), 50);
    assert_eq!(listed[0]["message_id"], ids[49].to_string(), "newest first");
    assert_eq!(listed[0]["message"]["content"]["text"], "m49");
    let (status, _) = call(&rest, "DELETE", &format!("{pins}/{}", ids[0]), None).await;
    assert_eq!(status, 204);
    let (status, _) = call(
        &rest,
        "POST",
        &pins,
        Some(json!({"message_id": ids[50].to_string()})),
    )
    .await;
    assert_eq!(status, 204);
    drop(b.close());
}

/// A device away while everything happened, on a gateway killed in the
/// middle of it: when it comes back its backlog holds the reply, the
/// pin, the role change and the reacted message with its reactions; its
/// list holds its settings (changed from another device).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_was_away_learns_every_change_across_a_gateway_kill() {
    let mut cluster = Cluster::start(ClusterSpec {
        gateways: 2,
        ..Default::default()
    })
    .await;
    let group = cluster.create(ConversationKind::Group, "oa", &["ob"]).await;
    // ob's phone is known, then away throughout.
    let mut phone = cluster.ws(1, "ob", "phone").await;
    let (first, _) = send_acked(&mut cluster.ws(0, "oa", "d").await, &group, "o1", "hello").await;
    let (_, up_to) = expect(&mut phone, "the first message", |f| match f {
        ServerFrame::Message { message } => Some((message.message_id, message.seq)),
        _ => None,
    })
    .await;
    phone
        .send(&ClientFrame::AckDelivered {
            conversation_id: group.parse().unwrap(),
            seq: up_to,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    phone.close().await;

    let mut a = cluster.ws(0, "oa", "d").await;
    a.send(&react_frame(&group, first, "👍", ReactAction::Add))
        .await
        .unwrap();
    expect_reaction(&mut a).await;
    let (_, _) = send_with(
        &mut a,
        &group,
        "o2",
        "a reply",
        json!({"thread_id": first.to_string()}),
    )
    .await
    .unwrap();
    // The gateway a is on dies in the middle; a comes back on the other.
    cluster.gateways[0].kill9().await;
    let mut a = cluster.ws(1, "oa", "d2").await;
    let owner = cluster.rest(1, "oa");
    let (status, _) = call(
        &owner,
        "POST",
        &format!("/v1/conversations/{group}/pins"),
        Some(json!({"message_id": first.to_string()})),
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = call(
        &owner,
        "PATCH",
        &format!("/v1/conversations/{group}/members/ob"),
        Some(json!({"role": "admin"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(
        &cluster.rest(1, "ob"),
        "PUT",
        &format!("/v1/conversations/{group}/settings"),
        Some(json!({"notifications": "none"})),
    )
    .await;
    assert_eq!(status, 200);
    a.send(&react_frame(&group, first, "🎉", ReactAction::Add))
        .await
        .unwrap();
    expect_reaction(&mut a).await;

    // The phone comes back and pulls its backlog.
    let mut phone = cluster.ws(1, "ob", "phone").await;
    let (backlog, _, _) = pull(&mut phone, None, None, None).await;
    let events: Vec<String> = backlog
        .iter()
        .filter_map(|m| match &m.content {
            Some(Content::System(e)) => Some(e.event.clone()),
            _ => None,
        })
        .collect();
    assert!(events.contains(&"message_pinned".to_owned()), "{events:?}");
    assert!(events.contains(&"role_changed".to_owned()), "{events:?}");
    assert!(
        backlog.iter().any(|m| m.thread_id == Some(first)),
        "the reply"
    );
    let reacted = backlog
        .iter()
        .rev()
        .find(|m| m.message_id == first)
        .expect("the reacted message");
    let emoji: Vec<&str> = reacted.reactions.iter().map(|r| r.emoji.as_str()).collect();
    assert_eq!(emoji, ["👍", "🎉"]);
    let list = cluster.rest(1, "ob").conversations().await.unwrap();
    let entry = list
        .conversations
        .iter()
        .find(|c| c.conversation_id.as_str() == group)
        .unwrap();
    assert_eq!(
        entry.notifications,
        switchboard_protocol::NotificationLevel::None
    );
}

/// A channel that fans out on read (past `fanout_threshold`): a burst of
/// reactions reaches a member as few events carrying every count, the
/// reactor as one event each; a mentioned member who is away still gets
/// the message in their inbox and counted in their list, where the
/// others, unmentioned, get no inbox entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_channel_coalesces_reactions_and_still_reaches_the_mentioned() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "fanout_threshold = 3\n".into(),
        ..Default::default()
    })
    .await;
    // Away phones that the gateway knows (they said hello once).
    for user in ["lc", "ld"] {
        cluster.ws(0, user, "phone").await.close().await;
    }
    let channel = cluster
        .create(ConversationKind::Channel, "la", &["lb", "lc", "ld"])
        .await;
    let mut a = cluster.ws(0, "la", "d").await;
    let mut b = cluster.ws(0, "lb", "d").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (mid, _) = send_acked(&mut a, &channel, "l1", "react to me").await;
    expect_message(&mut b).await;

    const BURST: usize = 15;
    for i in 0..BURST {
        a.send(&react_frame(
            &channel,
            mid,
            &format!(":r{i}:"),
            ReactAction::Add,
        ))
        .await
        .unwrap();
    }
    // The reactor hears each of its own at once, in order.
    let mut own = 0;
    while own < BURST {
        let (who, emoji, _, _) = expect_reaction(&mut a).await;
        if who == "la" && emoji == format!(":r{own}:") {
            own += 1;
        }
    }
    // Another member gets the burst coalesced: the last event carries
    // every count, and there are fewer events than reactions.
    let mut events = 0;
    loop {
        let (_, _, _, counts) = expect_reaction(&mut b).await;
        events += 1;
        if counts.as_object().unwrap().len() == BURST {
            break;
        }
    }
    assert!(
        events < BURST,
        "{events} reaction events for {BURST} reactions"
    );

    // A mention reaches the away member's inbox; the unmentioned do not
    // get one (the channel fans out on read).
    send_with(
        &mut a,
        &channel,
        "l2",
        "lc, look",
        json!({"mentions": ["lc"]}),
    )
    .await
    .unwrap();
    let mut lc = cluster.ws(0, "lc", "phone").await;
    let (inbox, _, _) = pull(&mut lc, None, None, None).await;
    let texts: Vec<&str> = inbox.iter().map(text_of).collect();
    assert_eq!(texts, ["lc, look"]);
    let mut ld = cluster.ws(0, "ld", "phone").await;
    let (inbox, _, _) = pull(&mut ld, None, None, None).await;
    assert!(inbox.is_empty(), "{inbox:?}");
    let list = cluster.rest(0, "lc").conversations().await.unwrap();
    let entry = list
        .conversations
        .iter()
        .find(|c| c.conversation_id.as_str() == channel)
        .unwrap();
    assert_eq!(entry.mention_count, 1);
}
