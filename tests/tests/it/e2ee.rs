//! F17 end to end: two real double-ratchet clients (vodozemac's Olm, the
//! Matrix implementation) find each other's keys in the key directory,
//! start a session from a claimed one-time prekey and chat through
//! Switchboard, and nothing on the server side ever holds the plaintext:
//! not the store, not anything that crossed NATS (JetStream included),
//! not the logs. And the directory itself: each one-time prekey is handed
//! out exactly once under concurrent claims, the signed prekey is the
//! fallback, owners hear when they run low, bad uploads are refused, and
//! tenants do not see each other's keys.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use serde_json::{Value, json};
use switchboard_client::{RestClient, WsClient};
use switchboard_protocol::{ClientFrame, ClientMsgId, Content, ConversationId, ConversationKind};
use switchboard_protocol::{ErrorCode, ServerFrame};
use switchboard_tests::cluster::OTHER_TENANT;
use switchboard_tests::{Cluster, ClusterSpec};
use vodozemac::olm::{Account, OlmMessage, Session, SessionConfig};
use vodozemac::{Curve25519PublicKey, Ed25519PublicKey, Ed25519Signature};

use crate::support::*;

const ALGORITHM: &str = "m.olm.v1.curve25519-aes-sha2";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

fn rest_for(cluster: &Cluster, user: &str, device: &str) -> RestClient {
    RestClient::new(&cluster.gateways[0].http(), &cluster.token(user, device))
}

async fn call(
    rest: &RestClient,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = rest
        .raw()
        .request(method, format!("{}{path}", rest.base()))
        .bearer_auth(rest.token());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The upload body for `account`'s current keys: its fallback key as the
/// signed prekey, its unpublished one-time keys numbered from `first_id`.
fn upload_body(account: &Account, first_id: u32) -> Value {
    let fallback = *account
        .fallback_key()
        .values()
        .next()
        .expect("a fallback key");
    let signature = account.sign(fallback.as_bytes());
    let mut one_time: Vec<Curve25519PublicKey> = account.one_time_keys().into_values().collect();
    one_time.sort_by_key(|k| k.to_base64());
    json!({
        "identity_key": b64(account.ed25519_key().as_bytes()),
        "identity_dh_key": b64(account.curve25519_key().as_bytes()),
        "signed_prekey": {
            "key_id": 1,
            "public_key": b64(fallback.as_bytes()),
            "signature": b64(&signature.to_bytes()),
        },
        "one_time_prekeys": one_time.iter().enumerate().map(|(i, k)| json!({
            "key_id": first_id + i as u32,
            "public_key": b64(k.as_bytes()),
        })).collect::<Vec<_>>(),
    })
}

/// A device with its Olm account publishes `one_time` prekeys.
pub(crate) async fn publish(
    cluster: &Cluster,
    user: &str,
    device: &str,
    account: &mut Account,
    one_time: usize,
) -> Value {
    account.generate_one_time_keys(one_time);
    if account.fallback_key().is_empty() {
        account.generate_fallback_key();
    }
    let body = upload_body(account, 1);
    let (status, view) = call(
        &rest_for(cluster, user, device),
        reqwest::Method::PUT,
        &format!("/v1/devices/{device}/keys"),
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    account.mark_keys_as_published();
    view
}

fn encrypt(session: &mut Session, plaintext: &str) -> Content {
    let (kind, bytes) = session.encrypt(plaintext).unwrap().to_parts();
    let mut body = vec![u8::try_from(kind).unwrap()];
    body.extend(bytes);
    Content::Ciphertext {
        algorithm: ALGORITHM.into(),
        body: b64(&body),
    }
}

fn olm_message(content: &Content) -> OlmMessage {
    let Content::Ciphertext { algorithm, body } = content else {
        panic!("expected ciphertext, got {content:?}");
    };
    assert_eq!(algorithm, ALGORITHM);
    let bytes = unb64(body);
    OlmMessage::from_parts(usize::from(bytes[0]), &bytes[1..]).unwrap()
}

async fn send(ws: &mut WsClient, conv: &str, client_msg_id: &str, content: Content) {
    ws.send(&ClientFrame::send_message(
        ClientMsgId::new(client_msg_id).unwrap(),
        ConversationId::new(conv).unwrap(),
        content,
    ))
    .await
    .unwrap();
    expect_ack(ws, client_msg_id).await;
}

/// Every file below `dir` that holds `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path)
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

#[tokio::test]
async fn a_double_ratchet_pair_chats_and_the_server_never_sees_the_plaintext() {
    let cluster = Cluster::start(ClusterSpec {
        // Everything the processes would say about a message, said.
        extra_config: "log = \"debug\"\n".into(),
        ..Default::default()
    })
    .await;
    // A wiretap on every subject: whatever reaches a stream or a
    // gateway crosses NATS first.
    let tap = cluster.nats.client().await;
    let mut wire = tap.subscribe(">").await.unwrap();
    let seen: Arc<Mutex<Vec<u8>>> = Arc::default();
    let recorder = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(m) = wire.next().await {
                let mut seen = seen.lock().unwrap();
                seen.extend_from_slice(&m.payload);
                seen.push(b'\n');
            }
        })
    };

    let mut alice_account = Account::new();
    let mut bob_account = Account::new();
    publish(&cluster, "bob", "phone", &mut bob_account, 5).await;
    publish(&cluster, "alice", "laptop", &mut alice_account, 5).await;
    let conv = cluster
        .create(ConversationKind::Direct, "alice", &["bob"])
        .await;
    let mut alice = cluster.ws(0, "alice", "laptop").await;
    let mut bob = cluster.ws(0, "bob", "phone").await;

    // Alice looks Bob up, checks the signature herself, claims his keys.
    let alice_rest = rest_for(&cluster, "alice", "laptop");
    let (status, listing) = call(
        &alice_rest,
        reqwest::Method::GET,
        "/v1/users/bob/devices",
        None,
    )
    .await;
    assert_eq!(status, 200, "{listing}");
    let device = &listing["devices"][0];
    assert_eq!(device["device_id"], "phone");
    assert_eq!(device["one_time_prekeys_remaining"], 5);
    let identity = Ed25519PublicKey::from_slice(
        &unb64(device["identity_key"].as_str().unwrap())
            .try_into()
            .unwrap(),
    )
    .unwrap();
    let spk = unb64(device["signed_prekey"]["public_key"].as_str().unwrap());
    let signature = Ed25519Signature::from_slice(&unb64(
        device["signed_prekey"]["signature"].as_str().unwrap(),
    ))
    .unwrap();
    identity.verify(&spk, &signature).unwrap();
    let (status, claimed) = call(
        &alice_rest,
        reqwest::Method::POST,
        "/v1/users/bob/devices/phone/claim",
        None,
    )
    .await;
    assert_eq!(status, 200, "{claimed}");
    let bob_identity =
        Curve25519PublicKey::from_slice(&unb64(claimed["identity_dh_key"].as_str().unwrap()))
            .unwrap();
    let one_time = Curve25519PublicKey::from_slice(&unb64(
        claimed["one_time_prekey"]["public_key"].as_str().unwrap(),
    ))
    .unwrap();
    let mut alice_session = alice_account
        .create_outbound_session(SessionConfig::version_1(), bob_identity, one_time)
        .unwrap();

    // Five messages from Alice; Bob's first decryption starts his session.
    let secret = |who: &str, i: usize| format!("{who} whispers secret number {i} about the zebra");
    for i in 0..5 {
        send(
            &mut alice,
            &conv,
            &format!("a{i}"),
            encrypt(&mut alice_session, &secret("alice", i)),
        )
        .await;
    }
    let mut bob_session: Option<Session> = None;
    for i in 0..5 {
        let m = expect_message(&mut bob).await;
        assert_eq!(m.sender_id.as_str(), "alice");
        let plaintext = match (
            olm_message(m.content.as_ref().unwrap()),
            bob_session.as_mut(),
        ) {
            (OlmMessage::PreKey(prekey), None) => {
                let inbound = bob_account
                    .create_inbound_session(
                        SessionConfig::version_1(),
                        alice_account.curve25519_key(),
                        &prekey,
                    )
                    .unwrap();
                bob_session = Some(inbound.session);
                inbound.plaintext
            }
            (message, Some(session)) => session.decrypt(&message).unwrap(),
            (other, None) => panic!("the first message must be a pre-key message: {other:?}"),
        };
        assert_eq!(String::from_utf8(plaintext).unwrap(), secret("alice", i));
    }
    // And three back, which Alice reads.
    let mut bob_session = bob_session.unwrap();
    for i in 0..3 {
        send(
            &mut bob,
            &conv,
            &format!("b{i}"),
            encrypt(&mut bob_session, &secret("bob", i)),
        )
        .await;
    }
    let mut received = 0;
    while received < 3 {
        let m = expect_message(&mut alice).await;
        if m.sender_id.as_str() != "bob" {
            continue;
        }
        let plaintext = alice_session
            .decrypt(&olm_message(m.content.as_ref().unwrap()))
            .unwrap();
        assert_eq!(
            String::from_utf8(plaintext).unwrap(),
            secret("bob", received)
        );
        received += 1;
    }

    // The conversation list has no preview of ciphertext.
    let (_, list) = call(
        &cluster.rest(0, "bob"),
        reqwest::Method::GET,
        "/v1/conversations",
        None,
    )
    .await;
    let entry = &list["conversations"][0];
    assert_eq!(entry["last_message"]["content"]["kind"], "ciphertext");
    assert!(entry["preview"].is_null(), "{entry}");

    // A control: a plaintext message is visible where the checks look,
    // so their finding nothing of the secrets means something.
    let control = "control text that is not encrypted";
    send(
        &mut alice,
        &conv,
        "control",
        Content::Text {
            text: control.into(),
        },
    )
    .await;
    expect_message(&mut bob).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    recorder.abort();
    let wire = seen.lock().unwrap().clone();
    let on_wire = |needle: &str| wire.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(on_wire(control), "the wiretap sees message text");
    let history = cluster
        .rest(0, "bob")
        .history(&conv, Default::default())
        .await
        .unwrap();
    let history = serde_json::to_string(&history.messages).unwrap();
    assert!(history.contains(control));
    let store_dir = cluster.dir.path().join("store-owner");
    let logs = cluster.logs();
    for who in ["alice", "bob"] {
        for i in 0..if who == "alice" { 5 } else { 3 } {
            let s = secret(who, i);
            assert!(!on_wire(&s), "{s:?} crossed NATS in the clear");
            assert!(!history.contains(&s), "{s:?} is in the stored history");
            let files = files_containing(cluster.dir.path(), s.as_bytes());
            assert!(files.is_empty(), "{s:?} is on disk in {files:?}");
            assert!(!logs.contains(&s), "{s:?} is in the logs");
        }
    }
    assert!(
        !files_containing(&store_dir, control.as_bytes()).is_empty()
            || !files_containing(&cluster.dir.path().join("nats"), control.as_bytes()).is_empty(),
        "the control is found on disk, so the disk check can see plaintext"
    );
}

#[tokio::test]
async fn one_time_prekeys_are_claimed_exactly_once_and_the_signed_prekey_is_the_fallback() {
    let cluster = Cluster::start(ClusterSpec::default()).await;
    let mut bob_account = Account::new();
    let view = publish(&cluster, "bob", "phone", &mut bob_account, 12).await;
    assert_eq!(view["one_time_prekeys_remaining"], 12);
    let mut bob = cluster.ws(0, "bob", "phone").await;

    // Thirty claims at once, from thirty users: twelve prekeys, each once.
    let claims = futures::future::join_all((0..30).map(|i| {
        let rest = cluster.rest(0, &format!("claimer{i}"));
        async move {
            call(
                &rest,
                reqwest::Method::POST,
                "/v1/users/bob/devices/phone/claim",
                None,
            )
            .await
        }
    }))
    .await;
    let mut ids = Vec::new();
    let mut fallbacks = 0;
    for (status, body) in &claims {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["signed_prekey"]["key_id"], 1);
        match body["one_time_prekey"]["key_id"].as_u64() {
            Some(id) => ids.push(id),
            None => {
                assert!(body["one_time_prekey"].is_null());
                fallbacks += 1;
            }
        }
    }
    ids.sort_unstable();
    assert_eq!(
        ids,
        (1..=12).collect::<Vec<u64>>(),
        "each prekey handed out once"
    );
    assert_eq!(fallbacks, 18);

    // Bob hears that he ran out.
    expect(&mut bob, "prekeys_low with none left", |f| match f {
        ServerFrame::PrekeysLow {
            device_id,
            remaining: 0,
        } if device_id.as_str() == "phone" => Some(()),
        _ => None,
    })
    .await;
    let bob_rest = rest_for(&cluster, "bob", "phone");
    let (_, own) = call(
        &bob_rest,
        reqwest::Method::GET,
        "/v1/devices/phone/keys",
        None,
    )
    .await;
    assert_eq!(own["one_time_prekeys_remaining"], 0);
    // More keys from the same identity join the supply.
    let view = publish(&cluster, "bob", "phone", &mut bob_account, 5).await;
    assert_eq!(view["one_time_prekeys_remaining"], 5);

    // Bad uploads.
    let put = |body: Value, device: &'static str| {
        let rest = rest_for(&cluster, "bob", "phone");
        async move {
            call(
                &rest,
                reqwest::Method::PUT,
                &format!("/v1/devices/{device}/keys"),
                Some(body),
            )
            .await
        }
    };
    let good = {
        bob_account.generate_one_time_keys(1);
        bob_account.generate_fallback_key();
        upload_body(&bob_account, 100)
    };
    let mut bad_signature = good.clone();
    bad_signature["signed_prekey"]["signature"] =
        json!(b64(&bob_account.sign(b"something else").to_bytes()));
    let mut short_key = good.clone();
    short_key["identity_key"] = json!(b64(&[7u8; 31]));
    let mut not_base64 = good.clone();
    not_base64["signed_prekey"]["public_key"] = json!("not base64!");
    let mut too_many = good.clone();
    too_many["one_time_prekeys"] = json!(
        (0..201)
            .map(|i| json!({"key_id": i, "public_key": b64(&[i as u8; 32])}))
            .collect::<Vec<_>>()
    );
    let mut duplicate_ids = good.clone();
    duplicate_ids["one_time_prekeys"] = json!([{"key_id": 5, "public_key": b64(&[1; 32])}, {"key_id": 5, "public_key": b64(&[2; 32])}]);
    for (body, status, code) in [
        (bad_signature, 400, ErrorCode::InvalidRequest),
        (short_key, 400, ErrorCode::InvalidRequest),
        (not_base64, 400, ErrorCode::InvalidRequest),
        (duplicate_ids, 400, ErrorCode::InvalidRequest),
        (too_many, 400, ErrorCode::InvalidRequest),
        (json!({"identity_key": "x"}), 400, ErrorCode::InvalidRequest),
    ] {
        let (got, answer) = put(body, "phone").await;
        assert_eq!(
            (got, answer["code"].clone()),
            (status, json!(code)),
            "{answer}"
        );
    }
    // Another device's keys, even the same user's: forbidden.
    let (got, answer) = put(good.clone(), "tablet").await;
    assert_eq!(got, 403, "{answer}");
    let (got, _) = put(good, "phone").await;
    assert_eq!(got, 200);

    // One user claiming in a burst is held to the rate: a burst of 20,
    // then 429 (refills of 5 a second may add one or two while the burst
    // is in flight). The thirty claims above were one per user.
    let greedy = cluster.rest(0, "greedy");
    let statuses: Vec<u16> = futures::future::join_all((0..30).map(|_| {
        let greedy = &greedy;
        async move {
            call(
                greedy,
                reqwest::Method::POST,
                "/v1/users/bob/devices/phone/claim",
                None,
            )
            .await
            .0
        }
    }))
    .await;
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert!((20..=25).contains(&ok), "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );

    // Unknown devices and other tenants.
    let (got, answer) = call(
        &cluster.rest(0, "alice"),
        reqwest::Method::POST,
        "/v1/users/bob/devices/watch/claim",
        None,
    )
    .await;
    assert_eq!(
        (got, answer["code"].clone()),
        (404, json!(ErrorCode::NotFound))
    );
    let globex = cluster.rest_as(0, OTHER_TENANT, "mallory", false);
    let (got, listing) = call(&globex, reqwest::Method::GET, "/v1/users/bob/devices", None).await;
    assert_eq!(got, 200);
    assert_eq!(
        listing["devices"],
        json!([]),
        "another tenant's bob has no keys"
    );
    let (got, _) = call(
        &globex,
        reqwest::Method::POST,
        "/v1/users/bob/devices/phone/claim",
        None,
    )
    .await;
    assert_eq!(got, 404);
}
