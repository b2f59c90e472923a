//! Step 3, park: a command that cannot be applied, also alone, is set
//! aside in `SB_PARKED` (durably, before its message is acked), under its
//! own ingest subject, as a message of its own; its sender is told and an
//! alert raised. The partition goes on with the next command. If it
//! cannot be set aside, the writer starts over and tries again.

use async_nats::HeaderMap;
use switchboard_nats::envelope::{Command, CommandReply, HEADER_REPLY, Rejection};
use switchboard_nats::subject::ingest;
use switchboard_nats::trace;
use switchboard_protocol::ErrorCode;
use switchboard_protocol::frames::request_type;

use super::apply::{Applied, Traced};
use super::consume::{Batch, Origin};
use crate::ctx::Ctx;
use crate::error::WorkerError;
use crate::fence::Fence;
use crate::sequencer::{Incoming, Outcome, SequenceError};

/// Header of a parked command: why it could not be applied.
const HEADER_PARKED_ERROR: &str = "Sb-Parked-Error";

/// Parks the commands of `batch` that `applied` gave up on, and returns
/// every outcome to publish, in order: a parked command's answer where
/// the command was.
pub(super) async fn park(
    ctx: &Ctx,
    batch: &Batch,
    applied: Vec<Applied>,
    fence: &Fence,
) -> Result<Vec<Traced>, WorkerError> {
    let mut outcomes = Vec::new();
    for a in applied {
        let (i, error) = match a {
            Applied::Done(done) => {
                outcomes.extend(done);
                continue;
            }
            Applied::Poisoned { command, error } => (command, error),
        };
        let (Some(command), Some(origin)) = (batch.commands.get(i), batch.origins.get(i)) else {
            return Err(WorkerError::StartOver(
                "a parked command is not in its batch".into(),
            ));
        };
        // A parked command is a write: a writer whose lease lapsed leaves
        // it to the partition's next owner.
        fence.check()?;
        set_aside(ctx, batch, command, origin, &error).await?;
        let message = format!(
            "the server could not apply this request ({error}); it was set aside for the operator, do not resend it"
        );
        if let Some(answer) =
            parked_answer(command.command.clone(), command.reply_to.clone(), message)
        {
            outcomes.push((answer, trace::traceparent(&command.span)));
        }
    }
    Ok(outcomes)
}

async fn set_aside(
    ctx: &Ctx,
    batch: &Batch,
    command: &Incoming,
    origin: &Origin,
    error: &SequenceError,
) -> Result<(), WorkerError> {
    let (ingest_subject, payload) = match origin {
        Origin::Alone(i) => match batch.messages.get(*i) {
            Some(m) => (m.subject.to_string(), m.payload.clone()),
            None => {
                return Err(WorkerError::StartOver(
                    "a parked command's message is gone".into(),
                ));
            }
        },
        Origin::Line(line) => (
            ingest(
                batch.partition,
                command.command.tenant(),
                command.command.conversation_id(),
            ),
            line.clone(),
        ),
    };
    let subject = switchboard_nats::subject::parked(&ingest_subject);
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_PARKED_ERROR, error.to_string().as_str());
    if let Some(reply) = &command.reply_to {
        headers.insert(HEADER_REPLY, reply.as_str());
    }
    let stored = ctx
        .js
        .publish_with_headers(subject.clone(), headers, payload)
        .await
        .map_err(|e| WorkerError::nats("parking a command", e))?
        .await
        .map_err(|e| WorkerError::nats("parking a command", e))?;
    crate::metrics::parked();
    tracing::error!(
        %error,
        parked = %subject,
        stream_seq = stored.sequence,
        "a command could not be applied and was parked in SB_PARKED; its partition goes on"
    );
    Ok(())
}

/// The error a parked command's sender gets: an `error` frame for a
/// WebSocket request, a refusal for a REST one.
fn parked_answer(command: Command, reply_to: Option<String>, message: String) -> Option<Outcome> {
    let code = ErrorCode::Internal;
    let rejection = |tenant, sender, device, request_type: &str, client_msg_id, conversation_id| {
        Outcome::Reject {
            tenant,
            sender,
            rejection: Rejection {
                device,
                request_type: request_type.to_owned(),
                client_msg_id,
                conversation_id,
                code,
                message: message.clone(),
                message_id: None,
                retry_after_ms: None,
            },
        }
    };
    let refused = || CommandReply::Refused {
        code,
        message: message.clone(),
        retry_after_ms: None,
    };
    // A send or a vote over REST waits on its reply subject, not on a
    // session.
    if let (Command::Send(_) | Command::Vote(_), Some(subject)) = (&command, &reply_to) {
        return Some(Outcome::Reply {
            subject: subject.clone(),
            reply: refused(),
        });
    }
    let answer = match command {
        Command::Send(c) => rejection(
            c.tenant,
            c.sender,
            c.device,
            request_type::SEND_MESSAGE,
            Some(c.client_msg_id),
            c.conversation_id,
        ),
        Command::Edit(c) => rejection(
            c.tenant,
            c.actor,
            c.device,
            request_type::EDIT_MESSAGE,
            None,
            c.conversation_id,
        ),
        Command::Delete(c) => rejection(
            c.tenant,
            c.actor,
            c.device,
            request_type::DELETE_MESSAGE,
            None,
            c.conversation_id,
        ),
        Command::React(c) => rejection(
            c.by.tenant,
            c.by.actor,
            c.by.device,
            request_type::REACT,
            None,
            c.by.conversation_id,
        ),
        Command::Vote(c) => rejection(
            c.by.tenant,
            c.by.actor,
            c.by.device,
            request_type::VOTE,
            None,
            c.by.conversation_id,
        ),
        Command::CreateConversation(_)
        | Command::AddMembers(_)
        | Command::RemoveMembers(_)
        | Command::SetRole(_)
        | Command::Settings(_)
        | Command::Pin(_)
        | Command::Unpin(_)
        | Command::ClosePoll(_)
        | Command::Previews(_)
        | Command::Block(_)
        | Command::Ban(_)
        | Command::Unban(_)
        | Command::Mute(_)
        | Command::Unmute(_)
        | Command::SetPolicy(_)
        | Command::Report(_)
        | Command::ResolveReport(_)
        | Command::Profile(_)
        | Command::Join(_)
        | Command::Invite(_) => Outcome::Reply {
            subject: reply_to?,
            reply: refused(),
        },
    };
    Some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_nats::envelope::{MembersCommand, SendCommand};
    use switchboard_protocol::{ClientMsgId, Content, ConversationId, DeviceId, TenantId, UserId};

    fn send() -> Command {
        Command::Send(SendCommand {
            tenant: TenantId::new("acme").unwrap(),
            conversation_id: ConversationId::new("c:1").unwrap(),
            sender: UserId::new("alice").unwrap(),
            device: DeviceId::new("phone").unwrap(),
            client_msg_id: ClientMsgId::new("m1").unwrap(),
            content: Content::Text { text: "hi".into() },
            received_at: switchboard_protocol::Timestamp::from_unix_ms(1),
            options: Default::default(),
        })
    }

    #[test]
    fn a_parked_send_answers_its_device_and_a_parked_rest_command_its_caller() {
        match parked_answer(send(), None, "set aside".into()) {
            Some(Outcome::Reject {
                sender, rejection, ..
            }) => {
                assert_eq!(sender.as_str(), "alice");
                assert_eq!(rejection.device.as_str(), "phone");
                assert_eq!(rejection.request_type, "send_message");
                assert_eq!(
                    rejection.client_msg_id.as_ref().map(|c| c.as_str()),
                    Some("m1")
                );
                assert_eq!(rejection.code, ErrorCode::Internal);
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        let add = Command::AddMembers(MembersCommand {
            command_id: switchboard_protocol::MessageId::from_u64(7),
            tenant: TenantId::new("acme").unwrap(),
            conversation_id: ConversationId::new("c:1").unwrap(),
            users: vec![UserId::new("bob").unwrap()],
            actor: UserId::new("alice").unwrap(),
            device: DeviceId::new("phone").unwrap(),
            actor_is_admin: false,
            at: switchboard_protocol::Timestamp::from_unix_ms(1),
        });
        match parked_answer(add.clone(), Some("_INBOX.x".into()), "set aside".into()) {
            Some(Outcome::Reply { subject, reply }) => {
                assert_eq!(subject, "_INBOX.x");
                assert!(matches!(
                    reply,
                    CommandReply::Refused {
                        code: ErrorCode::Internal,
                        ..
                    }
                ));
            }
            other => panic!("expected a reply, got {other:?}"),
        }
        assert!(parked_answer(add, None, "set aside".into()).is_none());
    }
}
