//! What the backbone's KV buckets and object stores hold, read as the
//! processes that follow them read it. An input holding a key and a
//! value has the key on its first line.
//!
//! `sb_nodes` and `sb_workers` are not here: their values are only
//! compared with the holder's own bytes and their keys only counted, so
//! nothing of them is decoded.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use base64::Engine as _;
use switchboard_gateway::{DeviceRecord, TenantDirectory, UserRecord, decode_keys_value};
use switchboard_nats::kv_key;
use switchboard_nats::records::erasures::{self, ErasureAnswer, ErasureRecord};
use switchboard_nats::records::push_tokens::{self, DeviceToken};
use switchboard_nats::records::refusals::Refusal;
use switchboard_nats::records::{presence, tenants};
use switchboard_plugin_host::PluginLimits;
use switchboard_plugin_host::hook::Hook;
use switchboard_plugin_host::precompiled::Precompiler;
use switchboard_plugin_host::registry::{self, Activation, OnFailure, VersionRecord};
use switchboard_protocol::push::{PushProvider, PushRegistration};
use switchboard_protocol::{DeviceId, ErrorCode, TenantId, Timestamp, UserId};

use super::input::{at_once, first_line, lines};

/// `max_component_bytes` as an operator might set it, small enough that
/// a fuzzed object can hold more (the default is 16 MiB).
pub(super) const MAX_COMPONENT_BYTES: usize = 16 << 10;

fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

/// `sb_tenants`: every gateway and worker follows it (`TenantBook`), and
/// a gateway takes each record's keys and origins.
pub(super) fn tenant_record(data: &[u8]) {
    let (key, value) = first_line(data);
    let Some(id) = text(key).and_then(tenants::tenant_of_key) else {
        return;
    };
    let Ok(record) = tenants::decode_record(&id, value) else {
        return;
    };
    if let Ok(directory) = TenantDirectory::from_config(&[], 0) {
        directory.apply_record(&id, Some(&record));
    }
    let _ = tenants::validate(&record);
    let _ = record.redacted();
}

/// `sb_push_tokens`: a user's devices, read by the push stage.
pub(super) fn push_tokens(data: &[u8]) {
    let _ = push_tokens::decode_devices(data);
}

/// `sb_presence` keys: users on gateways, and routers. Their values (a
/// refresh time) are never read.
pub(super) fn presence_key(data: &[u8]) {
    let _ = text(data).and_then(presence::parse_key);
}

/// `sb_last_seen`: read for a presence lookup, shown as RFC 3339.
pub(super) fn last_seen(data: &[u8]) {
    let _ = presence::parse_last_seen(data).map(Timestamp::to_rfc3339);
}

/// `sb_refused`: why a send was refused, read to answer its resend.
pub(super) fn refusal(data: &[u8]) {
    let _ = serde_json::from_slice::<Refusal>(data);
}

/// `sb_erasures`: an erasure job, read by the leader to go on with it
/// and by a gateway to show it; and a worker's answer to an erasure
/// request, read by the gateway that asked.
pub(super) fn erasure(data: &[u8]) {
    if let Ok(record) = serde_json::from_slice::<ErasureRecord>(data) {
        let _ = serde_json::to_vec(&record.job);
        let _ = erasures::is_job_id(&record.job.job_id);
    }
    let _ = serde_json::from_slice::<ErasureAnswer>(data);
}

/// `sb_keys`: a device's keys or a user's device list.
pub(super) fn device_keys(data: &[u8]) {
    let _ = decode_keys_value::<DeviceRecord>("t.u.d", data);
    let _ = decode_keys_value::<UserRecord>("t.u", data);
}

/// `sb_plugins` with the `sb_plugin_code` object the record names: the
/// key, the record, then the object's bytes. Every gateway and worker
/// loads each version so; a deploy reads an `sb_plugin_uploads` object
/// the same way, its description's size in place of the record's.
pub(super) fn plugin_record(data: &[u8]) {
    let (key, rest) = first_line(data);
    let (record, object) = first_line(rest);
    let _ = text(key).and_then(registry::parse_key);
    let Ok(record) = serde_json::from_slice::<VersionRecord>(record) else {
        return;
    };
    let _ = at_once(switchboard_plugin_host::objects::read_component(
        object,
        &record,
        MAX_COMPONENT_BYTES,
    ));
}

/// The engine every artifact input is loaded by: one of the plugin
/// host's, with a pool of one instance (the pool does not shape code).
static PRECOMPILER: LazyLock<Option<(Precompiler, Vec<u8>, String)>> = LazyLock::new(|| {
    let limits = PluginLimits {
        pool_size: 1,
        ..PluginLimits::default()
    };
    let precompiler = Precompiler::for_limits(&limits).ok()?;
    let (artifact, digest) = precompiler.compile_and_seal(EMPTY_COMPONENT).ok()?;
    Some((precompiler, artifact, digest))
});

/// The smallest component there is, `(component)`.
const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

/// `max_precompiled_bytes` as an operator might set it, small enough that
/// a fuzzed artifact can be larger.
const MAX_ARTIFACT_BYTES: usize = 48 << 10;

/// `sb_plugin_compiled`: every gateway and worker loads a version's
/// machine code from here rather than compile it, once its header names
/// this engine and the component wanted and its SHA-256 matches. Nothing
/// but an artifact this engine sealed may reach wasmtime.
pub(super) fn compiled_artifact(data: &[u8]) {
    let Some((precompiler, _, digest)) = PRECOMPILER.as_ref() else {
        return;
    };
    let _ = precompiler.load(data, digest, MAX_ARTIFACT_BYTES);
}

pub(super) fn compiled_artifact_seeds() -> Vec<Vec<u8>> {
    let Some((_, artifact, _)) = PRECOMPILER.as_ref() else {
        return Vec::new();
    };
    let mut seeds = vec![artifact.clone()];
    // Each part of the header wrong in turn: the magic, the engine's
    // fingerprint, the component's digest, the code's SHA-256, its length;
    // then the code cut short, and the header alone.
    for at in [0, 8, 40, 111, 143, artifact.len() - 1] {
        if let Some(byte) = artifact.get(at) {
            let mut wrong = artifact.clone();
            wrong[at] = byte ^ 0x5a;
            seeds.push(wrong);
        }
    }
    seeds.push(artifact[..artifact.len() / 2].to_vec());
    seeds.push(artifact[..151.min(artifact.len())].to_vec());
    seeds
}

/// `sb_push_collapse`: when a device last got a push for a conversation.
pub(super) fn collapse_mark(data: &[u8]) {
    for now in [0, 1_779_441_701_123, i64::MAX, i64::MIN] {
        for window_ms in [0, 30_000, u64::MAX] {
            let _ = switchboard_push::collapsed(data, now, window_ms);
        }
    }
}

fn at() -> Timestamp {
    Timestamp::from_unix_ms(1_779_441_701_123)
}

pub(super) fn tenant_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    if let Ok(id) = TenantId::new("acme.eu") {
        let mut record = tenants::TenantRecord::new(id.clone());
        record.hs256_secrets = vec!["fuzz-tenant-secret-0123456789".into()];
        record.ed25519_public_keys =
            vec![base64::engine::general_purpose::STANDARD.encode([7u8; 32])];
        record.allowed_origins = vec!["https://chat.example.com".into()];
        record.quotas.max_message_bytes = Some(4096);
        record.quotas.messages_per_second = Some(2.5);
        record.quotas.plugin_fuel = Some(u64::MAX);
        let key = kv_key::part(id.as_str());
        if let Ok(json) = serde_json::to_vec(&record) {
            seeds.push(lines(&[key.as_bytes(), &json]));
            // Under another tenant's key: refused.
            seeds.push(lines(&[b"acme", &json]));
        }
    }
    let push = r#"{"id":"acme","created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z","push":{"preview":"text","delay_ms":18446744073709551615,"collapse_ms":18446744073709551615,"max_attempts":0,"webhook":{"url":"https://push.example.com/p","secret":"0123456789abcdef"},"fcm":{"project_id":"p","client_email":"a@b","private_key":"-----BEGIN PRIVATE KEY-----"},"apns":{"team_id":"T","key_id":"K","private_key":"k","topic":"t"}}}"#;
    seeds.push(lines(&[b"acme", push.as_bytes()]));
    let short_key = r#"{"id":"acme","hs256_secrets":["short"],"ed25519_public_keys":["!!"],"quotas":{"messages_per_second":-1},"created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z"}"#;
    seeds.push(lines(&[b"acme", short_key.as_bytes()]));
    seeds.push(lines(&[b"a=ZZ", b"{}"]));
    seeds
}

pub(super) fn push_token_seeds() -> Vec<Vec<u8>> {
    let mut devices = BTreeMap::new();
    for (device, provider, token) in [
        ("phone", PushProvider::Apns, "a1b2c3".to_owned()),
        ("tablet", PushProvider::Fcm, "f".repeat(200)),
        ("web", PushProvider::Webhook, "hook-token".to_owned()),
    ] {
        if let Ok(device) = DeviceId::new(device) {
            let registration = PushRegistration { provider, token };
            devices.insert(
                device,
                DeviceToken {
                    registration,
                    updated_at: at(),
                },
            );
        }
    }
    let mut seeds: Vec<Vec<u8>> = serde_json::to_vec(&devices).into_iter().collect();
    seeds.push(b"{}".to_vec());
    seeds.push(br#"{"d":{"provider":"apns","token":"","updated_at":"x"}}"#.to_vec());
    seeds
}

pub(super) fn presence_key_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    if let (Ok(tenant), Ok(user)) = (TenantId::new("acme.eu"), UserId::new("j.doe@x")) {
        seeds.push(presence::presence_key(&tenant, &user, "gw-1").into_bytes());
        seeds.push(presence::last_seen_key(&tenant, &user).into_bytes());
    }
    seeds.push(presence::router_key("gw.1@x").into_bytes());
    for key in ["a.b", "a.b.c.d", "=ZZ.b.c", "routers", "a..b", "=4"] {
        seeds.push(key.as_bytes().to_vec());
    }
    seeds
}

pub(super) fn last_seen_seeds() -> Vec<Vec<u8>> {
    let now = at().unix_ms().to_string();
    [
        now.as_str(),
        "-9223372036854775808",
        "9223372036854775807",
        "99999999999999999999",
        "",
        "1e3",
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

pub(super) fn refusal_seeds() -> Vec<Vec<u8>> {
    let refusal = Refusal {
        code: ErrorCode::RejectedByPolicy,
        message: "the moderation plugin refused it".into(),
    };
    let mut seeds: Vec<Vec<u8>> = serde_json::to_vec(&refusal).into_iter().collect();
    seeds.push(br#"{"code":"no_such_code","message":""}"#.to_vec());
    seeds
}

pub(super) fn erasure_seeds() -> Vec<Vec<u8>> {
    let (Ok(tenant), Ok(user)) = (TenantId::new("acme"), UserId::new("ada")) else {
        return Vec::new();
    };
    let job = switchboard_protocol::jobs::Job {
        job_id: erasures::job_id(&tenant, &user),
        kind: switchboard_protocol::jobs::JobKind::EraseUser,
        state: switchboard_protocol::jobs::JobState::Running,
        created_at: Timestamp::from_unix_ms(1),
        updated_at: Timestamp::from_unix_ms(2),
        finished_at: None,
        conversations_left: 3,
        pseudonym: "erased-00000000000000aa".into(),
        error: None,
    };
    let record = ErasureRecord {
        tenant,
        user: Some(user),
        step: erasures::ErasureStep::Conversations,
        job: job.clone(),
    };
    [
        serde_json::to_vec(&record),
        serde_json::to_vec(&ErasureAnswer::Job(job)),
        serde_json::to_vec(&ErasureAnswer::UnknownUser),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub(super) fn device_key_seeds() -> Vec<Vec<u8>> {
    let key = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
    let signature = base64::engine::general_purpose::STANDARD.encode([1u8; 64]);
    let device = format!(
        r#"{{"identity_key":"{key}","identity_dh_key":"{key}","signed_prekey":{{"key_id":1,"public_key":"{key}","signature":"{signature}"}},"one_time_prekeys":[{{"key_id":1,"public_key":"{key}"}},{{"key_id":4294967295,"public_key":"{key}"}}],"updated_at":"2026-01-01T00:00:00.000Z"}}"#
    );
    [
        device.as_str(),
        r#"{"devices":["phone","laptop"]}"#,
        r#"{"devices":[]}"#,
        r#"{"identity_key":"","signed_prekey":{"key_id":0,"public_key":"","signature":""},"one_time_prekeys":[],"updated_at":"2026-01-01T00:00:00.000Z"}"#,
    ]
    .map(|s| s.as_bytes().to_vec())
    .to_vec()
}

/// An input of [`plugin_record`]: the record `(size, digest)` names,
/// and the object.
pub(super) fn plugin_input(size: u64, digest: &str, object: &[u8]) -> Vec<u8> {
    let key = TenantId::new("acme.eu")
        .map(|t| registry::kv_key(&t, Hook::Moderation))
        .unwrap_or_default();
    let record = VersionRecord {
        digest: digest.to_owned(),
        size,
        config: BTreeMap::from([("blocklist".to_owned(), "spam".to_owned())]),
        on_failure: OnFailure::Open,
        activation: Activation::Deploy,
        activated_at: at(),
        activated_by: "admin".into(),
    };
    let record = serde_json::to_vec(&record).unwrap_or_default();
    lines(&[key.as_bytes(), &record, object])
}

pub(super) fn plugin_record_seeds() -> Vec<Vec<u8>> {
    let object = b"\0asm\x0d\x00\x01\x00 a component".as_slice();
    let digest = switchboard_plugin_host::host::digest(object);
    let len = object.len() as u64;
    let too_long = vec![7u8; MAX_COMPONENT_BYTES + 1];
    let mut seeds = vec![
        plugin_input(len, &digest, object),
        // Claims that are too small, too large, absurd: none sizes more
        // than max_component_bytes.
        plugin_input(1, &digest, object),
        plugin_input(len + 1, &digest, object),
        plugin_input(MAX_COMPONENT_BYTES as u64, &digest, object),
        plugin_input(1 << 50, &digest, object),
        plugin_input(u64::MAX, &digest, object),
        plugin_input(len, "sha256:00", object),
        // An object larger than max_component_bytes whatever is claimed.
        plugin_input(1, &digest, &too_long),
    ];
    if let Ok(tenant) = TenantId::new("acme") {
        let shadow = registry::shadow_kv_key(&tenant, Hook::FanOut);
        seeds.push(lines(&[shadow.as_bytes(), b"{}", b""]));
    }
    seeds
}

pub(super) fn collapse_mark_seeds() -> Vec<Vec<u8>> {
    last_seen_seeds()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::check;
    use crate::targets::Target;
    use crate::testing::{counters, target};
    use switchboard_plugin_host::registry::LoadError;

    /// The load as it was before issue 26: the record's `size` sized the
    /// buffer the object was read into.
    fn plugin_record_trusting_its_size(data: &[u8]) {
        let (_, rest) = first_line(data);
        let (record, object) = first_line(rest);
        if let Ok(record) = serde_json::from_slice::<VersionRecord>(record) {
            let mut bytes = Vec::with_capacity(record.size as usize);
            bytes.extend_from_slice(object);
        }
    }

    #[test]
    fn only_the_whole_artifact_of_the_component_wanted_reaches_wasmtime() {
        let (precompiler, artifact, digest) = PRECOMPILER.as_ref().unwrap();
        let seeds = compiled_artifact_seeds();
        assert_eq!(&seeds[0], artifact);
        assert!(
            precompiler
                .load(&seeds[0], digest, MAX_ARTIFACT_BYTES)
                .is_ok()
        );
        for (i, damaged) in seeds.iter().enumerate().skip(1) {
            assert!(
                precompiler
                    .load(damaged, digest, MAX_ARTIFACT_BYTES)
                    .is_err(),
                "seed {i} was loaded"
            );
        }
        assert!(
            precompiler
                .load(artifact, "sha256:00", MAX_ARTIFACT_BYTES)
                .is_err()
        );
    }

    #[test]
    fn a_plugin_record_claiming_2_pow_50_bytes_costs_only_what_it_holds() {
        let _turn = counters();
        let target = target("plugin_record");
        let object = b"\0asm\x0d\x00\x01\x00".as_slice();
        let digest = switchboard_plugin_host::host::digest(object);
        let load = |claimed: u64| {
            let input = plugin_input(claimed, &digest, object);
            let record = first_line(first_line(&input).1).0;
            let record: VersionRecord = serde_json::from_slice(record).unwrap();
            at_once(switchboard_plugin_host::objects::read_component(
                object,
                &record,
                MAX_COMPONENT_BYTES,
            ))
            .unwrap()
        };
        for claimed in [1 << 50, u64::MAX, 256 << 20] {
            let used = check(target, &plugin_input(claimed, &digest, object)).unwrap();
            assert!(used < 64 << 10, "a claim of {claimed} cost {used} bytes");
            assert!(matches!(load(claimed), Err(LoadError::TooLarge { .. })));
        }
        // A claim below the bound is a hint only: the object is what loads.
        assert_eq!(load(8).unwrap(), object);
        assert_eq!(load(1).unwrap(), object);
        // Positive control: the load before the fix is a finding on the
        // same record (one claiming 2^50 bytes aborted the process outright,
        // which was case 3's crash loop; 256 MiB the allocator grants
        // untouched, so it can be counted).
        let before = Target {
            name: "plugin_record_before_the_fix",
            run: plugin_record_trusting_its_size,
            ..*target
        };
        let finding = check(&before, &plugin_input(256 << 20, &digest, object)).unwrap_err();
        assert!(finding.starts_with("allocated"), "{finding}");
    }

    #[test]
    fn a_tenant_record_is_taken_only_under_its_own_key() {
        let _turn = counters();
        let id = TenantId::new("acme").unwrap();
        let json = serde_json::to_vec(&tenants::TenantRecord::new(id.clone())).unwrap();
        assert!(tenants::decode_record(&id, &json).is_ok());
        let other = TenantId::new("other").unwrap();
        assert!(matches!(
            tenants::decode_record(&other, &json),
            Err(tenants::TenantError::Invalid(_))
        ));
    }

    #[test]
    fn collapse_marks_at_the_ends_of_i64_do_not_overflow() {
        let _turn = counters();
        let now = at().unix_ms();
        // `now - last` overflowed here (a panic in debug builds).
        assert!(!switchboard_push::collapsed(
            b"-9223372036854775808",
            now,
            30_000
        ));
        assert!(switchboard_push::collapsed(
            b"9223372036854775807",
            i64::MIN,
            30_000
        ));
        assert!(switchboard_push::collapsed(b"1779441700000", now, 30_000));
        assert!(!switchboard_push::collapsed(b"1779441600000", now, 30_000));
        // A mark that does not parse is none.
        assert!(!switchboard_push::collapsed(b"soon", now, 30_000));
    }
}
