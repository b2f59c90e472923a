//! Tenants (F21) in the `sb_tenants` bucket: each tenant's token
//! verification keys and quotas, key `<tenant>`, value a [`TenantRecord`].
//!
//! Operators change them with `switchboard tenant ...` or the operator API
//! ([`TenantRegistry`]: compare-and-set updates, so two operators never
//! overwrite each other's change); every gateway and worker follows the
//! bucket ([`TenantBook::follow`]) and uses a change from the moment it
//! arrives, without a restart. Tenants of the configuration file still
//! work; a tenant in the bucket replaces the file's entry of the same id.
//!
//! `record.rs` is the record and its check, `validation.rs` the grammar
//! and limits of what it names, `error.rs` its errors,
//! `registry.rs` the operators' reads and writes, `book.rs` the followers'
//! view.

mod book;
mod error;
mod record;
mod registry;
mod validation;

pub use book::*;
pub use error::*;
pub use record::*;
pub use registry::*;
pub use validation::*;

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_protocol::TenantId;

    #[test]
    fn quotas_are_set_by_name_and_refused_when_wrong() {
        let mut q = TenantQuotas::default();
        q.set("max_connections_per_user", "3").unwrap();
        q.set("messages_per_second", "2.5").unwrap();
        assert_eq!(q.max_connections_per_user, Some(3));
        assert_eq!(q.messages_per_second, Some(2.5));
        q.set("max_connections_per_user", "none").unwrap();
        assert_eq!(q.max_connections_per_user, None);
        assert!(q.set("max_connections", "-1").is_err());
        assert!(q.set("messages_per_second", "0").is_err());
        assert!(q.set("max_conections", "3").is_err());
        q.set("max_media_bytes_per_user", "10737418240").unwrap();
        q.set("max_media_bytes", "none").unwrap();
        assert_eq!(q.max_media_bytes_per_user, Some(10 << 30));
        assert_eq!(q.max_media_bytes, None);
        assert!(q.set("max_media_bytes", "-1").is_err());
    }

    #[test]
    fn secrets_are_shown_as_fingerprints_only() {
        let mut r = TenantRecord::new(TenantId::new("acme").unwrap());
        r.hs256_secrets.push("a-secret-of-enough-length".into());
        r.push = Some(PushSettings {
            webhook: Some(WebhookSettings {
                url: "https://hooks.example.com/push".into(),
                secret: "a-webhook-secret-of-length".into(),
            }),
            ..serde_json::from_str("{}").unwrap()
        });
        let shown = serde_json::to_string(&r.redacted()).unwrap();
        assert!(!shown.contains("a-webhook-secret-of-length"));
        assert!(!shown.contains("a-secret-of-enough-length"));
        assert!(shown.contains("sha256:"));
        r.hs256_secrets.push("short".into());
        assert!(validate(&r).is_err());
    }

    #[test]
    fn issuer_and_audience_are_optional_and_bounded() {
        // A record written before they existed reads as before.
        let old = r#"{"id":"acme","hs256_secrets":[],"ed25519_public_keys":[],"quotas":{},
            "created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"}"#;
        let r: TenantRecord = serde_json::from_str(old).unwrap();
        assert_eq!((r.issuer.as_deref(), r.audience.as_deref()), (None, None));
        assert!(validate(&r).is_ok());
        // Unset, they are not written: older processes read the record.
        assert!(!serde_json::to_string(&r).unwrap().contains("issuer"));
        let mut r = r;
        r.issuer = Some("x".repeat(MAX_CLAIM_LEN));
        r.audience = Some("chat".into());
        assert!(validate(&r).is_ok());
        r.issuer = Some("x".repeat(MAX_CLAIM_LEN + 1));
        assert!(validate(&r).is_err());
        r.issuer = Some(String::new());
        assert!(validate(&r).is_err());
    }

    #[test]
    fn a_record_with_anything_but_web_origins_is_refused() {
        let mut r: TenantRecord = serde_json::from_str(
            r#"{"id":"acme","hs256_secrets":[],"ed25519_public_keys":[],"quotas":{},
            "created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        r.allowed_origins = vec!["https://chat.example.com".into()];
        assert!(validate(&r).is_ok());
        r.allowed_origins
            .push("https://chat.example.com/app".into());
        assert!(validate(&r).is_err());
    }
}
