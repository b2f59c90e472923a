//! The v1.2 safety rows in one Scylla commit: a conversation's policy and
//! bans, a user's blocks. Written blindly, since no rule reads them back
//! within a commit, but for the bans an erasure rewrites (`erasure.rs`),
//! which the commit remembers.

use switchboard_protocol::reports::{Report, ReportStatus};
use switchboard_protocol::safety::Ban;
use switchboard_store::ConversationSettings;

use super::*;

impl Tx<'_> {
    /// The default settings delete the row.
    pub(super) fn write_policy(
        &mut self,
        c: &ConversationKey,
        settings: &ConversationSettings,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        if settings.is_default() {
            self.push(&self.store.st.delete_policy, (ts, k.0, k.1));
        } else {
            let body = encode(settings)?;
            self.push(&self.store.st.insert_policy, (k.0, k.1, body, ts));
        }
        Ok(())
    }

    /// `None` lifts the ban of `user`.
    pub(super) fn write_ban(
        &mut self,
        c: &ConversationKey,
        ban: Option<&Ban>,
        user: &str,
    ) -> StoreResult<()> {
        let k = ck(c);
        self.bans.insert((k.clone(), user.to_owned()), ban.cloned());
        let ts = self.ts();
        match ban {
            Some(ban) => {
                let body = encode(ban)?;
                self.push(
                    &self.store.st.insert_ban,
                    (k.0, k.1, user.to_owned(), body, ts),
                );
            }
            None => self.push(&self.store.st.delete_ban, (ts, k.0, k.1, user.to_owned())),
        }
        Ok(())
    }

    /// `None` lifts the block.
    pub(super) fn write_block(
        &mut self,
        tenant: &TenantId,
        user: &str,
        target: &str,
        at: Option<Timestamp>,
    ) {
        let (t, u, b) = (
            tenant.as_str().to_owned(),
            user.to_owned(),
            target.to_owned(),
        );
        let ts = self.ts();
        match at {
            Some(at) => self.push(&self.store.st.insert_block, (t, u, b, at.unix_ms(), ts)),
            None => self.push(&self.store.st.delete_block, (ts, t, u, b)),
        }
    }

    /// A public channel's directory row, or none.
    pub(super) fn write_listing(
        &mut self,
        c: &ConversationKey,
        listing: Option<&switchboard_store::Listing>,
    ) -> StoreResult<()> {
        let k = ck(c);
        let ts = self.ts();
        match listing {
            Some(l) => {
                let body = encode(l)?;
                self.push(&self.store.st.insert_listing, (k.0, k.1, body, ts));
            }
            None => self.push(&self.store.st.delete_listing, (ts, k.0, k.1)),
        }
        Ok(())
    }

    /// An invite and its code's row, or (revoked) neither.
    pub(super) fn write_invite(
        &mut self,
        c: &ConversationKey,
        code: &str,
        invite: Option<&switchboard_protocol::channels::Invite>,
    ) -> StoreResult<()> {
        let (t, cid) = ck(c);
        let ts = self.ts();
        let code = code.to_owned();
        match invite {
            Some(i) => {
                let body = encode(i)?;
                let row = (t.clone(), cid.clone(), code.clone(), body, ts);
                self.push(&self.store.st.insert_invite, row);
                self.push(&self.store.st.insert_invite_code, (t, code, cid, ts));
            }
            None => {
                let row = (ts, t.clone(), cid, code.clone());
                self.push(&self.store.st.delete_invite, row);
                self.push(&self.store.st.delete_invite_code, (ts, t, code));
            }
        }
        Ok(())
    }

    pub(super) fn write_profile(
        &mut self,
        tenant: &TenantId,
        profile: &switchboard_protocol::profile::Profile,
    ) -> StoreResult<()> {
        let body = encode(profile)?;
        let ts = self.ts();
        self.push(
            &self.store.st.insert_profile,
            (
                tenant.as_str().to_owned(),
                profile.user_id.as_str().to_owned(),
                body,
                ts,
            ),
        );
        Ok(())
    }

    pub(super) fn write_report(&mut self, tenant: &TenantId, report: &Report) -> StoreResult<()> {
        let (t, id) = (tenant.as_str().to_owned(), id_db(report.report_id));
        let status = match report.status {
            ReportStatus::Open => "open",
            ReportStatus::Resolved => "resolved",
        };
        let body = encode(report)?;
        let ts = self.ts();
        self.push(
            &self.store.st.insert_report,
            (t.clone(), id, status.to_owned(), body, ts),
        );
        let ts = self.ts();
        match report.status {
            ReportStatus::Open => self.push(&self.store.st.insert_open_report, (t, id, ts)),
            ReportStatus::Resolved => self.push(&self.store.st.delete_open_report, (ts, t, id)),
        }
        Ok(())
    }

    pub(super) fn write_expiry(
        &mut self,
        c: &ConversationKey,
        at: Timestamp,
        seq: u64,
        present: bool,
    ) {
        let k = ck(c);
        let ts = self.ts();
        let (at, seq) = (at.unix_ms(), seq_db(seq));
        if present {
            self.push(&self.store.st.insert_expiry, (k.0, k.1, at, seq, ts));
        } else {
            self.push(&self.store.st.delete_expiry, (ts, k.0, k.1, at, seq));
        }
    }
}
