//! Striped per-user locks: a user's operations that must not interleave
//! on this gateway (counting their scheduled messages before adding one)
//! take their user's lock. A fixed number of locks, whatever the number
//! of users; two users may share one, which only costs them a wait.

use std::hash::{Hash, Hasher};

use crate::auth::Identity;

pub(crate) struct UserLocks([tokio::sync::Mutex<()>; 64]);

impl Default for UserLocks {
    fn default() -> Self {
        Self(std::array::from_fn(|_| tokio::sync::Mutex::new(())))
    }
}

impl UserLocks {
    pub(crate) fn of(&self, id: &Identity) -> &tokio::sync::Mutex<()> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (id.tenant.as_str(), id.user.as_str()).hash(&mut h);
        &self.0[(h.finish() % self.0.len() as u64) as usize]
    }
}
