//! Edge hardening: what one hostile client, stranger or browser page can
//! cost a gateway. Every limit here is set low in the test's configuration
//! and met from outside, over real sockets.

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use switchboard_protocol::SendAck;

use serde_json::{Value, json};
use switchboard_client::{TokenSpec, WsClient, WsError, mint_hs256};
use switchboard_protocol::{ClientFrame, ConversationId, ConversationKind, ErrorCode, ServerFrame};
use switchboard_tests::cluster::{OPERATOR_TOKEN, SECRET};
use switchboard_tests::{Cluster, ClusterSpec, TENANT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::*;

/// The gateway process's resident memory, in bytes.
fn rss_bytes(cluster: &Cluster) -> u64 {
    let pid = cluster.gateways[0].pid().expect("the gateway runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

fn gateway_addr(cluster: &Cluster) -> SocketAddr {
    cluster.gateways[0]
        .http()
        .trim_start_matches("http://")
        .parse()
        .unwrap()
}

/// A TCP connection to the gateway from `source` (any 127.0.0.0/8
/// address: each is another client address to the gateway).
async fn connect_from(cluster: &Cluster, source: [u8; 4]) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(gateway_addr(cluster)).await.unwrap()
}

/// Everything the server sends until it closes (or `within` passes):
/// the text, and whether it closed.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), false),
        }
    }
}

/// The first response line and headers the server sends, waiting at most
/// `within`.
async fn response_head(stream: &mut TcpStream, within: Duration) -> String {
    let deadline = tokio::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_never_read_cost_a_bounded_amount_and_are_let_go() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nslow_client_timeout_ms = 2000\nsends_per_second = 100000.0\nsend_burst = 100000.0\nsends_per_second_per_user = 100000.0\nsend_burst_per_user = 100000.0\nmax_connections_per_ip = 1000\n"
            .into(),
        ..Default::default()
    })
    .await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    // 15 MB of history: more than the kernel buffers a socket on loopback.
    let mut alice = cluster.ws(0, "alice", "phone").await;
    let n = 1000;
    send_in_bursts(&mut alice, &conv, n, 50, &"x".repeat(15_000)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_bytes(&cluster);
    // Ten sockets ask for all of it and never read a byte: without a
    // bound in bytes each would hold its whole 15 MB replay.
    let pull = ClientFrame::PullBacklog {
        conversation_id: Some(ConversationId::new(conv.clone()).unwrap()),
        since_seq: Some(0),
        limit: Some(1000),
    };
    let mut silent = Vec::new();
    for i in 0..10 {
        let mut ws = cluster.ws(0, "bob", &format!("d{i}")).await;
        ws.send(&pull).await.unwrap();
        silent.push(ws);
    }
    let mut peak = before;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        peak = peak.max(rss_bytes(&cluster));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let grown = peak.saturating_sub(before);
    eprintln!("gateway RSS {before} before, peak {peak}: +{grown} for 10 silent readers");
    assert!(
        grown < 60 << 20,
        "ten readers that never read grew the gateway by {grown} bytes"
    );
    // Each was let go: what it is still to read ends in a close (1013),
    // or the socket is gone.
    for mut ws in silent {
        let ended = loop {
            match ws.next_frame_within(Duration::from_secs(10)).await {
                Ok(_) => {}
                Err(WsError::ClosedBy { code, .. }) => break code == 1013,
                Err(WsError::Closed | WsError::Socket(_)) => break true,
                Err(e) => panic!("a silent reader was not let go: {e}"),
            }
        };
        assert!(ended, "closed with 1013");
    }
    assert!(cluster.logs().contains("slow-client timeout"));
    // The replay is whole for a reader that keeps up.
    let mut bob = cluster.ws(0, "bob", "phone").await;
    let (all, last, more) = pull_all(&mut bob, &conv).await;
    assert_eq!((all, last, more), (n, n as u64, false));
}

/// Pulls a conversation's backlog from 0 at the limit's maximum: how
/// many messages came, the last `seq`, and `more`.
async fn pull_all(ws: &mut WsClient, conv: &str) -> (usize, u64, bool) {
    let (messages, last, more) = pull(ws, Some(conv), Some(0), Some(1000)).await;
    (messages.len(), last, more)
}

#[tokio::test]
async fn a_silent_peer_is_let_go_at_the_pong_deadline() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nping_interval_ms = 300\npong_timeout_ms = 600\n".into(),
        ..Default::default()
    })
    .await;
    let mut silent = cluster.ws(0, "alice", "phone").await;
    let mut lively = cluster.ws(0, "alice", "laptop").await;
    // The lively one reads (and so answers pings) meanwhile; the silent
    // one reads nothing.
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        let _ = lively.next_frame_within(Duration::from_millis(100)).await;
    }
    assert_alive(&mut lively).await;
    // Reading now, it finds the pings it never answered and then the
    // close (1001), or, answering a ping on a socket already closed, a
    // broken pipe.
    loop {
        match silent.next_frame_within(Duration::from_secs(5)).await {
            Ok(_) => {}
            Err(WsError::ClosedBy { code, .. }) => {
                assert_eq!(code, 1001, "closed for not answering pings");
                break;
            }
            Err(WsError::Socket(_) | WsError::Closed) => break,
            Err(e) => panic!("expected a close, got {e}"),
        }
    }
}

fn short_token(user: &str, device: &str, ttl_secs: u64) -> String {
    mint_hs256(
        SECRET,
        &TokenSpec::new(TENANT, user, Some(device), ttl_secs),
    )
    .unwrap()
}

#[tokio::test]
async fn sessions_end_with_their_token_unless_refreshed() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\ntoken_expiry_grace_ms = 1000\n".into(),
        ..Default::default()
    })
    .await;
    let ws_url = cluster.gateways[0].ws();
    let mut expiring = switchboard_tests::connect_ws(&ws_url, &short_token("alice", "phone", 2))
        .await
        .unwrap();
    let mut refreshed = switchboard_tests::connect_ws(&ws_url, &short_token("alice", "laptop", 2))
        .await
        .unwrap();
    // A token for someone else, or one that does not verify, is refused
    // and the session goes on.
    let wrong_user = ClientFrame::Refresh {
        token: short_token("bob", "laptop", 60),
    };
    refreshed.send(&wrong_user).await.unwrap();
    let (code, request, _, _) = expect_error(&mut refreshed).await;
    assert_eq!(
        (code, request.as_deref()),
        (ErrorCode::Forbidden, Some("refresh"))
    );
    refreshed
        .send(&ClientFrame::Refresh {
            token: "not.a.token".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        expect_error(&mut refreshed).await.0,
        ErrorCode::Unauthorized
    );
    refreshed
        .send(&ClientFrame::Refresh {
            token: short_token("alice", "laptop", 60),
        })
        .await
        .unwrap();
    expect(&mut refreshed, "refreshed", |f| match f {
        ServerFrame::Refreshed { .. } => Some(()),
        _ => None,
    })
    .await;
    // Past exp and the grace: the first is closed (4001), the refreshed
    // one still served.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let code = loop {
        match expiring.next_frame_within(Duration::from_secs(5)).await {
            Ok(_) => {}
            Err(WsError::ClosedBy { code, .. }) => break code,
            Err(e) => panic!("expected a close, got {e}"),
        }
    };
    assert_eq!(code, 4001);
    assert_alive(&mut refreshed).await;
    // A token past its exp and the grace opens nothing.
    let mut spec = TokenSpec::new(TENANT, "alice", Some("tablet"), 0);
    spec.exp -= 3;
    let expired = mint_hs256(SECRET, &spec).unwrap();
    match switchboard_tests::connect_ws(&ws_url, &expired).await {
        Err(WsError::Refused { status, .. }) => assert_eq!(status, 401),
        other => panic!("an expired token was let in: {:?}", other.err()),
    }
}

#[tokio::test]
async fn removing_a_key_or_the_tenant_closes_its_sessions() {
    let cluster = Cluster::start(ClusterSpec::with_operator_api()).await;
    let path = "/v1/operator/tenants";
    let (old, new) = (
        "initech-old-secret-0123456789",
        "initech-new-secret-0123456789",
    );
    let (status, _) = cluster
        .operator(
            reqwest::Method::POST,
            path,
            Some(json!({"id": "initech", "hs256_secrets": [old, new]})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    let ws_url = cluster.gateways[0].ws();
    let token = |secret: &str, user: &str| {
        mint_hs256(secret, &TokenSpec::new("initech", user, Some("d"), 600)).unwrap()
    };
    // The tenant's record reaches the gateway within moments.
    let mut on_old = loop {
        match switchboard_tests::connect_ws(&ws_url, &token(old, "alice")).await {
            Ok(ws) => break ws,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    let mut on_new = switchboard_tests::connect_ws(&ws_url, &token(new, "bob"))
        .await
        .unwrap();
    let (status, _) = cluster
        .operator(
            reqwest::Method::PATCH,
            "/v1/operator/tenants/initech",
            Some(json!({"remove_hs256_secrets": [old]})),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        closed_within(&mut on_old, Duration::from_secs(5)).await,
        4003
    );
    assert_alive(&mut on_new).await;
    let (status, _) = cluster
        .operator(
            reqwest::Method::DELETE,
            "/v1/operator/tenants/initech",
            None,
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(
        closed_within(&mut on_new, Duration::from_secs(5)).await,
        4003
    );
}

#[tokio::test]
async fn slow_and_idle_http_connections_are_closed() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nhttp_header_timeout_ms = 800\nhttp_idle_timeout_ms = 800\nhttp_body_timeout_ms = 800\n".into(),
        ..Default::default()
    })
    .await;
    // Half a request head, then nothing.
    let mut half = connect_from(&cluster, [127, 0, 0, 1]).await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let (_, closed) = read_until_closed(&mut half, Duration::from_secs(5)).await;
    assert!(closed, "a half-sent head is not waited for");
    assert!(started.elapsed() < Duration::from_secs(3));

    // A served request, then an idle keep-alive connection.
    let mut idle = connect_from(&cluster, [127, 0, 0, 1]).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = response_head(&mut idle, Duration::from_secs(5)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let started = Instant::now();
    let (_, closed) = read_until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(closed, "an idle keep-alive connection is closed");
    assert!(started.elapsed() < Duration::from_secs(3));

    // A body that stops half-way.
    let token = cluster.token("alice", "phone");
    let mut stalled = connect_from(&cluster, [127, 0, 0, 1]).await;
    let head = format!(
        "POST /v1/conversations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"kind\":"
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut stalled, Duration::from_secs(5)).await;
    assert!(
        closed || answer.starts_with("HTTP/1.1 4"),
        "a stalled body is not waited for: {answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn connections_are_capped_per_address_and_per_gateway() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nmax_connections_per_ip = 2\nmax_connections = 4\n".into(),
        ..Default::default()
    })
    .await;
    let healthy = |mut s: TcpStream| async move {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let head = response_head(&mut s, Duration::from_secs(5)).await;
        (head, s)
    };
    // Two from one address, at its cap.
    let a1 = connect_from(&cluster, [127, 0, 0, 2]).await;
    let a2 = connect_from(&cluster, [127, 0, 0, 2]).await;
    let (head, a1) = healthy(a1).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _a2) = healthy(a2).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // A third from it is answered 429 at once and closed.
    let mut a3 = connect_from(&cluster, [127, 0, 0, 2]).await;
    let (answer, closed) = read_until_closed(&mut a3, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("rate_limited"), "{answer}");
    assert!(closed);
    // Two more from another address fill the gateway...
    let (head, _b1) = healthy(connect_from(&cluster, [127, 0, 0, 3]).await).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _b2) = healthy(connect_from(&cluster, [127, 0, 0, 3]).await).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // ...so a fifth, from anywhere, gets 503, even a WebSocket upgrade.
    let mut c1 = connect_from(&cluster, [127, 0, 0, 4]).await;
    let (answer, _) = read_until_closed(&mut c1, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("unavailable"), "{answer}");
    // A place given back is taken again.
    drop(a1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (head, _) = healthy(connect_from(&cluster, [127, 0, 0, 4]).await).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[tokio::test]
async fn uploads_are_checked_before_their_body_and_media_is_served_inert() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let alice = cluster.rest(0, "alice");
    // A bogus token with a 25 MB body: refused from the head alone.
    let mut bogus = connect_from(&cluster, [127, 0, 0, 1]).await;
    bogus
        .write_all(
            b"PUT /v1/blobs/bogus.token HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 26214400\r\n\r\n",
        )
        .await
        .unwrap();
    let head = response_head(&mut bogus, Duration::from_secs(3)).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");

    // A real grant, and a declared length that is not the granted size.
    let svg =
        br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#.to_vec();
    let grant = |mime: &'static str, size: usize| {
        let alice = alice.clone();
        async move {
            let r = alice
                .raw()
                .post(format!("{}/v1/media", alice.base()))
                .bearer_auth(alice.token())
                .json(&json!({"mime": mime, "size": size}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 201);
            r.json::<Value>().await.unwrap()
        }
    };
    let ticket = grant("image/svg+xml", svg.len()).await;
    let url = ticket["upload_url"].as_str().unwrap().to_owned();
    let path = url
        .split_once("/v1/")
        .map(|(_, p)| format!("/v1/{p}"))
        .unwrap();
    let mut wrong_length = connect_from(&cluster, [127, 0, 0, 1]).await;
    wrong_length
        .write_all(
            format!(
                "PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Type: image/svg+xml\r\nContent-Length: {}\r\n\r\n",
                svg.len() + 1
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let head = response_head(&mut wrong_length, Duration::from_secs(3)).await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");

    // Uploaded as granted, then served: never inline, never sniffed.
    let r = reqwest::Client::new()
        .put(&url)
        .header("content-type", "image/svg+xml")
        .body(svg.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let blob_ref = ticket["blob_ref"].as_str().unwrap();
    let location = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/v1/media/{blob_ref}", alice.base()))
        .bearer_auth(alice.token())
        .send()
        .await
        .unwrap()
        .headers()["location"]
        .to_str()
        .unwrap()
        .to_owned();
    let served = reqwest::get(&location).await.unwrap();
    let h = served.headers();
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["content-disposition"], "attachment");
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );
    assert_eq!(served.bytes().await.unwrap().to_vec(), svg);

    // Every REST answer carries the security headers.
    let r = alice
        .raw()
        .get(format!("{}/v1/conversations", alice.base()))
        .bearer_auth(alice.token())
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert!(r.headers().contains_key("content-security-policy"));
}

const APP_ORIGIN: &str = "https://app.example";

#[tokio::test]
async fn browsers_may_call_from_their_tenants_origins_only() {
    let initech_secret = "initech-secret-0123456789";
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "[[tenants]]\nid = \"initech\"\nhs256_secrets = [\"{initech_secret}\"]\nallowed_origins = [\"{APP_ORIGIN}\"]\n"
        ),
        ..Default::default()
    })
    .await;
    let base = cluster.gateways[0].http();
    let http = reqwest::Client::new();
    let initech = mint_hs256(
        initech_secret,
        &TokenSpec::new("initech", "alice", Some("web"), 600),
    )
    .unwrap();
    let acme = cluster.token("alice", "web");
    // The preflight: allowed for an origin a tenant lists.
    let preflight = |origin: &'static str| {
        http.request(reqwest::Method::OPTIONS, format!("{base}/v1/conversations"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    let ok = preflight(APP_ORIGIN).await.unwrap();
    assert_eq!(ok.status().as_u16(), 204);
    assert_eq!(ok.headers()["access-control-allow-origin"], APP_ORIGIN);
    let evil = preflight("https://evil.example").await.unwrap();
    assert_eq!(evil.status().as_u16(), 403);
    assert!(!evil.headers().contains_key("access-control-allow-origin"));
    // The request itself: the token's tenant must list the origin.
    let list = |token: &str, origin: &str| {
        http.get(format!("{base}/v1/conversations"))
            .bearer_auth(token)
            .header("origin", origin)
            .send()
    };
    let r = list(&initech, APP_ORIGIN).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], APP_ORIGIN);
    assert_eq!(
        list(&acme, APP_ORIGIN).await.unwrap().status().as_u16(),
        403
    );
    // Same-origin pages (the dev web client) and native clients are not
    // affected.
    assert_eq!(list(&acme, &base).await.unwrap().status().as_u16(), 200);
    // A WebSocket from a page on a foreign origin is refused before the
    // upgrade; from the tenant's own it opens.
    let upgrade = |token: &str, origin: &str| {
        http.get(format!("{base}/v1/ws?token={token}"))
            .header("origin", origin)
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
            .send()
    };
    let refused = upgrade(&initech, "https://evil.example").await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    let opened = upgrade(&initech, APP_ORIGIN).await.unwrap();
    assert_eq!(opened.status().as_u16(), 101);
}

#[tokio::test]
async fn direct_conversation_ids_are_unique_per_pair() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let create = |user: &str, with: &str| {
        let rest = cluster.rest(0, user);
        let with = with.to_owned();
        async move {
            rest.create_conversation(ConversationKind::Direct, &[with.as_str()], None)
                .await
                .unwrap()
        }
    };
    let (first, created_first) = create("a:b", "c").await;
    let (second, created_second) = create("a", "b:c").await;
    assert!(created_first && created_second, "both are new");
    assert_ne!(first.conversation_id, second.conversation_id);
    // Each pair still finds its own again, whoever asks.
    let (again, created) = create("c", "a:b").await;
    assert!(!created);
    assert_eq!(again.conversation_id, first.conversation_id);
}

#[tokio::test]
async fn history_after_the_largest_seq_is_empty_not_an_error() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let rest = cluster.rest(0, "alice");
    for after in [u64::MAX, u64::MAX - 1] {
        let r = rest
            .raw()
            .get(format!(
                "{}/v1/conversations/{conv}/messages?after_seq={after}",
                rest.base()
            ))
            .bearer_auth(rest.token())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let page: Value = r.json().await.unwrap();
        assert_eq!(page["messages"], json!([]));
    }
}

#[tokio::test]
async fn a_refused_send_is_answered_again_when_resent() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let conv = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    // Carol is no member: the writer refuses her send.
    let mut carol = cluster.ws(0, "carol", "phone").await;
    let frame = send_frame(&conv, "c1", "let me in");
    carol.send(&frame).await.unwrap();
    let (code, _, id, _) = expect_error(&mut carol).await;
    assert_eq!((code, id.as_deref()), (ErrorCode::NotAMember, Some("c1")));
    // She lost the answer and resends it: JetStream drops the resend as a
    // duplicate, and the gateway answers from the writer's refusal.
    let mut carol = cluster.ws(0, "carol", "phone").await;
    carol.send(&frame).await.unwrap();
    let (code, _, id, _) = expect_error(&mut carol).await;
    assert_eq!((code, id.as_deref()), (ErrorCode::NotAMember, Some("c1")));
}

/// `POST /v1/media` for `size` bytes of a PNG: the status.
async fn grant_status(rest: &switchboard_client::RestClient, size: u64) -> u16 {
    rest.raw()
        .post(format!("{}/v1/media", rest.base()))
        .bearer_auth(rest.token())
        .json(&json!({"mime": "image/png", "size": size}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn quotas_bound_what_one_user_can_spend() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: "[limits]\nmax_connections_per_user = 2\nrest_requests_per_second = 0.01\nrest_request_burst = 3.0\nacks_per_second = 0.01\nack_burst = 2.0\nmembers_added_per_minute = 3.0\nuploads_per_minute = 2.0\nupload_bytes_per_hour_per_user = 1000\nupload_bytes_per_hour_per_tenant = 1500\n".into(),
        ..Default::default()
    })
    .await;
    // Connections per user, on without a tenant quota: two, not three.
    let _c1 = cluster.ws(0, "conn", "d1").await;
    let _c2 = cluster.ws(0, "conn", "d2").await;
    match switchboard_tests::connect_ws(&cluster.gateways[0].ws(), &cluster.token("conn", "d3"))
        .await
    {
        Err(WsError::Refused { status, body }) => {
            assert_eq!(status, 429);
            assert!(body.contains("quota_exceeded"), "{body}");
        }
        other => panic!("a third connection was let in: {:?}", other.err()),
    }
    // REST requests per user: the burst, then 429.
    let rest = cluster.rest(0, "busy");
    for _ in 0..3 {
        rest.conversations().await.unwrap();
    }
    let refused = rest.conversations().await.unwrap_err();
    assert_eq!(refused.status(), Some(429));
    // Members added per minute: three in a create, none after.
    let adder = cluster.rest(0, "adder");
    let (group, _) = adder
        .create_conversation(ConversationKind::Group, &["m1", "m2", "m3"], None)
        .await
        .unwrap();
    let more = adder
        .add_members(group.conversation_id.as_str(), &["m4"])
        .await
        .unwrap_err();
    assert_eq!(more.status(), Some(429));
    // Acks per connection: the burst, then an error; the connection stays.
    let conv = group.conversation_id.as_str().to_owned();
    let mut m1 = cluster.ws(0, "m1", "phone").await;
    for seq in 1..=2 {
        m1.send(&ClientFrame::AckRead {
            conversation_id: ConversationId::new(conv.clone()).unwrap(),
            seq,
            thread_id: None,
        })
        .await
        .unwrap();
    }
    m1.send(&ClientFrame::AckRead {
        conversation_id: ConversationId::new(conv.clone()).unwrap(),
        seq: 3,
        thread_id: None,
    })
    .await
    .unwrap();
    let (code, request, _, _) = expect_error(&mut m1).await;
    assert_eq!(
        (code, request.as_deref()),
        (ErrorCode::RateLimited, Some("ack_read"))
    );
    assert_alive(&mut m1).await;
    // Uploads: two grants a minute; bytes per hour per user and per tenant.
    let up = cluster.rest(0, "uploader");
    assert_eq!(grant_status(&up, 100).await, 201);
    assert_eq!(grant_status(&up, 100).await, 201);
    assert_eq!(grant_status(&up, 100).await, 429);
    let big = cluster.rest(0, "big");
    assert_eq!(grant_status(&big, 1000).await, 201);
    assert_eq!(
        grant_status(&big, 1).await,
        429,
        "the user's bytes are spent"
    );
    let other = cluster.rest(0, "other");
    assert_eq!(
        grant_status(&other, 400).await,
        429,
        "the tenant's bytes are spent"
    );
    assert_eq!(grant_status(&other, 200).await, 201);
}

#[tokio::test]
async fn a_command_that_cannot_be_applied_is_parked_and_its_partition_goes_on() {
    // One partition: both conversations share one writer.
    let mut cluster = Cluster::start(ClusterSpec {
        partitions: 1,
        ..Default::default()
    })
    .await;
    let damaged = cluster
        .create(ConversationKind::Group, "alice", &["bob"])
        .await;
    let healthy = cluster
        .create(ConversationKind::Group, "alice", &["carol"])
        .await;
    let mut alice = cluster.ws(0, "alice", "phone").await;
    send_acked(&mut alice, &damaged, "d0", "before").await;
    send_acked(&mut alice, &healthy, "h0", "before").await;
    cluster
        .wait_for_writers_acked(1, Duration::from_secs(10))
        .await;
    // One conversation's row is damaged on disk (its worker stopped
    // meanwhile): every command for it now fails the same way.
    swap_conversation_row(&mut cluster, &damaged, b"{ not a row".to_vec()).await;
    // A send there is set aside, and its sender told...
    alice
        .send(&send_frame(&damaged, "d1", "after"))
        .await
        .unwrap();
    let (code, _, id, message) = expect_error(&mut alice).await;
    assert_eq!(
        (code, id.as_deref()),
        (ErrorCode::Internal, Some("d1")),
        "{message}"
    );
    // ...and the partition goes on with the other conversation.
    send_acked(&mut alice, &healthy, "h1", "after").await;
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let mut parked = js.get_stream("SB_PARKED").await.unwrap();
    assert_eq!(parked.info().await.unwrap().state.messages, 1);
    assert!(cluster.logs().contains("parked in SB_PARKED"));

    // Sends that travel together (`gateway/src/ingest.rs`): each damaged
    // one is parked alone, as a command of its own under its own
    // subject, and the healthy ones among them are stored.
    let mut ingest = js.get_stream("SB_INGEST_0").await.unwrap();
    let published_before = ingest.info().await.unwrap().state.last_sequence;
    let burst = 10;
    for n in 2..2 + burst {
        for (conv, prefix) in [(&damaged, "d"), (&healthy, "h")] {
            alice
                .send(&send_frame(conv, &format!("{prefix}{n}"), "burst"))
                .await
                .unwrap();
        }
    }
    let (mut refused, mut stored) = (Vec::new(), Vec::new());
    while refused.len() + stored.len() < 2 * burst {
        let answer = expect(&mut alice, "an answer to the burst", |f| match f {
            ServerFrame::Ack(SendAck { client_msg_id, .. }) => {
                Some(Ok(client_msg_id.as_str().to_owned()))
            }
            ServerFrame::Error {
                code,
                client_msg_id: Some(id),
                ..
            } => Some(Err((code, id))),
            _ => None,
        })
        .await;
        match answer {
            Ok(id) => stored.push(id),
            Err((code, id)) => {
                assert_eq!(code, ErrorCode::Internal, "{id}");
                refused.push(id);
            }
        }
    }
    refused.sort();
    stored.sort();
    let ids = |prefix: &str| {
        let mut ids: Vec<String> = (2..2 + burst).map(|n| format!("{prefix}{n}")).collect();
        ids.sort();
        ids
    };
    assert_eq!(refused, ids("d"));
    assert_eq!(stored, ids("h"));
    let published = ingest.info().await.unwrap().state.last_sequence - published_before;
    assert!(
        published < 2 * burst as u64,
        "{published} ingest messages for {} sends: none travelled together",
        2 * burst
    );
    let info = parked.info().await.unwrap().clone();
    assert_eq!(info.state.messages, 1 + burst as u64);
    for seq in 2..=info.state.last_sequence {
        let raw = parked.get_raw_message(seq).await.unwrap();
        assert_eq!(
            raw.subject.as_str(),
            format!("sb.parked.0.{TENANT}.{damaged}"),
            "parked under the send's own subject"
        );
        let command: Value = serde_json::from_slice(&raw.payload).unwrap();
        assert_eq!(
            command["cmd"], "send",
            "one command, as it would travel alone"
        );
    }
    // Operators see it without reading the stream.
    let worker = cluster.workers[0]
        .metrics_addr
        .expect("the worker's metrics");
    assert_eq!(
        sum(&scrape(worker).await, "switchboard_writer_parked_total", ""),
        info.state.messages as f64
    );
}
