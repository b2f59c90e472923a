//! The v1.2 safety rows of a commit group: written blindly, since no rule
//! reads them back within a commit.

use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::Ban;

use switchboard_protocol::channels::Invite;

use crate::{ConversationSettings, Listing};

use super::*;

impl GroupView<'_> {
    /// The default policy removes the row.
    pub(super) fn write_policy(
        &mut self,
        key: &ConversationKey,
        settings: &ConversationSettings,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).bytes();
        if settings.is_default() {
            self.batch.remove(&self.s.policies, k);
        } else {
            self.batch.insert(&self.s.policies, k, encode(settings)?);
        }
        Ok(())
    }

    /// `None` lifts the ban of `user`.
    pub(super) fn write_ban(
        &mut self,
        key: &ConversationKey,
        ban: Option<&Ban>,
        user: &str,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).s(user).bytes();
        match ban {
            Some(ban) => self.batch.insert(&self.s.bans, k, encode(ban)?),
            None => self.batch.remove(&self.s.bans, k),
        }
        Ok(())
    }

    /// A public channel's directory row, or none.
    pub(super) fn write_listing(
        &mut self,
        key: &ConversationKey,
        listing: Option<&Listing>,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let k = Key::new().s(t).s(c).bytes();
        match listing {
            Some(l) => self.batch.insert(&self.s.directory, k, encode(l)?),
            None => self.batch.remove(&self.s.directory, k),
        }
        Ok(())
    }

    /// An invite and its code's row, or (revoked) neither.
    pub(super) fn write_invite(
        &mut self,
        key: &ConversationKey,
        code: &str,
        invite: Option<&Invite>,
    ) -> StoreResult<()> {
        let (t, c) = parts(key);
        let row = Key::new().s(t).s(c).s(code).bytes();
        let by_code = Key::new().s(t).s(code).bytes();
        match invite {
            Some(i) => {
                self.batch.insert(&self.s.invites, row, encode(i)?);
                self.batch
                    .insert(&self.s.invite_codes, by_code, c.as_bytes());
            }
            None => {
                self.batch.remove(&self.s.invites, row);
                self.batch.remove(&self.s.invite_codes, by_code);
            }
        }
        Ok(())
    }

    pub(super) fn invite_rows(&self, key: &ConversationKey) -> StoreResult<Vec<Invite>> {
        let (t, c) = parts(key);
        scan(self.snap, &self.s.invites, Key::new().s(t).s(c).bytes())
            .map(|kv| kv.and_then(|(_, v)| decode(&v)))
            .collect()
    }

    /// `None` lifts the block.
    pub(super) fn write_block(
        &mut self,
        tenant: &TenantId,
        user: &str,
        target: &str,
        at: Option<Timestamp>,
    ) {
        let k = Key::new().s(tenant.as_str()).s(user).s(target).bytes();
        match at {
            Some(at) => self
                .batch
                .insert(&self.s.blocks, k, words([at.unix_ms() as u64])),
            None => self.batch.remove(&self.s.blocks, k),
        }
    }

    /// The report's row, and its place among the open ones.
    pub(super) fn write_report(&mut self, tenant: &TenantId, report: &Report) -> StoreResult<()> {
        let k = Key::new()
            .s(tenant.as_str())
            .n(report.report_id.as_u64())
            .bytes();
        self.batch
            .insert(&self.s.reports, k.clone(), encode(report)?);
        if report.status == ReportStatus::Open {
            self.batch.insert(&self.s.open_reports, k, Vec::<u8>::new());
        } else {
            self.batch.remove(&self.s.open_reports, k);
        }
        Ok(())
    }

    pub(super) fn write_expiry(
        &mut self,
        key: &ConversationKey,
        at: Timestamp,
        seq: u64,
        present: bool,
    ) {
        let (t, c) = parts(key);
        let k = Key::new()
            .s(t)
            .s(c)
            .n(at.unix_ms().max(0) as u64)
            .n(seq)
            .bytes();
        if present {
            self.batch.insert(&self.s.expiries, k, Vec::<u8>::new());
        } else {
            self.batch.remove(&self.s.expiries, k);
        }
    }
}
