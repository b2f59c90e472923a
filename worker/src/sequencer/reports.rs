//! Reports (v1.2): a member reports a message, and a tenant admin's
//! resolution is carried out here, by the conversation's writer, as the
//! same commands would be: a deletion is a deletion (a `message_updated`
//! for the members), a ban a ban (a `member_banned` system message).

use switchboard_nats::envelope::{BanCommand, ReportCommand, ResolveCommand};
use switchboard_protocol::reports::{Report, ReportAction, ReportStatus};

use super::batch::Batch;
use super::prelude::*;
use super::safety::ban_refusal;
use crate::policy::Action;

impl Batch<'_> {
    /// `POST .../messages/{message_id}/reports`: the report, open, with
    /// the message as it is now (its content unless ciphertext). Its id
    /// is the command's.
    pub(super) fn report(
        &mut self,
        c: &ReportCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        if !state.members.contains(&c.by.actor) {
            self.refuse(reply_to, ErrorCode::NotAMember, "only members report");
            return Ok(());
        }
        let Some(message) = self.messages.get(&(key.clone(), c.message_id)).cloned() else {
            self.refuse(
                reply_to,
                ErrorCode::NotFound,
                "no such message in this conversation",
            );
            return Ok(());
        };
        if matches!(message.content, Some(Content::System(_))) {
            self.refuse(
                reply_to,
                ErrorCode::Conflict,
                "system messages cannot be reported",
            );
            return Ok(());
        }
        let sender_id = message.sender_id.clone();
        let snapshot = match message.content {
            Some(Content::Ciphertext { .. }) => None,
            _ => Some(message),
        };
        let report = Report {
            report_id: c.by.command_id,
            conversation_id: c.by.conversation_id.clone(),
            message_id: c.message_id,
            reporter: c.by.actor.clone(),
            sender_id,
            reason: c.reason,
            note: c.note.clone(),
            created_at: c.by.at,
            status: ReportStatus::Open,
            message: snapshot,
            resolved_at: None,
            resolved_by: None,
            action: None,
        };
        self.log.push_other(
            &key,
            Mutation::PutReport {
                tenant: key.tenant.clone(),
                report: Box::new(report.clone()),
            },
        );
        self.outcomes.push(Outcome::Reported {
            tenant: key.tenant.clone(),
            report: Box::new(report),
        });
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }

    /// `POST /v1/admin/reports/{id}/resolve` (tenant admins): the action,
    /// then the report resolved. A resolved report stays as it was.
    pub(super) fn resolve(
        &mut self,
        c: &ResolveCommand,
        reply_to: Option<&str>,
    ) -> Result<(), SequenceError> {
        if !c.by.actor_is_admin {
            self.refuse(
                reply_to,
                ErrorCode::Forbidden,
                "only tenant admins resolve reports",
            );
            return Ok(());
        }
        let Some((key, state)) = self.member_state_for(&c.by, reply_to) else {
            return Ok(());
        };
        let Some(report) = self
            .reports
            .get(&c.report_id)
            .filter(|r| r.conversation_id == c.by.conversation_id)
            .cloned()
        else {
            self.refuse(reply_to, ErrorCode::NotFound, "no such report");
            return Ok(());
        };
        if report.status == ReportStatus::Resolved {
            self.done(reply_to, &c.by.conversation_id, false);
            return Ok(());
        }
        match c.action {
            ReportAction::Dismiss => {}
            ReportAction::DeleteMessage => {
                if self
                    .messages
                    .contains_key(&(key.clone(), report.message_id))
                {
                    let delete = UpdateCommand {
                        command_id: c.by.command_id,
                        tenant: key.tenant.clone(),
                        conversation_id: key.conversation_id.clone(),
                        message_id: report.message_id,
                        actor: c.by.actor.clone(),
                        device: c.by.device.clone(),
                        actor_is_admin: true,
                        content: None,
                        custom: None,
                    };
                    self.update(&delete, Action::Delete)?;
                }
            }
            ReportAction::BanSender => {
                if let Some((code, why)) = ban_refusal(&state, &c.by, &report.sender_id) {
                    self.refuse(reply_to, code, why);
                    return Ok(());
                }
                let ban = BanCommand {
                    by: c.by.clone(),
                    user: report.sender_id.clone(),
                    until: None,
                };
                self.ban(&ban, None)?;
            }
        }
        let resolved = Report {
            status: ReportStatus::Resolved,
            resolved_at: Some(c.by.at),
            resolved_by: Some(c.by.actor.clone()),
            action: Some(c.action),
            ..report
        };
        self.reports.insert(c.report_id, resolved.clone());
        self.log.push_other(
            &key,
            Mutation::PutReport {
                tenant: key.tenant.clone(),
                report: Box::new(resolved),
            },
        );
        self.done(reply_to, &c.by.conversation_id, true);
        Ok(())
    }
}
