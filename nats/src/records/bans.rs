//! Tenant-wide bans and shadow bans (v1.3) in `sb_tenant_bans`: key
//! `<tenant>.<user>` for a ban, `<tenant>.<user>.shadow` for a shadow ban
//! (escaped key parts), value a [`TenantBan`].
//!
//! Tenant admins ban and lift through a gateway ([`TenantBans`]); every
//! gateway and worker follows the bucket ([`BanBook::follow`]). A gateway
//! refuses a banned user's tokens from the moment the change arrives; a
//! conversation's writer stores a shadow-banned user's new messages for
//! their own devices alone. The book is read at every token check and
//! every send, so it is a map in memory; a bucket of its own (not the
//! tenant's record) so that tenants of the configuration file ban too,
//! and a ban is one small write, not a rewrite of the record.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_nats::jetstream::{self, kv};
use switchboard_protocol::moderation::TenantBan;
use switchboard_protocol::{TenantId, Timestamp, UserId};

use crate::BackboneError;
use crate::definitions::TENANT_BANS_BUCKET;
use crate::kv_key::{id, part};
use crate::records::follow::follow_bucket;

/// What a ban does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BanKind {
    /// The user's tokens are refused and their connections closed.
    Tenant,
    /// The user's messages are shown to their own devices alone.
    Shadow,
}

/// The last token of a shadow ban's key: no escaped key part ends a key
/// with it, since escaped parts hold no dot.
const SHADOW_SUFFIX: &str = "shadow";

/// The key of `user`'s ban of `kind` in `tenant`.
fn ban_key(kind: BanKind, tenant: &TenantId, user: &UserId) -> String {
    let key = format!("{}.{}", part(tenant.as_str()), part(user.as_str()));
    match kind {
        BanKind::Tenant => key,
        BanKind::Shadow => format!("{key}.{SHADOW_SUFFIX}"),
    }
}

/// The kind, tenant and user a key names, if it names them.
fn of_key(key: &str) -> Option<(BanKind, TenantId, UserId)> {
    let mut tokens = key.split('.');
    let tenant = TenantId::new(id(tokens.next()?)?).ok()?;
    let user = UserId::new(id(tokens.next()?)?).ok()?;
    let kind = match tokens.next() {
        None => BanKind::Tenant,
        Some(SHADOW_SUFFIX) => BanKind::Shadow,
        Some(_) => return None,
    };
    tokens.next().is_none().then_some((kind, tenant, user))
}

/// One kind's bans, by tenant, then user.
type Bans = HashMap<TenantId, HashMap<UserId, TenantBan>>;

/// Both kinds of ban: looked up by reference (no key is built per
/// lookup: a token check and a send each make one).
#[derive(Default)]
struct Books {
    tenant: Bans,
    shadow: Bans,
}

impl Books {
    fn of(&self, kind: BanKind) -> &Bans {
        match kind {
            BanKind::Tenant => &self.tenant,
            BanKind::Shadow => &self.shadow,
        }
    }

    fn of_mut(&mut self, kind: BanKind) -> &mut Bans {
        match kind {
            BanKind::Tenant => &mut self.tenant,
            BanKind::Shadow => &mut self.shadow,
        }
    }

    /// The tenant's bans of `kind`, any time.
    fn all(&self, kind: BanKind, tenant: &TenantId) -> impl Iterator<Item = &TenantBan> {
        self.of(kind)
            .get(tenant)
            .into_iter()
            .flat_map(|b| b.values())
    }
}

/// Called with the kind, tenant and user of a ban that changed.
pub type OnBanChange = Arc<dyn Fn(BanKind, &TenantId, &UserId) + Send + Sync>;

/// Every ban as this process knows it now.
#[derive(Clone, Default)]
pub struct BanBook {
    bans: Arc<RwLock<Books>>,
}

impl BanBook {
    /// The ban of `kind` on `user` in `tenant` at `now`, if one holds.
    /// Cheap: called at every token check and every send.
    pub fn holding(
        &self,
        kind: BanKind,
        tenant: &TenantId,
        user: &UserId,
        now: Timestamp,
    ) -> Option<TenantBan> {
        let bans = self.read();
        let ban = bans.of(kind).get(tenant)?.get(user)?;
        ban.holds_at(now).then(|| ban.clone())
    }

    /// Whether `user`'s messages in `tenant` are theirs alone at `now`.
    pub fn shadowed(&self, tenant: &TenantId, user: &UserId, now: Timestamp) -> bool {
        let bans = self.read();
        bans.of(BanKind::Shadow)
            .get(tenant)
            .and_then(|b| b.get(user))
            .is_some_and(|b| b.holds_at(now))
    }

    /// The tenant's bans of `kind` in force at `now`, newest first (then
    /// by user).
    pub fn in_force(&self, kind: BanKind, tenant: &TenantId, now: Timestamp) -> Vec<TenantBan> {
        let mut bans: Vec<TenantBan> = self
            .read()
            .all(kind, tenant)
            .filter(|b| b.holds_at(now))
            .cloned()
            .collect();
        bans.sort_unstable_by(|a, b| {
            b.banned_at
                .cmp(&a.banned_at)
                .then_with(|| a.user_id.cmp(&b.user_id))
        });
        bans
    }

    /// The tenant's bans of `kind` that ended by themselves before `now`:
    /// kept in the bucket until someone deletes them.
    pub fn ended(&self, kind: BanKind, tenant: &TenantId, now: Timestamp) -> Vec<UserId> {
        self.read()
            .all(kind, tenant)
            .filter(|b| !b.holds_at(now))
            .map(|b| b.user_id.clone())
            .collect()
    }

    /// How many bans of `kind` the tenant has in force at `now`.
    pub fn count(&self, kind: BanKind, tenant: &TenantId, now: Timestamp) -> usize {
        self.read()
            .all(kind, tenant)
            .filter(|b| b.holds_at(now))
            .count()
    }

    /// Takes a change: `Some` bans, `None` lifts.
    pub fn set(&self, kind: BanKind, tenant: &TenantId, user: &UserId, ban: Option<TenantBan>) {
        let mut books = self.bans.write().unwrap_or_else(|e| e.into_inner());
        let bans = books.of_mut(kind);
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
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Books> {
        self.bans.read().unwrap_or_else(|e| e.into_inner())
    }

    fn apply(&self, entry: &kv::Entry, on_change: &OnBanChange) {
        let Some((kind, tenant, user)) = of_key(&entry.key) else {
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
        self.set(kind, &tenant, &user, ban);
        on_change(kind, &tenant, &user);
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

    pub async fn put(
        &self,
        kind: BanKind,
        tenant: &TenantId,
        ban: &TenantBan,
    ) -> Result<(), BackboneError> {
        let body = serde_json::to_vec(ban).map_err(BackboneError::encoding)?;
        self.kv
            .put(ban_key(kind, tenant, &ban.user_id), body.into())
            .await
            .map_err(|e| BackboneError::nats("writing a ban", e))?;
        Ok(())
    }

    pub async fn delete(
        &self,
        kind: BanKind,
        tenant: &TenantId,
        user: &UserId,
    ) -> Result<(), BackboneError> {
        self.kv
            .delete(ban_key(kind, tenant, user))
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
        let key = ban_key(BanKind::Tenant, &tenant, &user);
        assert_eq!(key.matches('.').count(), 1, "{key}");
        assert_eq!(
            of_key(&key),
            Some((BanKind::Tenant, tenant.clone(), user.clone()))
        );
        let shadow = ban_key(BanKind::Shadow, &tenant, &user);
        assert_eq!(shadow.matches('.').count(), 2, "{shadow}");
        assert_eq!(of_key(&shadow), Some((BanKind::Shadow, tenant, user)));
        // A user named `shadow` is a ban, not a shadow ban of nobody.
        assert_eq!(
            of_key("acme.shadow").map(|(k, _, u)| (k, u.to_string())),
            Some((BanKind::Tenant, "shadow".into()))
        );
        assert_eq!(of_key("nodot"), None);
        assert_eq!(of_key("acme.ann.other"), None);
        assert_eq!(of_key("acme.ann.shadow.more"), None);
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
            book.set(BanKind::Tenant, &acme, &b.user_id.clone(), Some(b));
        }
        let a = UserId::new("a").unwrap();
        let tenant = BanKind::Tenant;
        assert!(book.holding(tenant, &acme, &a, now).is_some());
        assert!(
            book.holding(tenant, &other, &a, now).is_none(),
            "bans are per tenant"
        );
        assert!(!book.shadowed(&acme, &a, now), "a ban is no shadow ban");
        book.set(BanKind::Shadow, &acme, &a, Some(ban("a", 40, None)));
        assert!(book.shadowed(&acme, &a, now));
        assert_eq!(book.count(BanKind::Shadow, &acme, now), 1);
        let b = UserId::new("b").unwrap();
        assert!(
            book.holding(tenant, &acme, &b, now).is_none(),
            "ended by itself"
        );
        assert_eq!(book.ended(tenant, &acme, now), [b]);
        let listed: Vec<_> = book
            .in_force(tenant, &acme, now)
            .into_iter()
            .map(|b| b.user_id.to_string())
            .collect();
        assert_eq!(listed, ["c", "a"]);
        assert_eq!(book.count(tenant, &acme, now), 2);
        book.set(tenant, &acme, &a, None);
        assert!(book.holding(tenant, &acme, &a, now).is_none());
        assert_eq!(book.count(tenant, &acme, now), 1);
        assert!(
            book.shadowed(&acme, &a, now),
            "lifting a ban leaves the shadow ban"
        );
    }
}
