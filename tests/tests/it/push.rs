//! F15 end to end: pushes for devices that do not acknowledge, through a
//! tenant's webhook (a real HTTP receiver on loopback), signed, collapsed
//! per conversation, previewed as the tenant says (never ciphertext),
//! retried, dead-lettered and replayed with a NATS client, and a dead token
//! forgotten.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use switchboard_client::{RestClient, TokenSpec, WsClient, mint_hs256};
use switchboard_protocol::{
    ClientFrame, ClientMsgId, Content, ConversationId, ConversationKind, ServerFrame,
};
use switchboard_tests::cluster::OPERATOR_TOKEN;
use switchboard_tests::{Cluster, ClusterSpec};

use crate::support::*;
use switchboard_tests::eventually;

const TENANT: &str = "pushco";
const SECRET: &str = "pushco-secret-0123456789";
const HOOK_SECRET: &str = "webhook-secret-0123456789";

/// What the receiver got: headers and body of each POST.
type Received = Arc<Mutex<Vec<(HeaderMap, Bytes)>>>;

struct Receiver {
    url: String,
    got: Received,
    status: Arc<AtomicU16>,
}

async fn receiver() -> Receiver {
    let got: Received = Arc::default();
    let status = Arc::new(AtomicU16::new(200));
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                |State((got, status)): State<(Received, Arc<AtomicU16>)>,
                 headers: HeaderMap,
                 body: Bytes| async move {
                    got.lock().unwrap().push((headers, body));
                    StatusCode::from_u16(status.load(Ordering::SeqCst)).unwrap()
                },
            ),
        )
        .with_state((got.clone(), status.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver { url, got, status }
}

impl Receiver {
    fn count(&self) -> usize {
        self.got.lock().unwrap().len()
    }

    /// Waits (bounded) until `n` POSTs arrived.
    async fn until(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.count() < n {
            assert!(
                Instant::now() < deadline,
                "{} pushes, wanted {n}",
                self.count()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `i`th POST's body, after checking its signature.
    fn verified(&self, i: usize) -> Value {
        let (headers, body) = self.got.lock().unwrap()[i].clone();
        let ts = headers["x-switchboard-timestamp"]
            .to_str()
            .unwrap()
            .to_owned();
        let given = headers["x-switchboard-signature"]
            .to_str()
            .unwrap()
            .to_owned();
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, HOOK_SECRET.as_bytes());
        let mut signed = ts.clone().into_bytes();
        signed.push(b'.');
        signed.extend_from_slice(&body);
        let hex = given.strip_prefix("v1=").expect("v1= signature");
        let tag: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        ring::hmac::verify(&key, &signed, &tag).expect("the signature verifies");
        let age =
            switchboard_protocol::Timestamp::now().unix_ms() / 1000 - ts.parse::<i64>().unwrap();
        assert!((0..60).contains(&age), "a fresh timestamp");
        serde_json::from_slice(&body).unwrap()
    }
}

/// A tenant of these tests: its id and HS256 secret.
#[derive(Clone, Copy)]
struct Tenant(&'static str, &'static str);

const PUSHCO: Tenant = Tenant(TENANT, SECRET);

fn rest(cluster: &Cluster, user: &str, device: &str) -> RestClient {
    rest_in(cluster, PUSHCO, user, device)
}

fn rest_in(cluster: &Cluster, tenant: Tenant, user: &str, device: &str) -> RestClient {
    let spec = TokenSpec::new(tenant.0, user, Some(device), 600);
    let token = mint_hs256(tenant.1, &spec).unwrap();
    RestClient::new(&cluster.gateways[0].http(), &token)
}

async fn ws(cluster: &Cluster, user: &str, device: &str) -> WsClient {
    ws_in(cluster, PUSHCO, user, device).await
}

async fn ws_in(cluster: &Cluster, tenant: Tenant, user: &str, device: &str) -> WsClient {
    let spec = TokenSpec::new(tenant.0, user, Some(device), 600);
    let token = mint_hs256(tenant.1, &spec).unwrap();
    switchboard_tests::connect_ws(&cluster.gateways[0].ws(), &token)
        .await
        .unwrap()
}

/// `PUT /v1/devices/{device}/push`: the status and the JSON answer.
async fn try_register_push(
    cluster: &Cluster,
    tenant: Tenant,
    user: &str,
    device: &str,
    provider: &str,
    token: &str,
) -> (u16, Value) {
    let r = rest_in(cluster, tenant, user, device);
    let answer = r
        .raw()
        .put(format!("{}/v1/devices/{device}/push", r.base()))
        .bearer_auth(r.token())
        .json(&json!({"provider": provider, "token": token}))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

async fn register_push(cluster: &Cluster, user: &str, device: &str, provider: &str, token: &str) {
    register_push_in(cluster, PUSHCO, user, device, provider, token).await;
}

async fn register_push_in(
    cluster: &Cluster,
    tenant: Tenant,
    user: &str,
    device: &str,
    provider: &str,
    token: &str,
) {
    let (status, body) = try_register_push(cluster, tenant, user, device, provider, token).await;
    assert_eq!(status, 200, "{body}");
}

async fn send(ws: &mut WsClient, conv: &str, id: &str, content: Content) {
    ws.send(&ClientFrame::send_message(
        ClientMsgId::new(id).unwrap(),
        ConversationId::new(conv).unwrap(),
        content,
    ))
    .await
    .unwrap();
    expect_ack(ws, id).await;
}

fn text(t: &str) -> Content {
    Content::Text { text: t.into() }
}

#[tokio::test]
async fn pushes_reach_a_webhook_signed_collapsed_retried_and_dead_lettered() {
    let hook = receiver().await;
    // The receiver is on loopback: a private target, allowed here.
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[push]\nallow_private_targets = true\n"
        ),
        ..Default::default()
    })
    .await;
    let (status, shown) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({
                "id": TENANT,
                "hs256_secrets": [SECRET],
                "push": {"preview": "text", "delay_ms": 800, "collapse_ms": 1500, "max_attempts": 3,
                         "webhook": {"url": hook.url, "secret": HOOK_SECRET}},
            })),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    assert!(
        !shown.to_string().contains(HOOK_SECRET),
        "the webhook secret is not shown"
    );
    // The tenant reaches the gateway and the workers.
    eventually(
        "the new tenant becomes usable",
        Duration::from_secs(10),
        || async { rest(&cluster, "alice", "a").conversations().await.ok() },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (group, _) = rest(&cluster, "alice", "a")
        .create_conversation(ConversationKind::Group, &["bob", "carol"], None)
        .await
        .unwrap();
    let conv = group.conversation_id.as_str().to_owned();
    // Bob's phone is away; Carol's laptop is connected and acknowledges.
    register_push(&cluster, "bob", "phone", "webhook", "bob-phone-token").await;
    register_push(&cluster, "carol", "laptop", "webhook", "carol-laptop-token").await;
    let mut carol = ws(&cluster, "carol", "laptop").await;
    let acking = tokio::spawn(async move {
        while let Ok(frame) = carol.next_frame_within(Duration::from_secs(60)).await {
            if let ServerFrame::Message { message } = frame {
                carol
                    .send(&ClientFrame::AckDelivered {
                        conversation_id: message.conversation_id,
                        seq: message.seq,
                    })
                    .await
                    .unwrap();
            }
        }
    });
    let mut alice = ws(&cluster, "alice", "a").await;

    // A burst of three: one push, to Bob only, previewing one of them
    // (whichever job takes the collapse mark first; all three race).
    for (i, t) in ["hello one", "hello two", "hello three"].iter().enumerate() {
        send(&mut alice, &conv, &format!("burst-{i}"), text(t)).await;
    }
    hook.until(1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        hook.count(),
        1,
        "a burst is one push, and Carol acknowledged"
    );
    let push = hook.verified(0);
    assert_eq!(push["tenant"], TENANT);
    assert_eq!(
        (push["user_id"].clone(), push["device_id"].clone()),
        (json!("bob"), json!("phone"))
    );
    assert_eq!(push["token"], "bob-phone-token");
    assert_eq!(push["title"], json!("alice"));
    let previewed = (push["body"].as_str(), push["data"]["seq"].as_str());
    assert!(
        [
            (Some("hello one"), Some("1")),
            (Some("hello two"), Some("2")),
            (Some("hello three"), Some("3")),
        ]
        .contains(&previewed),
        "the push previews a message of the burst, with its seq: {previewed:?}"
    );
    assert_eq!(push["data"]["conversation_id"], json!(conv));
    // Bob's unread total when it was made: the burst so far.
    let badge = push["badge"].as_u64().unwrap();
    assert!((1..=3).contains(&badge), "{push}");

    // Ciphertext: never previewed.
    send(
        &mut alice,
        &conv,
        "secret",
        Content::Ciphertext {
            algorithm: "test".into(),
            body: "c2VjcmV0".into(),
        },
    )
    .await;
    hook.until(2).await;
    let push = hook.verified(1);
    assert_eq!(
        (push["title"].clone(), push["body"].clone()),
        (json!("alice"), json!("New message"))
    );

    // The webhook fails: three attempts, then the dead letters.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    hook.status.store(500, Ordering::SeqCst);
    send(&mut alice, &conv, "failing", text("will fail")).await;
    hook.until(5).await;
    let nats = cluster.nats.client().await;
    let js = async_nats::jetstream::new(nats.clone());
    let dead_stream = js.get_stream("SB_PUSH_DEAD").await.unwrap();
    let dead = eventually("a dead letter", Duration::from_secs(10), || async {
        dead_stream
            .get_last_raw_message_by_subject(&format!("sb.pushdead.{TENANT}"))
            .await
            .ok()
    })
    .await;
    assert_eq!(hook.count(), 5, "exactly max_attempts tries");
    let job: Value = serde_json::from_slice(&dead.payload).unwrap();
    assert_eq!(job["body"], "will fail");
    let error = dead
        .headers
        .get("Sb-Push-Error")
        .map(|v| v.as_str().to_owned())
        .unwrap_or_default();
    assert!(error.contains("HTTP 500"), "{error}");

    // An operator replays it once the webhook works again, with the
    // commands of nats/README.md as written (the real NATS CLI; the docs'
    // tenant `acme` is this test's, their sequence 42 this one's).
    hook.status.store(200, Ordering::SeqCst);
    let server = cluster.nats.url();
    let dir = tempfile::tempdir().unwrap();
    let section = "## Streams `SB_PUSH` and `SB_PUSH_DEAD`, consumers `push-msg` and `push-send`";
    let mut dead_stream = dead_stream.clone();
    for line in switchboard_tests::nats_cli::documented("nats/README.md", section) {
        let line = line
            .replace(" 42", &format!(" {}", dead.sequence))
            .replace("acme", TENANT);
        let ran = switchboard_tests::nats_cli::run_at(dir.path(), &server, &line).await;
        let shows: &[&str] = match line.as_str() {
            "nats stream info SB_PUSH" => &["SB_PUSH"],
            "nats consumer info SB_PUSH push-send" => &["push-send"],
            "nats stream view SB_PUSH_DEAD" => &["Sb-Push-Error", "will fail"],
            l if l.starts_with("nats stream get SB_PUSH_DEAD ") => &["will fail"],
            l if l.starts_with("nats sub 'sb.pushdead.>' --stream SB_PUSH_DEAD ") => {
                let job = std::fs::read_to_string(dir.path().join("job.json")).unwrap();
                assert!(job.contains("will fail"), "{job}");
                &[]
            }
            l if l.starts_with("nats pub sb.push.send.") => {
                hook.until(6).await;
                assert_eq!(hook.verified(5)["body"], "will fail");
                &[]
            }
            l if l.starts_with("nats stream rmm SB_PUSH_DEAD ") => {
                let gone = dead_stream.get_raw_message(dead.sequence).await;
                assert!(gone.is_err(), "{line}");
                &[]
            }
            l if l.starts_with("nats stream purge SB_PUSH_DEAD --subject ") => {
                assert_eq!(dead_stream.info().await.unwrap().state.messages, 0);
                &[]
            }
            other => panic!("{other:?} is documented but not checked here"),
        };
        switchboard_tests::nats_cli::expect(&ran, shows);
    }

    // A dead token (410) is forgotten.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    hook.status.store(410, Ordering::SeqCst);
    send(&mut alice, &conv, "gone", text("to a dead token")).await;
    let bob = rest(&cluster, "bob", "phone");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = bob
            .raw()
            .get(format!("{}/v1/devices/phone/push", bob.base()))
            .bearer_auth(bob.token())
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dead token is still registered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(hook.count() >= 7);
    acking.abort();
    // Every push went to Bob.
    let got = hook.got.lock().unwrap().clone();
    for (_, body) in got {
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["user_id"], "bob");
    }
    // The worker counted each outcome (issue 15).
    let m = scrape(cluster.workers[0].metrics_addr.unwrap()).await;
    for outcome in ["sent", "retry", "dead_letter", "token_gone"] {
        assert!(
            sum(
                &m,
                "switchboard_push_jobs_total",
                &format!(r#"outcome="{outcome}""#)
            ) >= 1.0,
            "{outcome}: {m:?}"
        );
    }
}

/// The FCM and APNs requests, checked field by field against a local
/// HTTPS server speaking HTTP/2 (these machines reach neither Google nor
/// Apple): the OAuth assertion of the service account, the FCM v1 send,
/// and the APNs send over HTTP/2 with its provider token and headers.
#[tokio::test]
async fn fcm_and_apns_get_exactly_the_requests_their_apis_expect() {
    use switchboard_tests::tls::{Handler, TlsServer, fixture};

    let handler: Handler = Arc::new(|r| {
        let json = vec![("content-type".to_owned(), "application/json".to_owned())];
        if r.path == "/token" {
            (
                200,
                json,
                r#"{"access_token":"fcm-access-token-1","expires_in":3600,"token_type":"Bearer"}"#
                    .into(),
            )
        } else if r.path.starts_with("/v1/projects/") {
            (
                200,
                json,
                r#"{"name":"projects/switchboard-test/messages/1"}"#.into(),
            )
        } else {
            (
                200,
                vec![(
                    "apns-id".to_owned(),
                    "eabeae54-14a8-11e5-b60b-1697f925ec7b".to_owned(),
                )],
                String::new(),
            )
        }
    });
    let server = TlsServer::start(handler).await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[push]\nallow_private_targets = true\nca_file = \"{}\"\n",
            fixture("test-ca.pem").display()
        ),
        ..Default::default()
    })
    .await;
    let fcm_key = std::fs::read_to_string(fixture("fcm-service-account.pem")).unwrap();
    let apns_key = std::fs::read_to_string(fixture("apns-AuthKey.p8")).unwrap();
    let client_email = "push@switchboard-test.iam.gserviceaccount.com";
    let token_url = format!("{}/token", server.url());
    let (status, _) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({
            "id": TENANT,
            "hs256_secrets": [SECRET],
            "push": {"preview": "sender", "delay_ms": 500, "collapse_ms": 1000,
                "fcm": {"project_id": "switchboard-test", "client_email": client_email,
                        "private_key": fcm_key, "token_url": token_url, "base_url": server.url()},
                "apns": {"team_id": "TEAM123456", "key_id": "KEY1234567", "private_key": apns_key,
                         "topic": "com.example.chat", "base_url": server.url()}},
        })),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    eventually(
        "the new tenant becomes usable",
        Duration::from_secs(10),
        || async { rest(&cluster, "alice", "a").conversations().await.ok() },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let conv = rest(&cluster, "alice", "a")
        .create_conversation(ConversationKind::Direct, &["bob"], None)
        .await
        .unwrap()
        .0
        .conversation_id
        .as_str()
        .to_owned();
    register_push(&cluster, "bob", "android", "fcm", "fcm-device-token").await;
    let apns_device = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
    register_push(&cluster, "bob", "iphone", "apns", apns_device).await;

    let mut alice = ws(&cluster, "alice", "a").await;
    let (message_id, _) = {
        alice
            .send(&send_frame(&conv, "first", "hello bob"))
            .await
            .unwrap();
        expect_ack(&mut alice, "first").await
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.recorded().len() < 3 {
        assert!(
            Instant::now() < deadline,
            "requests: {:?}\n{}",
            server.recorded(),
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recorded = server.recorded();
    let find = |prefix: &str| {
        recorded
            .iter()
            .find(|r| r.path.starts_with(prefix))
            .unwrap()
            .clone()
    };

    // The service-account assertion (RFC 7523).
    let token = find("/token");
    assert_eq!(token.method, "POST");
    assert_eq!(
        token.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let form: std::collections::HashMap<String, String> =
        serde_urlencoded_pairs(std::str::from_utf8(&token.body).unwrap());
    assert_eq!(
        form["grant_type"],
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    );
    let public = std::fs::read(fixture("fcm-service-account.pub.pem")).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[token_url.as_str()]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    let claims = jsonwebtoken::decode::<Value>(
        &form["assertion"],
        &jsonwebtoken::DecodingKey::from_rsa_pem(&public).unwrap(),
        &validation,
    )
    .unwrap()
    .claims;
    assert_eq!(claims["iss"], client_email);
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/firebase.messaging"
    );
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );

    // The FCM v1 send.
    let fcm = find("/v1/projects/");
    assert_eq!(fcm.method, "POST");
    assert_eq!(fcm.path, "/v1/projects/switchboard-test/messages:send");
    assert_eq!(
        fcm.header("authorization"),
        Some("Bearer fcm-access-token-1")
    );
    let body: Value = serde_json::from_slice(&fcm.body).unwrap();
    assert_eq!(
        body,
        json!({"message": {
            "token": "fcm-device-token",
            "notification": {"title": "alice", "body": "New message"},
            "data": {"conversation_id": conv, "message_id": message_id.to_string(), "seq": "1", "sender_id": "alice"},
            "android": {"collapse_key": conv, "priority": "high", "notification": {"notification_count": 1}},
            "apns": {"payload": {"aps": {"thread-id": conv, "badge": 1}}},
        }})
    );

    // The APNs send: HTTP/2, the provider token, the headers.
    let apns = find("/3/device/");
    assert_eq!(apns.version, hyper::Version::HTTP_2);
    assert_eq!(apns.method, "POST");
    assert_eq!(apns.path, format!("/3/device/{apns_device}"));
    assert_eq!(apns.header("apns-topic"), Some("com.example.chat"));
    assert_eq!(apns.header("apns-push-type"), Some("alert"));
    assert_eq!(apns.header("apns-priority"), Some("10"));
    assert_eq!(apns.header("apns-collapse-id"), Some(conv.as_str()));
    let bearer = apns
        .header("authorization")
        .unwrap()
        .strip_prefix("bearer ")
        .unwrap()
        .to_owned();
    let header = jsonwebtoken::decode_header(&bearer).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::ES256);
    assert_eq!(header.kid.as_deref(), Some("KEY1234567"));
    let public = std::fs::read(fixture("apns-AuthKey.pub.pem")).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    validation.set_required_spec_claims(&["iss"]);
    validation.validate_exp = false;
    let claims = jsonwebtoken::decode::<Value>(
        &bearer,
        &jsonwebtoken::DecodingKey::from_ec_pem(&public).unwrap(),
        &validation,
    )
    .unwrap()
    .claims;
    assert_eq!(claims["iss"], "TEAM123456");
    assert!(claims["iat"].as_i64().is_some());
    let body: Value = serde_json::from_slice(&apns.body).unwrap();
    assert_eq!(
        body,
        json!({
            "aps": {"alert": {"title": "alice", "body": "New message"}, "sound": "default", "thread-id": conv, "badge": 1},
            "conversation_id": conv, "message_id": message_id.to_string(), "seq": 1, "sender_id": "alice",
        })
    );

    // A second push reuses the access token and the provider token.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    alice
        .send(&send_frame(&conv, "second", "again"))
        .await
        .unwrap();
    expect_ack(&mut alice, "second").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.recorded().len() < 5 {
        assert!(
            Instant::now() < deadline,
            "requests: {:?}",
            server.recorded()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let recorded = server.recorded();
    assert_eq!(recorded.iter().filter(|r| r.path == "/token").count(), 1);
    let apns_tokens: Vec<_> = recorded
        .iter()
        .filter_map(|r| {
            r.header("authorization")
                .filter(|a| a.starts_with("bearer "))
        })
        .collect();
    assert_eq!(apns_tokens.len(), 2);
    assert_eq!(apns_tokens[0], apns_tokens[1]);
}

/// `a=b&c=d` with percent-decoding, enough for the token request's form.
fn serde_urlencoded_pairs(body: &str) -> std::collections::HashMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                out.push(
                    u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap(), 16)
                        .unwrap(),
                );
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

#[tokio::test]
async fn a_webhook_on_a_private_address_is_refused_unless_allowed() {
    let hook = receiver().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!("operator_token = \"{OPERATOR_TOKEN}\"\n"),
        ..Default::default()
    })
    .await;
    let (status, _) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({
                "id": TENANT,
                "hs256_secrets": [SECRET],
                "push": {"preview": "text", "delay_ms": 0, "collapse_ms": 0, "max_attempts": 3,
                         "webhook": {"url": hook.url, "secret": HOOK_SECRET}},
            })),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    eventually(
        "the new tenant becomes usable",
        Duration::from_secs(10),
        || async { rest(&cluster, "alice", "a").conversations().await.ok() },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (group, _) = rest(&cluster, "alice", "a")
        .create_conversation(ConversationKind::Group, &["bob"], None)
        .await
        .unwrap();
    let conv = group.conversation_id.as_str().to_owned();
    register_push(&cluster, "bob", "phone", "webhook", "bob-phone-token").await;
    let mut alice = ws(&cluster, "alice", "a").await;
    send(&mut alice, &conv, "p1", text("hello")).await;
    // The push is dead-lettered at once (a refusal is not retried), and
    // the receiver on loopback never hears of it.
    eventually(
        "the private webhook target is refused",
        Duration::from_secs(15),
        || async { cluster.logs().contains("private address").then_some(()) },
    )
    .await;
    assert_eq!(hook.count(), 0);
}

/// A second tenant with pushes, beside [`PUSHCO`].
const QUIETCO: Tenant = Tenant("quietco", "quietco-secret-0123456789");

/// Creates `tenant` with pushes to the webhook at `url` (every message
/// pushes: no delay, no collapsing) and waits until it is usable.
async fn push_tenant(cluster: &Cluster, tenant: Tenant, url: &str) {
    let (status, _) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({
                "id": tenant.0,
                "hs256_secrets": [tenant.1],
                "push": {"preview": "off", "delay_ms": 0, "collapse_ms": 0, "max_attempts": 3,
                         "webhook": {"url": url, "secret": HOOK_SECRET}},
            })),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    eventually(
        "the new tenant becomes usable",
        Duration::from_secs(10),
        || async {
            rest_in(cluster, tenant, "alice", "a")
                .conversations()
                .await
                .ok()
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
}

async fn group_with_bob(cluster: &Cluster, tenant: Tenant) -> String {
    let (group, _) = rest_in(cluster, tenant, "alice", "a")
        .create_conversation(ConversationKind::Group, &["bob"], None)
        .await
        .unwrap();
    group.conversation_id.as_str().to_owned()
}

/// Reads a request's head and body (by its Content-Length).
async fn read_request(s: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let Ok(n) = s.read(&mut buf).await else {
            return false;
        };
        if n == 0 {
            return false;
        }
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return true;
            }
        }
    }
}

/// A webhook that answers every POST with 200 and a body that never
/// ends; how many POSTs it got.
async fn endless_hook() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let posts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = posts.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                if !read_request(&mut s).await {
                    return;
                }
                count.fetch_add(1, Ordering::SeqCst);
                let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
                if s.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
                while s.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    (url, posts)
}

/// A webhook that takes every POST and never answers; how many it holds.
async fn hanging_hook() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = held.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                if read_request(&mut s).await {
                    count.fetch_add(1, Ordering::SeqCst);
                    // Held open, unanswered, until the caller gives up.
                    let mut rest = [0u8; 1];
                    let _ = tokio::io::AsyncReadExt::read(&mut s, &mut rest).await;
                    count.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
    });
    (url, held)
}

/// The worker process's resident memory, in bytes.
fn worker_rss(cluster: &Cluster) -> u64 {
    let pid = cluster.workers[0].pid().expect("the worker runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// Issue 26, case 2: a webhook answering 200 with a body without end
/// (the review sent 1.5 GiB and saw the worker grow 3.75 GB). Only the
/// status counts: the push is sent, at most a few KiB of the answer is
/// read, and the worker's memory stays where it was.
#[tokio::test]
async fn a_webhook_answering_without_end_costs_the_worker_no_memory() {
    let (url, posts) = endless_hook().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[push]\nallow_private_targets = true\ntimeout_ms = 20000\n"
        ),
        ..Default::default()
    })
    .await;
    push_tenant(&cluster, PUSHCO, &url).await;
    let conv = group_with_bob(&cluster, PUSHCO).await;
    for i in 0..4 {
        register_push(&cluster, "bob", &format!("phone{i}"), "webhook", "t").await;
    }
    let metrics = cluster.workers[0].metrics_addr.unwrap();
    let before = worker_rss(&cluster);
    let mut alice = ws(&cluster, "alice", "a").await;
    send(&mut alice, &conv, "m1", text("hello")).await;
    let mut peak = before;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        peak = peak.max(worker_rss(&cluster));
        let m = scrape(metrics).await;
        if sum(&m, "switchboard_push_jobs_total", r#"outcome="sent""#) >= 4.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "four pushes counted as sent: {m:?}\n{}",
            cluster.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    peak = peak.max(worker_rss(&cluster));
    assert_eq!(posts.load(Ordering::SeqCst), 4);
    assert!(
        peak < before + (64 << 20),
        "the worker grew from {before} to {peak} bytes"
    );
    let m = scrape(metrics).await;
    assert_eq!(
        sum(&m, "switchboard_push_jobs_total", r#"outcome="retry""#),
        0.0
    );
}

/// Issue 26, case 2: pushes are shared by tenants. A tenant whose webhook
/// hangs holds its own share of the stage (`tenant_concurrency`), not the
/// stage: another tenant's push goes out at once. And a tenant with
/// `tenant_max_queued` sends waiting queues no more.
#[tokio::test]
async fn a_tenant_whose_webhook_hangs_holds_up_only_its_own_pushes() {
    let (hang_url, held) = hanging_hook().await;
    let quiet = receiver().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[push]\nallow_private_targets = true\ntimeout_ms = 60000\nconcurrency = 4\ntenant_concurrency = 2\ntenant_max_queued = 12\n"
        ),
        ..Default::default()
    })
    .await;
    push_tenant(&cluster, PUSHCO, &hang_url).await;
    push_tenant(&cluster, QUIETCO, &quiet.url).await;
    let mut stuck = Vec::new();
    for _ in 0..3 {
        stuck.push(group_with_bob(&cluster, PUSHCO).await);
    }
    for i in 0..6 {
        register_push(&cluster, "bob", &format!("phone{i}"), "webhook", "t").await;
    }
    let quiet_conv = group_with_bob(&cluster, QUIETCO).await;
    register_push_in(&cluster, QUIETCO, "bob", "phone", "webhook", "t").await;

    // Six pushes of the stuck tenant: two hang, four wait their turn.
    let mut alice = ws(&cluster, "alice", "a").await;
    send(&mut alice, &stuck[0], "s0", text("one")).await;
    eventually(
        "the stuck tenant's share hangs",
        Duration::from_secs(10),
        || async { (held.load(Ordering::SeqCst) == 2).then_some(()) },
    )
    .await;
    // The other tenant's push is not behind them.
    let mut quiet_alice = ws_in(&cluster, QUIETCO, "alice", "a").await;
    let sent_at = Instant::now();
    send(&mut quiet_alice, &quiet_conv, "q0", text("hi")).await;
    quiet.until(1).await;
    assert!(
        sent_at.elapsed() < Duration::from_secs(5),
        "the other tenant's push took {:?}",
        sent_at.elapsed()
    );
    assert_eq!(held.load(Ordering::SeqCst), 2, "no more than the share");

    // Queued: 6 of 12. A second message queues its 6 (below the bound);
    // a third finds 12 waiting (the bound) and queues none.
    let js = async_nats::jetstream::new(cluster.nats.client().await);
    let stream = js.get_stream("SB_PUSH").await.unwrap();
    let queued = || {
        let stream = stream.clone();
        async move {
            let mut subjects = stream
                .info_with_subjects(format!("sb.push.send.{TENANT}"))
                .await
                .unwrap();
            let mut n = 0;
            while let Some(Ok((_, count))) = futures::StreamExt::next(&mut subjects).await {
                n += count;
            }
            n
        }
    };
    assert_eq!(queued().await, 6);
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&mut alice, &stuck[1], "s1", text("two")).await;
    eventually("twelve pushes queued", Duration::from_secs(10), || async {
        (queued().await == 12).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&mut alice, &stuck[2], "s2", text("three")).await;
    let metrics = cluster.workers[0].metrics_addr.unwrap();
    eventually(
        "the third message is shed",
        Duration::from_secs(10),
        || async {
            let m = scrape(metrics).await;
            (sum(&m, "switchboard_push_messages_shed_total", "") == 1.0).then_some(())
        },
    )
    .await;
    assert_eq!(queued().await, 12);
    assert_eq!(held.load(Ordering::SeqCst), 2);
}

/// An APNs device token goes into the path of a URL: anything but hex is
/// refused when it is registered, with a JSON error.
#[tokio::test]
async fn an_apns_token_that_is_not_hex_is_refused_at_registration() {
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!("operator_token = \"{OPERATOR_TOKEN}\"\n"),
        ..Default::default()
    })
    .await;
    push_tenant(&cluster, PUSHCO, "https://push.example.com/hook").await;
    let hex = "a1b2c3d4".repeat(8);
    for bad in [
        format!("{}/../../x", &hex[..32]),
        format!("{}/", &hex[..62]),
        "zz".repeat(32),
        format!("{hex}?a=b"),
        "a1".repeat(101),
    ] {
        let (status, body) =
            try_register_push(&cluster, PUSHCO, "bob", "iphone", "apns", &bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["code"], "invalid_request", "{body}");
        assert!(body["message"].as_str().unwrap().contains("hex"), "{body}");
    }
    let (status, _) = try_register_push(&cluster, PUSHCO, "bob", "iphone", "apns", &hex).await;
    assert_eq!(status, 200);
    let longest = "a1".repeat(100);
    let (status, _) = try_register_push(&cluster, PUSHCO, "bob", "iphone", "apns", &longest).await;
    assert_eq!(status, 200);
    // Other providers' tokens are opaque.
    let (status, _) = try_register_push(&cluster, PUSHCO, "bob", "android", "fcm", "a/b:c").await;
    assert_eq!(status, 200);
}

/// Sends a text naming `mentions` (or everyone), waits for its ack.
async fn send_mentioning(
    ws: &mut WsClient,
    conv: &str,
    id: &str,
    mentions: &[&str],
    mention_all: bool,
) {
    ws.send(&ClientFrame::SendMessage {
        client_msg_id: ClientMsgId::new(id).unwrap(),
        conversation_id: ConversationId::new(conv).unwrap(),
        content: text(id),
        reply_to: None,
        thread_id: None,
        mentions: mentions
            .iter()
            .map(|u| switchboard_protocol::UserId::new(*u).unwrap())
            .collect(),
        mention_all,
        send_at: None,
        custom: None,
        previews: None,
    })
    .await
    .unwrap();
    expect_ack(ws, id).await;
}

/// v1.1: a member's notification level and mute decide whether a message
/// pushes to them, and in a channel that fans out on read only the
/// members a message mentions are pushed.
#[tokio::test]
async fn notification_levels_mutes_and_mentions_decide_who_is_pushed() {
    const LEVELSCO: Tenant = Tenant("levelsco", "levelsco-secret-0123456789");
    let hook = receiver().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\nfanout_threshold = 5\n\
             [push]\nallow_private_targets = true\n"
        ),
        ..Default::default()
    })
    .await;
    push_tenant(&cluster, LEVELSCO, &hook.url).await;
    let people = ["bob", "carol", "dave", "erin", "frank"];
    for user in people {
        // Known, away phones with a push token each.
        ws_in(&cluster, LEVELSCO, user, "phone").await.close().await;
        register_push_in(&cluster, LEVELSCO, user, "phone", "webhook", user).await;
    }
    let alice = rest_in(&cluster, LEVELSCO, "alice", "a");
    let (group, _) = alice
        .create_conversation(ConversationKind::Group, &["bob", "carol", "dave"], None)
        .await
        .unwrap();
    let group = group.conversation_id.as_str().to_owned();
    let settings = |user: &'static str, body: Value| {
        let r = rest_in(&cluster, LEVELSCO, user, "phone");
        let url = format!("{}/v1/conversations/{group}/settings", r.base());
        async move {
            let answer = r
                .raw()
                .put(url)
                .bearer_auth(r.token())
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status().as_u16(), 200);
        }
    };
    settings("bob", json!({"notifications": "mentions"})).await;
    settings(
        "carol",
        json!({"notifications": "all", "muted_until": "2099-01-01T00:00:00.000Z"}),
    )
    .await;
    let mut ws = ws_in(&cluster, LEVELSCO, "alice", "a").await;
    // Who the pushes after the first `seen` went to, once `want` arrived.
    let pushed_since = |seen: usize, want: usize| {
        let hook = &hook;
        async move {
            hook.until(seen + want).await;
            tokio::time::sleep(Duration::from_millis(1000)).await;
            assert_eq!(hook.count(), seen + want, "no more pushes than expected");
            let mut users: Vec<String> = (seen..seen + want)
                .map(|i| hook.verified(i)["user_id"].as_str().unwrap().to_owned())
                .collect();
            users.sort();
            users
        }
    };

    // A plain message: Bob (mentions only) and Carol (muted) hear nothing.
    send_mentioning(&mut ws, &group, "plain", &[], false).await;
    assert_eq!(pushed_since(0, 1).await, ["dave"]);
    // Naming Bob and Carol: Bob now, Carol still muted.
    send_mentioning(&mut ws, &group, "named", &["bob", "carol"], false).await;
    assert_eq!(pushed_since(1, 2).await, ["bob", "dave"]);
    // Everyone named, by the owner.
    send_mentioning(&mut ws, &group, "everyone", &[], true).await;
    assert_eq!(pushed_since(3, 2).await, ["bob", "dave"]);

    // A channel past the threshold: only the mentioned is pushed.
    let (channel, _) = alice
        .create_conversation(ConversationKind::Channel, &people, None)
        .await
        .unwrap();
    let channel = channel.conversation_id.as_str().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    send_mentioning(&mut ws, &channel, "loud", &[], false).await;
    send_mentioning(&mut ws, &channel, "erin?", &["erin"], false).await;
    assert_eq!(pushed_since(5, 1).await, ["erin"]);
}

/// v1.3: a tenant admin's templates word each kind of push (a message, a
/// mention of the recipient, a reply to their message, a reaction to it),
/// their
/// placeholders filled within the tenant's preview mode, and every push
/// carries the recipient's unread total as its `badge`.
#[tokio::test]
async fn templates_word_each_kind_and_every_push_carries_the_unread_total() {
    const WORDCO: Tenant = Tenant("wordco", "wordco-secret-0123456789");
    let hook = receiver().await;
    let cluster = Cluster::start(ClusterSpec {
        extra_config: format!(
            "operator_token = \"{OPERATOR_TOKEN}\"\n[push]\nallow_private_targets = true\n"
        ),
        ..Default::default()
    })
    .await;
    let (status, _) = cluster
        .operator(
            reqwest::Method::POST,
            "/v1/operator/tenants",
            Some(json!({
                "id": WORDCO.0,
                "hs256_secrets": [WORDCO.1],
                "push": {"preview": "text", "delay_ms": 0, "collapse_ms": 0, "max_attempts": 3,
                         "webhook": {"url": hook.url, "secret": HOOK_SECRET}},
            })),
            Some(OPERATOR_TOKEN),
        )
        .await;
    assert_eq!(status, 201);
    let admin = {
        let spec = TokenSpec::new(WORDCO.0, "boss", Some("d"), 600).admin();
        RestClient::new(
            &cluster.gateways[0].http(),
            &mint_hs256(WORDCO.1, &spec).unwrap(),
        )
    };
    let templates = json!({
        "message": {"title": "{sender} in {conversation}", "body": "{text}"},
        "mention": {"title": "{sender} mentioned you", "body": "{text}"},
        "reply": {"title": "{sender} replied {{!}}"},
        "reaction": {"title": "{sender} reacted", "body": "{text} in {conversation}"},
    });
    let set = eventually(
        "the tenant reaches the gateway",
        Duration::from_secs(10),
        || async {
            let (status, body) = call(
                &admin,
                "PUT",
                "/v1/admin/push/templates",
                Some(templates.clone()),
            )
            .await;
            (status == 200).then_some(body)
        },
    )
    .await;
    assert_eq!(set, templates);
    let (_, shown) = call(&admin, "GET", "/v1/admin/push/templates", None).await;
    assert_eq!(shown, templates);
    // Admins only; an unknown placeholder and a title past 100
    // characters are refused, and the templates stay.
    let alice = rest_in(&cluster, WORDCO, "alice", "a");
    let (status, _) = call(&alice, "PUT", "/v1/admin/push/templates", Some(json!({}))).await;
    assert_eq!(status, 403);
    for bad in [
        json!({"message": {"title": "{name}"}}),
        json!({"message": {"title": "t".repeat(101)}}),
        json!({"message": {"title": "t", "body": "b".repeat(501)}}),
        json!({"gossip": {"title": "t"}}),
    ] {
        let (status, body) = call(&admin, "PUT", "/v1/admin/push/templates", Some(bad)).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("invalid_request")),
            "{body}"
        );
    }
    let (status, _) = call(
        &admin,
        "PUT",
        "/v1/admin/push/templates",
        Some(json!({"message": {"title": "t".repeat(100), "body": "b".repeat(500)}})),
    )
    .await;
    assert_eq!(status, 200, "at the bounds");
    let (status, _) = call(&admin, "PUT", "/v1/admin/push/templates", Some(templates)).await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let (status, body) = call(
        &alice,
        "PATCH",
        "/v1/me/profile",
        Some(json!({"display_name": "Alice A."})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (group, _) = alice
        .create_conversation(ConversationKind::Group, &["bob"], Some("Trip"))
        .await
        .unwrap();
    let conv = group.conversation_id.as_str().to_owned();
    register_push_in(&cluster, WORDCO, "bob", "phone", "webhook", "bob-token").await;
    let mut alice_ws = ws_in(&cluster, WORDCO, "alice", "a").await;

    let pushed = |i: usize| {
        let push = hook.verified(i);
        (
            push["title"].as_str().unwrap_or_default().to_owned(),
            push["body"].as_str().map(str::to_owned),
            push["badge"].as_u64(),
        )
    };
    send(&mut alice_ws, &conv, "m1", text("hello")).await;
    hook.until(1).await;
    assert_eq!(
        pushed(0),
        ("Alice A. in Trip".into(), Some("hello".into()), Some(1))
    );
    send_mentioning(&mut alice_ws, &conv, "m2", &["bob"], false).await;
    hook.until(2).await;
    assert_eq!(
        pushed(1),
        ("Alice A. mentioned you".into(), Some("m2".into()), Some(2))
    );
    // Bob writes from his laptop (which reads everything before), and
    // Alice replies to him.
    let (status, mine) = call(
        &rest_in(&cluster, WORDCO, "bob", "laptop"),
        "POST",
        &format!("/v1/conversations/{conv}/messages"),
        Some(json!({"client_msg_id": "b1", "content": {"kind": "text", "text": "mine"}})),
    )
    .await;
    assert_eq!(status, 200, "{mine}");
    alice_ws
        .send(&ClientFrame::SendMessage {
            client_msg_id: ClientMsgId::new("m3").unwrap(),
            conversation_id: ConversationId::new(&conv).unwrap(),
            content: text("yes"),
            reply_to: Some(mine["message_id"].as_str().unwrap().parse().unwrap()),
            thread_id: None,
            mentions: Vec::new(),
            mention_all: false,
            send_at: None,
            custom: None,
            previews: None,
        })
        .await
        .unwrap();
    expect_ack(&mut alice_ws, "m3").await;
    hook.until(3).await;
    assert_eq!(pushed(2), ("Alice A. replied {!}".into(), None, Some(1)));
    // A reaction to Bob's message pushes him, as its own kind.
    alice_ws
        .send(&ClientFrame::React {
            conversation_id: ConversationId::new(&conv).unwrap(),
            message_id: mine["message_id"].as_str().unwrap().parse().unwrap(),
            emoji: "👍".into(),
            action: switchboard_protocol::ReactAction::Add,
        })
        .await
        .unwrap();
    hook.until(4).await;
    assert_eq!(
        pushed(3),
        (
            "Alice A. reacted".into(),
            Some("👍 in Trip".into()),
            Some(1)
        )
    );
    assert_eq!(hook.verified(3)["data"]["reaction"], "👍");
    assert_eq!(hook.verified(3)["data"]["sender_id"], "alice");

    // Banned from the app, Bob's devices get no preview of its messages.
    let (status, _) = call(&admin, "PUT", "/v1/admin/bans/bob", Some(json!({}))).await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    send(&mut alice_ws, &conv, "m4", text("are you there")).await;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(hook.count(), 4, "no push for a banned user");
}
