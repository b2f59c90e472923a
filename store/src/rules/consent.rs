//! Unsolicited adds to groups (see `UnsolicitedAdds`): refused past the
//! limit the mutation states, and recorded against each user. The check
//! is the store's own, after the sequencer's: writers of other partitions
//! may have recorded adds of the same user since the sequencer looked.

use switchboard_protocol::TenantId;

use super::commit::{Commit, Write, conflict};
use crate::{ConversationKey, StoreResult, UnsolicitedAdds};

/// Refuses unsolicited adds of a user who has had `limit` of them within
/// the window already (another partition's writer may have committed some
/// since the sequencer looked).
pub(super) async fn check<C: Commit>(
    view: &mut C,
    tenant: &TenantId,
    adds: Option<&UnsolicitedAdds>,
) -> StoreResult<()> {
    let Some(adds) = adds else {
        return Ok(());
    };
    for u in &adds.users {
        if view
            .unsolicited_since(tenant, u.as_str(), adds.since())
            .await?
            >= adds.limit
        {
            return Err(conflict(format!(
                "{u} has been put into {} groups by people they do not know within the window",
                adds.limit
            )));
        }
    }
    Ok(())
}

pub(super) async fn record<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    adds: Option<&UnsolicitedAdds>,
) -> StoreResult<()> {
    let Some(adds) = adds else {
        return Ok(());
    };
    for u in &adds.users {
        view.write(Write::Unsolicited {
            c,
            user: u.as_str(),
            actor: adds.actor.as_str(),
            at: adds.at,
        })
        .await?;
    }
    Ok(())
}
