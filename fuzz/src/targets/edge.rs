//! What strangers send: frames, content and tokens from clients, plugin
//! uploads from tenant admins, and the archive objects in S3.

use std::sync::OnceLock;

use base64::Engine as _;
use switchboard_gateway::{TenantConfig, TenantDirectory};
use switchboard_protocol::{ClientFrame, Content, ContentLimits};

pub(super) fn client_frame(data: &[u8]) {
    // WebSocket text frames are UTF-8 (the socket checks); the gateway
    // parses what it gets.
    let text = String::from_utf8_lossy(data);
    let _ = ClientFrame::parse(&text);
}

pub(super) fn content(data: &[u8]) {
    if let Ok(content) = serde_json::from_slice::<Content>(data) {
        let _ = content.validate_from_client(&ContentLimits::default());
    }
}

const SECRET: &str = "fuzz-tenant-secret-0123456789";

fn directory() -> &'static TenantDirectory {
    static DIRECTORY: OnceLock<TenantDirectory> = OnceLock::new();
    DIRECTORY.get_or_init(|| {
        let tenants = [TenantConfig {
            id: "acme".into(),
            hs256_secrets: vec![SECRET.into()],
            ed25519_public_keys: vec![base64::engine::general_purpose::STANDARD.encode([7u8; 32])],
            allowed_origins: vec![],
            jwks_url: None,
        }];
        match TenantDirectory::from_config(&tenants, 5) {
            Ok(d) => d,
            Err(e) => panic!("the fuzz tenant does not load: {e}"),
        }
    })
}

pub(super) fn jwt(data: &[u8]) {
    let token = String::from_utf8_lossy(data);
    let _ = directory().verify(&token);
}

pub(super) fn plugin_upload(data: &[u8]) {
    let _ = switchboard_plugin_host::host::preflight(data, 8 << 20);
}

pub(super) fn archive_object(data: &[u8]) {
    let _ = switchboard_store::archive::decode("fuzz", data);
}

pub(super) fn frame_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"type":"send_message","client_msg_id":"m1","conversation_id":"c:1","content":{"kind":"text","text":"hi"}}"#,
        r#"{"type":"send_message","client_msg_id":"m2","conversation_id":"dm:a:b","content":{"kind":"image","blob_ref":"m0123456789abcdef0123456789abcdef","mime":"image/png","size":10,"caption":"x"}}"#,
        r#"{"type":"send_message","client_msg_id":"m3","conversation_id":"c:1","content":{"kind":"ciphertext","algorithm":"olm","body":"AAAA","sender_key":"k"}}"#,
        r#"{"type":"edit_message","conversation_id":"c:1","message_id":"123","content":{"kind":"text","text":"x"}}"#,
        r#"{"type":"delete_message","conversation_id":"c:1","message_id":"123"}"#,
        r#"{"type":"ack_delivered","conversation_id":"c:1","seq":5}"#,
        r#"{"type":"ack_read","conversation_id":"c:1","seq":18446744073709551615}"#,
        r#"{"type":"typing","conversation_id":"c:1","state":"start"}"#,
        r#"{"type":"pull_backlog","conversation_id":"c:1","since_seq":0,"limit":1000}"#,
        r#"{"type":"pull_backlog"}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"refresh","token":"a.b.c"}"#,
        r#"{"type":"nope"}"#,
        r#"[1,2,3]"#,
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

pub(super) fn content_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"kind":"text","text":"hello"}"#,
        r#"{"kind":"text","text":""}"#,
        r#"{"kind":"image","blob_ref":"m0123456789abcdef0123456789abcdef","mime":"image/png","size":10,"width":5,"height":2,"caption":"c"}"#,
        r#"{"kind":"file","blob_ref":"m0123456789abcdef0123456789abcdef","mime":"application/pdf","size":10,"name":"a.pdf"}"#,
        r#"{"kind":"voice","blob_ref":"m0123456789abcdef0123456789abcdef","mime":"audio/ogg","size":10,"duration_ms":1000}"#,
        r#"{"kind":"ciphertext","algorithm":"olm","body":"AAAA","sender_key":"k"}"#,
        r#"{"kind":"system","event":"members_added","actor":"a","user_ids":["b"]}"#,
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

pub(super) fn jwt_seeds() -> Vec<Vec<u8>> {
    let now = 1_800_000_000u64;
    let claims = [
        serde_json::json!({"tenant":"acme","sub":"alice","device":"phone","exp":now,"role":"admin"}),
        serde_json::json!({"tenant":"acme","sub":"alice","exp":now}),
        serde_json::json!({"tenant":"other","sub":"bob","exp":0}),
        serde_json::json!({"tenant":"acme"}),
    ];
    let mut seeds: Vec<Vec<u8>> = claims
        .iter()
        .filter_map(|c| {
            jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
                c,
                &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
            )
            .ok()
        })
        .map(String::into_bytes)
        .collect();
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    for header in [
        r#"{"alg":"none","typ":"JWT"}"#,
        r#"{"alg":"EdDSA"}"#,
        r#"{"alg":"HS512"}"#,
        r#"{}"#,
    ] {
        let payload = b64(r#"{"tenant":"acme","sub":"a","exp":1800000000}"#);
        seeds.push(format!("{}.{payload}.c2ln", b64(header)).into_bytes());
    }
    seeds
}

pub(super) fn plugin_seeds() -> Vec<Vec<u8>> {
    vec![
        b"\0asm\x0d\x00\x01\x00".to_vec(),
        b"\0asm\x01\x00\x00\x00".to_vec(),
        b"\0asm".to_vec(),
        b"not wasm at all".to_vec(),
    ]
}

pub(super) fn archive_seeds() -> Vec<Vec<u8>> {
    let contents = |messages: &str| {
        format!(
            r#"{{"format":1,"bucket":{{"tenant":"acme","conversation_id":"c:1","day":20000}},"first_seq":1,"last_seq":1,"messages":{messages},"versions":[]}}"#
        )
    };
    let message = r#"[{"message_id":"1","conversation_id":"c:1","seq":1,"sender_id":"a","sender_device":"d","client_msg_id":"m","content":{"kind":"text","text":"hi"},"created_at":"2026-01-01T00:00:00.000Z","edited_at":null,"deleted_at":null}]"#;
    let mut seeds = Vec::new();
    for json in [contents("[]"), contents(message), "{}".to_owned()] {
        seeds.push(lz4(json.as_bytes()));
    }
    seeds.push(b"\x04\x22\x4d\x18garbage".to_vec());
    seeds
}

/// An LZ4 frame of `bytes`, as the archive writes them.
fn lz4(bytes: &[u8]) -> Vec<u8> {
    // The archive's own encoder would need a whole `BucketContents`; an
    // uncompressed-block frame is valid LZ4 and just as good a seed.
    let mut out = vec![0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82];
    let len = (bytes.len() as u32) | 0x8000_0000;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}
