//! I6: bad input gets the documented error; the connection and the server
//! keep working for everyone. Also the auth refusals of F20.

use switchboard_client::token::{TokenSpec, mint_eddsa, mint_hs256};
use switchboard_client::{RestClient, WsClient, WsError};
use switchboard_protocol::ConversationKind;
use switchboard_protocol::SendAck;
use switchboard_tests::cluster::{ED_SEED, OTHER_SECRET, OTHER_TENANT};
use switchboard_tests::{Cluster, ClusterSpec, SECRET, TENANT};

use crate::support::*;

#[tokio::test]
async fn bad_frames_get_errors_and_the_connection_lives_on() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut ws = cluster.ws(0, "alice", "phone").await;
    let mut bystander = cluster.ws(0, "bob", "b").await;

    let check = |expected: &'static str| {
        move |(code, _, _, message): (
            switchboard_protocol::ErrorCode,
            Option<String>,
            Option<String>,
            String,
        )| {
            assert_eq!(code.as_str(), expected, "{message}");
            message
        }
    };

    ws.send_text("{not json").await.unwrap();
    let message = check("invalid_frame")(expect_error(&mut ws).await);
    assert!(message.contains("not valid JSON"), "{message}");
    assert_alive(&mut ws).await;

    ws.send_text(r#"{"type":"teleport"}"#).await.unwrap();
    let message = check("invalid_frame")(expect_error(&mut ws).await);
    assert!(message.contains("teleport"));

    ws.send_text(r#"{"type":"send_message","client_msg_id":"c1","conversation_id":"x"}"#)
        .await
        .unwrap();
    let (code, request, id, message) = expect_error(&mut ws).await;
    assert_eq!(code.as_str(), "invalid_frame");
    assert!(message.contains("content"), "{message}");
    assert_eq!(request.as_deref(), Some("send_message"));
    assert_eq!(
        id.as_deref(),
        Some("c1"),
        "the error names the request it answers"
    );

    ws.send_text(r#"{"type":"ack_delivered","conversation_id":"x","seq":"seven"}"#)
        .await
        .unwrap();
    check("invalid_frame")(expect_error(&mut ws).await);

    ws.send_text(r#"{"type":"send_message","client_msg_id":"c2","conversation_id":"bad id!","content":{"kind":"text","text":"x"}}"#).await.unwrap();
    check("invalid_frame")(expect_error(&mut ws).await);

    ws.send_text(r#"{"type":"send_message","client_msg_id":"c3","conversation_id":"x","content":{"kind":"system","event":"x","actor":"a"}}"#).await.unwrap();
    check("invalid_frame")(expect_error(&mut ws).await);

    ws.send_binary(vec![1, 2, 3]).await.unwrap();
    check("invalid_frame")(expect_error(&mut ws).await);

    // Over the frame limit (64 KiB by default).
    let big = "x".repeat(70 * 1024);
    ws.send_text(format!(
        r#"{{"type":"send_message","client_msg_id":"big","conversation_id":"{conv}","content":{{"kind":"text","text":"{big}"}}}}"#
    ))
    .await
    .unwrap();
    let (code, _, id, _) = expect_error(&mut ws).await;
    assert_eq!((code.as_str(), id.as_deref()), ("too_large", Some("big")));

    // Over the text limit (16 KiB) but inside the frame limit.
    ws.send(&send_frame(&conv, "long", &"y".repeat(20 * 1024)))
        .await
        .unwrap();
    let (code, _, id, _) = expect_error(&mut ws).await;
    assert_eq!((code.as_str(), id.as_deref()), ("too_large", Some("long")));

    // Unknown conversation, and one the sender does not belong to.
    ws.send(&send_frame("nowhere", "n1", "hi")).await.unwrap();
    let (code, _, id, _) = expect_error(&mut ws).await;
    assert_eq!((code.as_str(), id.as_deref()), ("not_found", Some("n1")));
    let theirs = cluster
        .create(ConversationKind::Direct, "carol", &["dave"])
        .await;
    ws.send(&send_frame(&theirs, "n2", "hi")).await.unwrap();
    let (code, _, id, _) = expect_error(&mut ws).await;
    assert_eq!((code.as_str(), id.as_deref()), ("not_a_member", Some("n2")));

    // After all that, the connection still sends and the other user receives.
    send_acked(&mut ws, &conv, "ok", "still here").await;
    let m = expect_message(&mut bystander).await;
    assert_eq!(text_of(&m), "still here");

    // Past the hard limit (1 MiB) the connection is closed, not buffered;
    // everyone else is unaffected.
    let huge = "z".repeat(1100 * 1024);
    let _ = ws.send_text(huge).await;
    let closed = loop {
        match ws.next_frame_within(WAIT).await {
            Ok(_) => continue,
            Err(WsError::Timeout(_)) => break false,
            Err(_) => break true,
        }
    };
    assert!(closed, "a frame over the hard limit ends the connection");
    assert_alive(&mut bystander).await;
}

#[tokio::test]
async fn tokens_are_checked() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let url = cluster.gateways[0].ws();
    let refused = |r: Result<WsClient, WsError>| match r {
        Err(WsError::Refused { status, body }) => {
            assert!(body.contains("unauthorized"), "{body}");
            status
        }
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, got a connection"),
    };
    let expired = mint_hs256(
        SECRET,
        &TokenSpec {
            exp: 1_000,
            ..TokenSpec::new(TENANT, "alice", None, 0)
        },
    )
    .unwrap();
    assert_eq!(
        refused(switchboard_tests::connect_ws(&url, &expired).await),
        401
    );
    let wrong_key = mint_hs256(OTHER_SECRET, &TokenSpec::new(TENANT, "alice", None, 60)).unwrap();
    assert_eq!(
        refused(switchboard_tests::connect_ws(&url, &wrong_key).await),
        401
    );
    let unknown_tenant = mint_hs256(SECRET, &TokenSpec::new("initech", "alice", None, 60)).unwrap();
    assert_eq!(
        refused(switchboard_tests::connect_ws(&url, &unknown_tenant).await),
        401
    );
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let none = format!(
        "{}.{}.",
        b64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(format!(
            r#"{{"tenant":"{TENANT}","sub":"alice","exp":9999999999}}"#
        ))
    );
    assert_eq!(
        refused(switchboard_tests::connect_ws(&url, &none).await),
        401
    );
    assert_eq!(refused(switchboard_tests::connect_ws(&url, "").await), 401);

    // EdDSA tokens with the tenant's Ed25519 key are accepted.
    let ed = mint_eddsa(&ED_SEED, &TokenSpec::new(TENANT, "alice", None, 60)).unwrap();
    let mut ws = switchboard_tests::connect_ws(&url, &ed).await.unwrap();
    assert_alive(&mut ws).await;
    // ...but not with another key.
    let other_ed = mint_eddsa(&[9; 32], &TokenSpec::new(TENANT, "alice", None, 60)).unwrap();
    assert_eq!(
        refused(switchboard_tests::connect_ws(&url, &other_ed).await),
        401
    );

    // REST says the same in JSON.
    let rest = RestClient::new(&cluster.gateways[0].http(), &expired);
    let e = rest.conversations().await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(401), Some("unauthorized")));
    let anonymous = cluster
        .rest(0, "alice")
        .raw()
        .get(format!("{}/v1/conversations", cluster.gateways[0].http()))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

#[tokio::test]
async fn bad_rest_requests_get_json_errors() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let rest = cluster.rest(0, "alice");
    let base = cluster.gateways[0].http();
    let post = |body: String| {
        rest.raw()
            .post(format!("{base}/v1/conversations"))
            .bearer_auth(rest.token())
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for (body, status, code) in [
        ("{nope".to_owned(), 400, "invalid_request"),
        (r#"{"kind":"triangle"}"#.to_owned(), 400, "invalid_request"),
        (
            r#"{"kind":"direct","members":["b","c"]}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (
            r#"{"kind":"direct","members":[]}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (
            r#"{"kind":"group","members":["bad id"]}"#.to_owned(),
            400,
            "invalid_request",
        ),
        (
            format!(r#"{{"kind":"group","title":"{}"}}"#, "t".repeat(300)),
            400,
            "invalid_request",
        ),
        (
            format!(r#"{{"kind":"group","title":"{}"}}"#, "t".repeat(100_000)),
            413,
            "too_large",
        ),
    ] {
        let r = post(body.clone()).await.unwrap();
        assert_eq!(
            r.status().as_u16(),
            status,
            "{}",
            &body[..body.len().min(60)]
        );
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["code"], code, "{v}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let r = rest
        .raw()
        .get(format!("{base}/v1/nothing-here"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["code"], "not_found");
    let r = rest
        .raw()
        .get(format!("{base}/v1/conversations/x/messages?limit=many"))
        .bearer_auth(rest.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // A production gateway mints no tokens.
    let r = rest
        .raw()
        .post(format!("{base}/v1/dev/token"))
        .json(&serde_json::json!({"user": "mallory"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    // And the server is fine.
    cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let ready = rest
        .raw()
        .get(format!("{base}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
}

#[tokio::test]
async fn sends_over_the_rate_limit_are_refused_not_dropped() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nsends_per_second = 1.0\nsend_burst = 3.0\n".into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut ws = cluster.ws(0, "alice", "a").await;
    for i in 0..5 {
        ws.send(&send_frame(&conv, &format!("r{i}"), "x"))
            .await
            .unwrap();
    }
    let mut acked = 0;
    let mut limited = 0;
    while acked + limited < 5 {
        match expect(&mut ws, "ack or error", |f| match f {
            switchboard_protocol::ServerFrame::Ack(SendAck { .. }) => Some(true),
            switchboard_protocol::ServerFrame::Error { code, .. } => {
                assert_eq!(code.as_str(), "rate_limited");
                Some(false)
            }
            _ => None,
        })
        .await
        {
            true => acked += 1,
            false => limited += 1,
        }
    }
    assert_eq!((acked, limited), (3, 2));
}

#[tokio::test]
async fn tenants_do_not_see_each_other() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    // The same user ids in two tenants get the same direct conversation id.
    let acme = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let globex_token =
        |u: &str| mint_hs256(OTHER_SECRET, &TokenSpec::new(OTHER_TENANT, u, None, 60)).unwrap();
    let globex_alice = RestClient::new(&cluster.gateways[0].http(), &globex_token("alice"));
    let (g, _) = globex_alice
        .create_conversation(ConversationKind::Direct, &["bob"], None)
        .await
        .unwrap();
    assert_eq!(g.conversation_id.as_str(), acme);

    let mut acme_alice = cluster.ws(0, "alice", "a").await;
    let mut globex_bob =
        switchboard_tests::connect_ws(&cluster.gateways[0].ws(), &globex_token("bob"))
            .await
            .unwrap();
    let mut acme_bob = cluster.ws(0, "bob", "b").await;
    send_acked(&mut acme_alice, &acme, "iso-1", "acme only").await;
    let m = expect_message(&mut acme_bob).await;
    assert_eq!(text_of(&m), "acme only");
    // Globex's bob hears nothing, and globex's history is empty.
    assert!(matches!(
        globex_bob
            .next_frame_within(std::time::Duration::from_millis(500))
            .await,
        Err(WsError::Timeout(_))
    ));
    let page = globex_alice
        .history(&acme, Default::default())
        .await
        .unwrap();
    assert!(page.messages.is_empty());
}
