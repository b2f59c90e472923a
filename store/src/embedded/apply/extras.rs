//! The v1.1 rows of a commit group over fjall: reactions and pins, each
//! read through this group's own writes (`Pending`) first.

use super::*;

impl GroupView<'_> {
    /// The keys under `prefix` in `space`, as committed and as this group
    /// changed them (`overlay`: written `true`, removed `false`).
    fn keys_with<V>(
        &self,
        space: &fjall::Keyspace,
        overlay: &std::collections::BTreeMap<Vec<u8>, V>,
        present: impl Fn(&V) -> bool,
        prefix: &[u8],
    ) -> StoreResult<Vec<Vec<u8>>> {
        let mut keys: std::collections::BTreeSet<Vec<u8>> = scan(self.snap, space, prefix.to_vec())
            .map(|kv| kv.map(|(k, _)| k.to_vec()))
            .collect::<StoreResult<_>>()?;
        for (k, v) in overlay
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            if present(v) {
                keys.insert(k.clone());
            } else {
                keys.remove(k);
            }
        }
        Ok(keys.into_iter().collect())
    }

    pub(super) fn reaction_keys(&self, prefix: &[u8]) -> StoreResult<Vec<Vec<u8>>> {
        self.keys_with(&self.s.reactions, &self.pending.reactions, |p| *p, prefix)
    }

    pub(super) fn set_reaction(&mut self, key: Vec<u8>, at: Option<Timestamp>) {
        match at {
            Some(at) => {
                self.batch
                    .insert(&self.s.reactions, key.clone(), words([at.unix_ms() as u64]));
                self.pending.reactions.insert(key, true);
            }
            None => {
                self.batch.remove(&self.s.reactions, key.clone());
                self.pending.reactions.insert(key, false);
            }
        }
    }

    pub(super) fn pin_rows(&self, t: &str, c: &str) -> StoreResult<Vec<crate::PinRow>> {
        let prefix = Key::new().s(t).s(c).bytes();
        let keys = self.keys_with(&self.s.pins, &self.pending.pins, Option::is_some, &prefix)?;
        keys.into_iter()
            .map(|k| match self.pending.pins.get(&k) {
                Some(Some(pin)) => Ok(pin.clone()),
                _ => {
                    let v = self
                        .snap
                        .get(&self.s.pins, &k)
                        .map_err(storage)?
                        .ok_or_else(|| StoreError::Corrupt("pin row vanished".into()))?;
                    decode(&v)
                }
            })
            .collect()
    }

    pub(super) fn set_pin(&mut self, key: Vec<u8>, pin: Option<&crate::PinRow>) -> StoreResult<()> {
        match pin {
            Some(p) => self.batch.insert(&self.s.pins, key.clone(), encode(p)?),
            None => self.batch.remove(&self.s.pins, key.clone()),
        }
        self.pending.pins.insert(key, pin.cloned());
        Ok(())
    }
    pub(super) fn unsolicited_count(
        &self,
        tenant: &TenantId,
        user: &str,
        since: Timestamp,
    ) -> StoreResult<u32> {
        let prefix = Key::new().s(tenant.as_str()).s(user).bytes();
        let stored = unsolicited_times(self.snap, self.s, prefix.clone())?;
        let here = self.pending.unsolicited.get(&prefix);
        let count = stored
            .iter()
            .map(|(_, at)| *at)
            .chain(here.into_iter().flatten().copied())
            .filter(|at| *at >= since.unix_ms())
            .count();
        Ok(u32::try_from(count).unwrap_or(u32::MAX))
    }

    /// Records older than the window are removed on the way.
    pub(super) fn record_unsolicited(
        &mut self,
        key: &ConversationKey,
        user: &str,
        actor: &str,
        at: Timestamp,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let prefix = Key::new().s(t).s(user).bytes();
        let horizon = at.unix_ms().saturating_sub(UNSOLICITED_WINDOW_MS);
        for (old, when) in unsolicited_times(self.snap, self.s, prefix.clone())? {
            if when < horizon {
                self.batch.remove(&self.s.unsolicited, old);
            }
        }
        let row = Key::new().s(t).s(user).s(c).n(at.unix_ms() as u64).bytes();
        self.batch
            .insert(&self.s.unsolicited, row, actor.as_bytes().to_vec());
        self.pending
            .unsolicited
            .entry(prefix)
            .or_default()
            .push(at.unix_ms());
        Ok(())
    }
}
