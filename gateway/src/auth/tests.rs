//! The directory's verification, table by table: algorithms, claims,
//! lifetimes, rules, origins, and key sets.

#![allow(clippy::unwrap_used)]
use super::*;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};

const SECRET: &str = "a-secret-of-enough-length";

fn directory() -> TenantDirectory {
    TenantDirectory::from_config(
        &[TenantConfig {
            id: "acme".into(),
            hs256_secrets: vec![SECRET.into()],
            ed25519_public_keys: vec![],
            allowed_origins: vec![],
            jwks_url: None,
        }],
        30,
    )
    .unwrap()
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn hs256(claims: serde_json::Value, secret: &str) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

#[test]
fn accepts_a_good_token() {
    let t = hs256(
        serde_json::json!({"tenant":"acme","sub":"alice","device":"phone","exp":now()+60,"role":"admin"}),
        SECRET,
    );
    let id = directory().verify(&t).unwrap();
    assert_eq!(id.user.as_str(), "alice");
    assert_eq!(id.device.as_str(), "phone");
    assert!(id.admin);
    assert!(!id.bot);
}

#[test]
fn a_token_that_says_bot_is_a_bots() {
    let t = hs256(
        serde_json::json!({"tenant":"acme","sub":"helper","exp":now()+60,"bot":true}),
        SECRET,
    );
    let id = directory().verify(&t).unwrap();
    assert!(id.bot);
    assert!(!id.admin);
    let not_bool = hs256(
        serde_json::json!({"tenant":"acme","sub":"helper","exp":now()+60,"bot":"yes"}),
        SECRET,
    );
    assert!(directory().verify(&not_bool).is_err());
}

#[test]
fn refuses_bad_tokens() {
    let d = directory();
    let exp = now() + 60;
    let wrong_key = hs256(
        serde_json::json!({"tenant":"acme","sub":"a","exp":exp}),
        "another-secret-that-is-long",
    );
    assert_eq!(d.verify(&wrong_key), Err(AuthError::BadSignature));
    let expired = hs256(
        serde_json::json!({"tenant":"acme","sub":"a","exp":now()-3600}),
        SECRET,
    );
    assert_eq!(d.verify(&expired), Err(AuthError::Expired));
    let no_exp = hs256(serde_json::json!({"tenant":"acme","sub":"a"}), SECRET);
    assert!(matches!(d.verify(&no_exp), Err(AuthError::Claims(_))));
    let other_tenant = hs256(
        serde_json::json!({"tenant":"globex","sub":"a","exp":exp}),
        SECRET,
    );
    assert_eq!(d.verify(&other_tenant), Err(AuthError::BadSignature));
    let bad_user = hs256(
        serde_json::json!({"tenant":"acme","sub":"a b","exp":exp}),
        SECRET,
    );
    assert!(matches!(d.verify(&bad_user), Err(AuthError::ClaimId(_))));
    // alg: none, with and without a signature.
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"tenant":"acme","sub":"a","exp":{exp}}}"#));
    assert_eq!(
        d.verify(&format!("{header}.{payload}.")),
        Err(AuthError::Algorithm("none".into()))
    );
    assert!(d.verify("garbage").is_err());
    assert_eq!(d.verify(""), Err(AuthError::Missing));
}

#[test]
fn refuses_algorithm_confusion() {
    // A tenant with only an Ed25519 key: an HS256 token "signed" with
    // the public key bytes as the HMAC secret must not verify.
    let public = [7u8; 32];
    let d = TenantDirectory::from_config(
        &[TenantConfig {
            id: "ed".into(),
            hs256_secrets: vec![],
            ed25519_public_keys: vec![STANDARD.encode(public)],
            allowed_origins: vec![],
            jwks_url: None,
        }],
        30,
    )
    .unwrap();
    let forged = encode(
        &Header::new(Algorithm::HS256),
        &serde_json::json!({"tenant":"ed","sub":"a","exp":now()+60}),
        &EncodingKey::from_secret(&public),
    )
    .unwrap();
    assert_eq!(d.verify(&forged), Err(AuthError::BadSignature));
}

#[test]
fn origins_from_the_configuration_file_meet_the_records_rule() {
    let with = |origin: &str| {
        TenantDirectory::from_config(
            &[TenantConfig {
                id: "acme".into(),
                hs256_secrets: vec![SECRET.into()],
                ed25519_public_keys: vec![],
                allowed_origins: vec![origin.into()],
                jwks_url: None,
            }],
            30,
        )
    };
    assert!(with("https://chat.example.com").is_ok());
    assert!(matches!(
        with("https://chat.example.com/"),
        Err(KeyError::Invalid { .. })
    ));
}

#[test]
fn sessions_check_their_token_when_their_tenant_or_an_unseen_change_may_concern_them() {
    let acme = TenantId::new("acme").unwrap();
    let globex = TenantId::new("globex").unwrap();
    let ann = UserId::new("ann").unwrap();
    let bob = UserId::new("bob").unwrap();
    let change = |count, tenant: &TenantId, user: Option<&UserId>| KeyChange {
        count,
        tenant: Some(tenant.clone()),
        user: user.cloned(),
    };
    assert!(change(5, &acme, None).concerns(&acme, &ann, 4));
    assert!(
        !change(5, &globex, None).concerns(&acme, &ann, 4),
        "another tenant's"
    );
    assert!(
        change(6, &globex, None).concerns(&acme, &ann, 4),
        "one was missed"
    );
    assert!(
        change(5, &acme, Some(&ann)).concerns(&acme, &ann, 4),
        "ann's ban"
    );
    assert!(
        !change(5, &acme, Some(&bob)).concerns(&acme, &ann, 4),
        "bob's ban"
    );
    assert!(
        !change(5, &globex, Some(&ann)).concerns(&acme, &ann, 4),
        "another tenant's ann"
    );
}

#[test]
fn a_poisoned_lock_does_not_drop_a_key_change() {
    let d = std::sync::Arc::new(directory());
    let poisoner = d.clone();
    let _ = std::thread::spawn(move || {
        let _held = poisoner.write_keys();
        panic!("a panic while the keys are held");
    })
    .join();
    assert!(d.keys.is_poisoned());
    // The tenant's record now has no key: its tokens stop verifying.
    let acme = TenantId::new("acme").unwrap();
    d.apply_record(&acme, Some(&TenantRecord::new(acme.clone())));
    let t = hs256(
        serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60}),
        SECRET,
    );
    assert_eq!(d.verify(&t), Err(AuthError::BadSignature));
}

#[test]
fn nbf_is_honoured_with_the_leeway() {
    let d = directory();
    let token = |nbf: u64| {
        hs256(
            serde_json::json!({"tenant":"acme","sub":"a","exp":now()+600,"nbf":nbf}),
            SECRET,
        )
    };
    assert!(d.verify(&token(now())).is_ok());
    // The leeway is 30 s: just inside it, and past it.
    assert!(d.verify(&token(now() + 25)).is_ok());
    assert_eq!(d.verify(&token(now() + 60)), Err(AuthError::NotYetValid));
    let bad = hs256(
        serde_json::json!({"tenant":"acme","sub":"a","exp":now()+600,"nbf":"soon"}),
        SECRET,
    );
    assert!(matches!(d.verify(&bad), Err(AuthError::Claims(_))));
}

#[test]
fn tokens_may_live_at_most_the_maximum() {
    // 3600 s at most, and a leeway of 30 s for the issuer's clock.
    let d = directory().with_max_lifetime(3600);
    let t = now();
    let token = |claims: serde_json::Value| hs256(claims, SECRET);
    // exp - iat at the maximum, and just past it (with the leeway).
    let at = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t,"exp":t+3600}));
    assert!(d.verify(&at).is_ok());
    let with_leeway = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t,"exp":t+3630}));
    assert!(d.verify(&with_leeway).is_ok());
    let past = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t,"exp":t+3631}));
    assert_eq!(d.verify(&past), Err(AuthError::TooLong { max_secs: 3600 }));
    // Issued long ago within the maximum, still valid now.
    let old = token(serde_json::json!({"tenant":"acme","sub":"a","iat":t-3000,"exp":t+600}));
    assert!(d.verify(&old).is_ok());
    // Without iat: from now.
    let no_iat = token(serde_json::json!({"tenant":"acme","sub":"a","exp":t+3600}));
    assert!(d.verify(&no_iat).is_ok());
    let no_iat_past = token(serde_json::json!({"tenant":"acme","sub":"a","exp":t+4000}));
    assert_eq!(
        d.verify(&no_iat_past),
        Err(AuthError::TooLong { max_secs: 3600 })
    );
    // An iat in the future does not stretch it.
    let future =
        token(serde_json::json!({"tenant":"acme","sub":"a","iat":t+86400,"exp":t+86400+60}));
    assert_eq!(
        d.verify(&future),
        Err(AuthError::TooLong { max_secs: 3600 })
    );
    // A fractional iat is a NumericDate too.
    let float =
        token(serde_json::json!({"tenant":"acme","sub":"a","iat":t as f64 + 0.5,"exp":t+60}));
    assert!(d.verify(&float).is_ok());
}

#[test]
fn a_tenant_may_require_an_issuer_and_an_audience() {
    let d = directory();
    let acme = TenantId::new("acme").unwrap();
    let mut record = TenantRecord::new(acme.clone());
    record.hs256_secrets = vec![SECRET.into()];
    let token = |extra: serde_json::Value| {
        let mut claims = serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        hs256(claims, SECRET)
    };
    // Required by nobody: any or none.
    d.apply_record(&acme, Some(&record));
    assert!(d.verify(&token(serde_json::json!({}))).is_ok());
    assert!(
        d.verify(&token(serde_json::json!({"iss":"x","aud":"y"})))
            .is_ok()
    );
    record.issuer = Some("https://id.acme.example".into());
    record.audience = Some("chat".into());
    d.apply_record(&acme, Some(&record));
    let good = token(serde_json::json!({"iss":"https://id.acme.example","aud":"chat"}));
    assert!(d.verify(&good).is_ok());
    let listed = token(serde_json::json!({"iss":"https://id.acme.example","aud":["mail","chat"]}));
    assert!(d.verify(&listed).is_ok());
    for bad in [
        serde_json::json!({}),
        serde_json::json!({"aud":"chat"}),
        serde_json::json!({"iss":"https://id.evil.example","aud":"chat"}),
        serde_json::json!({"iss":"https://id.acme.example"}),
        serde_json::json!({"iss":"https://id.acme.example","aud":"mail"}),
        serde_json::json!({"iss":"https://id.acme.example","aud":["mail"]}),
    ] {
        assert!(
            matches!(d.verify(&token(bad.clone())), Err(AuthError::Claims(_))),
            "{bad}"
        );
    }
}

/// The test identity provider's keys (`tests/fixtures/README.md`).
const RSA_1: &[u8] = include_bytes!("../../../tests/fixtures/jwks-rsa-1.der");
const RSA_2: &[u8] = include_bytes!("../../../tests/fixtures/jwks-rsa-2.der");
const EC_1: &[u8] = include_bytes!("../../../tests/fixtures/jwks-ec-1.p8.der");
const PUBLIC_SET: &str = include_str!("../../../tests/fixtures/jwks-public.json");

/// The public set with only the keys `kids`.
fn set_of(kids: &[&str]) -> Vec<u8> {
    let mut all: serde_json::Value = serde_json::from_str(PUBLIC_SET).unwrap();
    let keys = all["keys"].as_array_mut().unwrap();
    keys.retain(|k| kids.contains(&k["kid"].as_str().unwrap()));
    serde_json::to_vec(&all).unwrap()
}

fn signed(algorithm: jsonwebtoken::Algorithm, der: &[u8], kid: Option<&str>) -> String {
    let key = match algorithm {
        jsonwebtoken::Algorithm::ES256 => EncodingKey::from_ec_der(der),
        _ => EncodingKey::from_rsa_der(der),
    };
    let mut header = Header::new(algorithm);
    header.kid = kid.map(str::to_owned);
    encode(
        &header,
        &serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60}),
        &key,
    )
    .unwrap()
}

#[test]
fn a_key_set_gives_its_rs256_es256_and_eddsa_signing_keys_only() {
    let kids = |document: &[u8]| -> Vec<Option<String>> {
        keys::keys_of_set(document)
            .map(|keys| keys.into_iter().map(|k| k.kid).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        kids(PUBLIC_SET.as_bytes()),
        [
            Some("rsa-1".into()),
            Some("rsa-2".into()),
            Some("ec-1".into())
        ]
    );
    // Encryption keys, symmetric keys (never a shared secret from a
    // published set), other curves and algorithms are passed over.
    let mut set: serde_json::Value = serde_json::from_str(PUBLIC_SET).unwrap();
    let keys = set["keys"].as_array_mut().unwrap();
    keys[0]["use"] = "enc".into();
    keys[1]["alg"] = "RS512".into();
    keys[2]["crv"] = "P-384".into();
    keys.push(serde_json::json!({"kty":"oct","kid":"shared","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQ"}));
    assert!(keys::keys_of_set(&serde_json::to_vec(&set).unwrap()).is_err());
    assert!(keys::keys_of_set(b"{}").is_err());
    assert!(keys::keys_of_set(b"not json").is_err());
}

#[test]
fn tokens_of_a_key_set_verify_by_their_kid_and_algorithm() {
    use jsonwebtoken::Algorithm::{ES256, HS256, RS256};
    let d = directory();
    let acme = TenantId::new("acme").unwrap();
    d.jwks.hold(
        &acme,
        "https://id.acme.example/jwks",
        &set_of(&["rsa-1", "ec-1"]),
    );
    assert!(d.verify(&signed(RS256, RSA_1, Some("rsa-1"))).is_ok());
    assert!(d.verify(&signed(ES256, EC_1, Some("ec-1"))).is_ok());
    // No kid: every key of the algorithm is tried.
    assert!(d.verify(&signed(RS256, RSA_1, None)).is_ok());
    // A kid the set lacks: a fetch might find it.
    assert_eq!(
        d.verify(&signed(RS256, RSA_2, Some("rsa-2"))),
        Err(AuthError::UnknownKey(acme.clone()))
    );
    // A known kid with another key's signature, or another algorithm's.
    assert_eq!(
        d.verify(&signed(RS256, RSA_2, Some("rsa-1"))),
        Err(AuthError::BadSignature)
    );
    assert_eq!(
        d.verify(&signed(RS256, RSA_1, Some("ec-1"))),
        Err(AuthError::BadSignature)
    );
    // The record's HS256 secret still works beside the set.
    let t = hs256(
        serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60}),
        SECRET,
    );
    assert!(d.verify(&t).is_ok());
    // Algorithm confusion: an HS256 token whose "secret" is a public
    // key's modulus verifies with nothing (HS256 keys come only from the
    // record).
    let set: serde_json::Value = serde_json::from_str(PUBLIC_SET).unwrap();
    let modulus = set["keys"][0]["n"].as_str().unwrap().to_owned();
    let confused = encode(
        &Header::new(HS256),
        &serde_json::json!({"tenant":"acme","sub":"a","exp":now()+60}),
        &EncodingKey::from_secret(modulus.as_bytes()),
    )
    .unwrap();
    assert_eq!(d.verify(&confused), Err(AuthError::BadSignature));
    // Without a set, an RS256 token is just a bad signature.
    let plain = directory();
    assert_eq!(
        plain.verify(&signed(RS256, RSA_1, Some("rsa-1"))),
        Err(AuthError::BadSignature)
    );
}

#[test]
fn a_key_set_is_due_when_new_after_its_refresh_and_not_before_its_retry() {
    let settings = JwksSettings {
        refresh: std::time::Duration::from_secs(300),
        min_refetch: std::time::Duration::from_secs(30),
        ..JwksSettings::default()
    };
    let d = directory().with_jwks(settings);
    let acme = TenantId::new("acme").unwrap();
    let now = std::time::Instant::now();
    assert!(d.jwks.due(now).is_empty());
    let mut record = TenantRecord::new(acme.clone());
    record.hs256_secrets = vec![SECRET.into()];
    record.jwks_url = Some("https://id.acme.example/jwks".into());
    d.apply_record(&acme, Some(&record));
    assert_eq!(d.jwks.due(now), vec![acme.clone()], "a new URL is fetched");
    d.jwks
        .hold(&acme, "https://id.acme.example/jwks", &set_of(&["rsa-1"]));
    let now = std::time::Instant::now();
    assert!(d.jwks.due(now).is_empty());
    assert!(
        d.jwks
            .due(now + std::time::Duration::from_secs(299))
            .is_empty()
    );
    assert_eq!(
        d.jwks.due(now + std::time::Duration::from_secs(300)),
        vec![acme.clone()]
    );
    // The same URL again keeps the keys; another starts over; none drops it.
    d.apply_record(&acme, Some(&record));
    assert!(
        d.verify(&signed(
            jsonwebtoken::Algorithm::RS256,
            RSA_1,
            Some("rsa-1")
        ))
        .is_ok()
    );
    record.jwks_url = Some("https://id.acme.example/jwks-2".into());
    d.apply_record(&acme, Some(&record));
    assert!(matches!(
        d.verify(&signed(
            jsonwebtoken::Algorithm::RS256,
            RSA_1,
            Some("rsa-1")
        )),
        Err(AuthError::UnknownKey(_))
    ));
    record.jwks_url = None;
    d.apply_record(&acme, Some(&record));
    assert!(
        d.jwks
            .due(now + std::time::Duration::from_secs(600))
            .is_empty()
    );
}

#[test]
fn a_banned_users_valid_token_is_refused_and_only_theirs() {
    use switchboard_protocol::moderation::TenantBan;
    let d = directory();
    let bans = d.bans().clone();
    let acme = TenantId::new("acme").unwrap();
    let mallory = UserId::new("mallory").unwrap();
    let token = |sub: &str| {
        hs256(
            serde_json::json!({"tenant":"acme","sub":sub,"exp":now()+60}),
            SECRET,
        )
    };
    let mut changes = d.subscribe();
    let ban = |until: Option<i64>| TenantBan {
        user_id: mallory.clone(),
        by: UserId::new("root").unwrap(),
        banned_at: Timestamp::now(),
        until: until.map(Timestamp::from_unix_ms),
        reason: Some("spam".into()),
    };
    let soon = Timestamp::now().unix_ms() + 60_000;
    bans.set(
        switchboard_nats::records::bans::BanKind::Tenant,
        &acme,
        &mallory,
        Some(ban(Some(soon))),
    );
    d.ban_changed(&acme, &mallory);
    assert!(changes.has_changed().unwrap());
    assert_eq!(changes.borrow_and_update().user.as_ref(), Some(&mallory));
    assert_eq!(
        d.verify(&token("mallory")),
        Err(AuthError::Banned {
            until: Some(Timestamp::from_unix_ms(soon))
        })
    );
    assert!(d.verify(&token("ann")).is_ok(), "only the banned user");
    // A badly signed token is a bad signature, banned user or not.
    let forged = hs256(
        serde_json::json!({"tenant":"acme","sub":"mallory","exp":now()+60}),
        "another secret of at least 32 bytes!!",
    );
    assert_eq!(d.verify(&forged), Err(AuthError::BadSignature));
    // A ban that ended admits again, as does a lifted one.
    bans.set(
        switchboard_nats::records::bans::BanKind::Tenant,
        &acme,
        &mallory,
        Some(ban(Some(1))),
    );
    assert!(d.verify(&token("mallory")).is_ok());
    bans.set(
        switchboard_nats::records::bans::BanKind::Tenant,
        &acme,
        &mallory,
        Some(ban(None)),
    );
    assert!(matches!(
        d.verify(&token("mallory")),
        Err(AuthError::Banned { until: None })
    ));
    bans.set(
        switchboard_nats::records::bans::BanKind::Tenant,
        &acme,
        &mallory,
        None,
    );
    assert!(d.verify(&token("mallory")).is_ok());
}
