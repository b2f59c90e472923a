//! Tenant-wide bans (v1.3) in `sb_tenant_bans`: key `<tenant>.<user>`
//! (escaped key parts), value a [`TenantBan`].
//!
//! Tenant admins ban and lift through a gateway ([`TenantBans`]); every
//! gateway follows the bucket ([`BanBook::follow`]) and refuses a banned
//! user's tokens from the moment the change arrives. The book is read
//! at every token check, so it is a map in memory; a bucket of its own
//! (not the tenant's record) so that tenants of the configuration file
//! ban too, and a ban is one small write, not a rewrite of the record.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_nats::jetstream::{self, kv};
use switchboard_protocol::moderation::TenantBan;
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::BackboneError;
use crate::definitions::TENANT_BANS_BUCKET;
use crate::kv_key::{id, part};
use crate::records::follow::follow_bucket;

/// The key of `user`'s ban in `tenant`.
fn ban_key(tenant: &TenantId, user: &UserId) -> String {
    format!("{}.{}", part(tenant.as_str()), part(user.as_str()))
}

/// The tenant and user a key names, if it names them.
fn of_key(key: &str) -> Option<(TenantId, UserId)> {
    let (tenant, user) = key.split_once('.')?;
    let tenant = TenantId::new(id(tenant)?).ok()?;
    let user = UserId::new(id(user)?).ok()?;
    Some((tenant, user))
}

type Bans = HashMap<TenantId, HashMap<UserId, TenantBan>>;

/// Called with the tenant and user whose ban changed.
pub type OnBanChange = Arc<dyn Fn(&TenantId, &UserId) + Send + Sync>;

/// Every ban as this process knows it now.
#[derive(Clone, Default)]
pub struct BanBook {
    bans: Arc<RwLock<Bans>>,
}

impl BanBook {
    /// The ban that keeps `user` out of `tenant` at `now`, if one does.
    /// Cheap: called at every token check.
    pub fn holding(&self, tenant: &TenantId, user: &UserId, now: Timestamp) -> Option<TenantBan> {
        let bans = self.read();
        let ban = bans.get(tenant)?.get(user)?;
        ban.holds_at(now).then(|| ban.clone())
    }

    /// The tenant's bans in force at `now`, newest first (then by user).
    pub fn in_force(&self, tenant: &TenantId, now: Timestamp) -> Vec<TenantBan> {
        let mut bans: Vec<TenantBan> = self
            .read()
            .get(tenant)
            .map(|b| b.values().filter(|b| b.holds_at(now)).cloned().collect())
            .unwrap_or_default();
        bans.sort_unstable_by(|a, b| {
            b.banned_at
                .cmp(&a.banned_at)
                .then_with(|| a.user_id.cmp(&b.user_id))
        });
        bans
    }

    /// The tenant's bans that ended by themselves before `now`: kept in
    /// the bucket until someone deletes them.
    pub fn ended(&self, tenant: &TenantId, now: Timestamp) -> Vec<UserId> {
        self.read()
            .get(tenant)
            .map(|b| {
                b.values()
                    .filter(|b| !b.holds_at(now))
                    .map(|b| b.user_id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many bans the tenant has in force at `now`.
    pub fn count(&self, tenant: &TenantId, now: Timestamp) -> usize {
        self.read()
            .get(tenant)
            .map(|b| b.values().filter(|b| b.holds_at(now)).count())
            .unwrap_or(0)
    }

    /// Takes a change: `Some` bans, `None` lifts.
    pub fn set(&self, tenant: &TenantId, user: &UserId, ban: Option<TenantBan>) {
        let mut bans = self.bans.write().unwrap_or_else(|e| e.into_inner());
        match ban {
            Some(ban) => {
                bans.entry(tenant.clone())
                    .or_default()
                    .insert(user.clone(), ban);
            }
            None => {
                if let Some(of_tenant) = bans.get_mut(tenant) {
                    of_tenant.remove(user);
                    if of_tenant.is_empty() {
                        bans.remove(tenant);
                    }
                }
            }
        }
    }

    /// Every change under the lock is one insert or removal, so a
    /// poisoned lock is read as it is.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Bans> {
        self.bans.read().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, entry: &kv::Entry, on_change: &OnBanChange) {
        let Some((tenant, user)) = of_key(&entry.key) else {
            tracing::warn!(key = %entry.key, "ignoring an sb_tenant_bans key that names no tenant and user");
            return;
        };
        let ban = if entry.operation == kv::Operation::Put {
            match serde_json::from_slice::<TenantBan>(&entry.value) {
                Ok(ban) if ban.user_id == user => Some(ban),
                Ok(_) => {
                    tracing::warn!(key = %entry.key, "ignoring a ban whose user is not its key's");
                    return;
                }
                Err(e) => {
                    tracing::warn!(key = %entry.key, error = %e, "ignoring a ban that does not parse");
                    return;
                }
            }
        } else {
            None
        };
        self.set(&tenant, &user, ban);
        on_change(&tenant, &user);
    }

    /// Loads every ban, then follows changes in the background. Returns
    /// once the bans of the moment are loaded, so a gateway never admits
    /// a user banned before it started.
    pub async fn follow(
        &self,
        js: &jetstream::Context,
        on_change: OnBanChange,
    ) -> Result<tokio::task::JoinHandle<()>, BackboneError> {
        let book = self.clone();
        follow_bucket(js, TENANT_BANS_BUCKET, move |entry| {
            book.apply(entry, &on_change)
        })
        .await
    }
}

/// Bans and lifts in the bucket. Cheap to clone.
#[derive(Clone)]
pub struct TenantBans {
    kv: Arc<kv::Store>,
}

impl TenantBans {
    pub async fn open(js: &jetstream::Context) -> Result<Self, BackboneError> {
        let kv = js
            .get_key_value(TENANT_BANS_BUCKET)
            .await
            .map_err(|e| BackboneError::nats(format!("bucket {TENANT_BANS_BUCKET}"), e))?;
        Ok(Self { kv: Arc::new(kv) })
    }

    pub async fn put(&self, tenant: &TenantId, ban: &TenantBan) -> Result<(), BackboneError> {
        let body = serde_json::to_vec(ban).map_err(BackboneError::encoding)?;
        self.kv
            .put(ban_key(tenant, &ban.user_id), body.into())
            .await
            .map_err(|e| BackboneError::nats("writing a ban", e))?;
        Ok(())
    }

    pub async fn delete(&self, tenant: &TenantId, user: &UserId) -> Result<(), BackboneError> {
        self.kv
            .delete(ban_key(tenant, user))
            .await
            .map_err(|e| BackboneError::nats("lifting a ban", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ban(user: &str, at: i64, until: Option<i64>) -> TenantBan {
        TenantBan {
            user_id: UserId::new(user).unwrap(),
            by: UserId::new("root").unwrap(),
            banned_at: Timestamp::from_unix_ms(at),
            until: until.map(Timestamp::from_unix_ms),
            reason: None,
        }
    }

    #[test]
    fn keys_name_their_tenant_and_user_whatever_the_ids_hold() {
        let tenant = TenantId::new("acme.eu").unwrap();
        let user = UserId::new("ann@acme.eu").unwrap();
        let key = ban_key(&tenant, &user);
        assert_eq!(key.matches('.').count(), 1, "{key}");
        assert_eq!(of_key(&key), Some((tenant, user)));
        assert_eq!(of_key("nodot"), None);
    }

    #[test]
    fn the_book_holds_bans_in_force_newest_first() {
        let book = BanBook::default();
        let acme = TenantId::new("acme").unwrap();
        let other = TenantId::new("other").unwrap();
        let now = Timestamp::from_unix_ms(100);
        for b in [
            ban("a", 10, None),
            ban("b", 20, Some(50)),
            ban("c", 30, Some(200)),
        ] {
            book.set(&acme, &b.user_id.clone(), Some(b));
        }
        let a = UserId::new("a").unwrap();
        assert!(book.holding(&acme, &a, now).is_some());
        assert!(
            book.holding(&other, &a, now).is_none(),
            "bans are per tenant"
        );
        let b = UserId::new("b").unwrap();
        assert!(book.holding(&acme, &b, now).is_none(), "ended by itself");
        assert_eq!(book.ended(&acme, now), [b]);
        let listed: Vec<_> = book
            .in_force(&acme, now)
            .into_iter()
            .map(|b| b.user_id.to_string())
            .collect();
        assert_eq!(listed, ["c", "a"]);
        assert_eq!(book.count(&acme, now), 2);
        book.set(&acme, &a, None);
        assert!(book.holding(&acme, &a, now).is_none());
        assert_eq!(book.count(&acme, now), 1);
    }
}
