//! The shape of a conversation (kind and member count) that moderation
//! shows a plugin, cached for a few seconds: reading the members on every
//! send would cost more than the plugin call. A plugin may therefore see a
//! member count up to [`SHAPE_TTL`] old; who may send is still decided by
//! the writer, never here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use switchboard_protocol::{ConversationId, ConversationKind, TenantId, UserId};
use switchboard_store::{Store, StoreError};

pub(crate) const SHAPE_TTL: Duration = Duration::from_secs(5);

/// Entries kept before the cache starts over.
const MAX_SHAPES: usize = 100_000;

/// Kind, member count, and when they were read.
type Shape = (ConversationKind, usize, Instant);
type ShapeMap = HashMap<(TenantId, ConversationId), Shape>;

#[derive(Default)]
pub(crate) struct Shapes {
    entries: Mutex<ShapeMap>,
}

impl Shapes {
    /// The conversation's kind and member count; read through `reader`'s
    /// membership when not cached.
    pub(crate) async fn get(
        &self,
        store: &dyn Store,
        tenant: &TenantId,
        conversation: &ConversationId,
        reader: &UserId,
    ) -> Result<(ConversationKind, usize), StoreError> {
        let key = (tenant.clone(), conversation.clone());
        if let Some(&(kind, members, at)) = self.lock().get(&key)
            && at.elapsed() < SHAPE_TTL
        {
            return Ok((kind, members));
        }
        let (kind, members) = store.members(tenant, conversation, reader).await?;
        let mut entries = self.lock();
        if entries.len() >= MAX_SHAPES {
            entries.clear();
        }
        entries.insert(key, (kind, members.len(), Instant::now()));
        Ok((kind, members.len()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ShapeMap> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}
