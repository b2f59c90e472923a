//! The rules of v1.3's open channels: a user joining by themselves, and
//! invites. Who may join, and with which invite, is the writer's
//! decision; here the conversation must exist, and the rows are written.

use switchboard_protocol::Timestamp;
use switchboard_protocol::channels::Invite;

use super::commit::{Commit, Write};
use super::steps::add_member;
use crate::{ConversationKey, MemberState, StoreError, StoreResult};

/// A user joining by themselves (see [`crate::Mutation::Join`]).
pub(super) struct Joining<'a> {
    pub user: &'a str,
    pub at: Timestamp,
    pub read_to: u64,
    pub history_from: Option<u64>,
    pub invite: Option<&'a Invite>,
}

pub(super) async fn join<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    j: Joining<'_>,
) -> StoreResult<()> {
    if view.last_seq(c).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    if view.is_member(c, j.user).await? {
        return Ok(());
    }
    add_member(view, c, j.user, j.at).await?;
    if j.history_from.is_some() {
        let state = MemberState {
            history_from: j.history_from,
            ..MemberState::default()
        };
        view.write(Write::MemberState {
            c,
            user: j.user,
            state: &state,
        })
        .await?;
    }
    view.write(Write::Marks {
        c,
        user: j.user,
        delivered: Some(j.read_to),
        read: Some(j.read_to),
    })
    .await?;
    if let Some(invite) = j.invite {
        set_invite(view, c, &invite.code, Some(invite)).await?;
    }
    Ok(())
}

pub(super) async fn set_invite<C: Commit>(
    view: &mut C,
    c: &ConversationKey,
    code: &str,
    invite: Option<&Invite>,
) -> StoreResult<()> {
    if view.last_seq(c).await?.is_none() {
        return Err(StoreError::NotFound);
    }
    view.write(Write::Invite { c, code, invite }).await
}
