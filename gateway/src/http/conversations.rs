//! `/v1/conversations` and `/v1/conversations/{id}`: creating a
//! conversation, the caller's list, and one conversation in detail; and
//! the views of a conversation the members endpoints answer with too.

use std::collections::BTreeSet;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_backbone::envelope::{
    Command, CommandReply, CreateConversationCommand, direct_conversation_id,
};
use switchboard_protocol::conversation::{ConversationList, CreateConversation, Members};
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, ConversationView, ErrorCode, MemberView, Message,
    Timestamp, UserId,
};
use switchboard_store::{ConversationDetail, ConversationSummary};

use super::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

fn member_views(d: &ConversationDetail) -> Vec<MemberView> {
    d.members
        .iter()
        .map(|m| MemberView {
            user_id: m.user_id.clone(),
            delivered_seq: m.delivered_seq,
            read_seq: m.read_seq,
        })
        .collect()
}

/// A conversation with every member's marks, as `caller` sees it.
pub(super) fn detail_view(d: ConversationDetail, caller: &UserId) -> ConversationView {
    let read = d
        .members
        .iter()
        .find(|m| &m.user_id == caller)
        .map_or(0, |m| m.read_seq);
    let members = Members::Detailed(member_views(&d));
    let r = d.record;
    ConversationView {
        unread_count: r.last_seq.saturating_sub(read),
        conversation_id: r.conversation_id,
        kind: r.kind,
        title: r.title,
        members,
        created_at: r.created_at,
        last_seq: r.last_seq,
        preview: preview(r.last_message.as_ref()),
        last_message: r.last_message,
    }
}

/// None for a deleted message (no content) and ciphertext.
fn preview(last: Option<&Message>) -> Option<String> {
    last.and_then(|m| m.content.as_ref())
        .and_then(Content::preview)
}

fn summary_view(s: ConversationSummary) -> ConversationView {
    let r = s.record;
    ConversationView {
        unread_count: r.last_seq.saturating_sub(s.me.read_seq),
        conversation_id: r.conversation_id,
        kind: r.kind,
        title: r.title,
        members: Members::Ids(s.member_ids),
        created_at: r.created_at,
        last_seq: r.last_seq,
        preview: preview(r.last_message.as_ref()),
        last_message: r.last_message,
    }
}

/// The writer's answer to a command: whether it created something, or
/// its refusal.
pub(super) fn done(reply: CommandReply) -> Result<bool, ApiError> {
    match reply {
        CommandReply::Done { created, .. } => Ok(created),
        CommandReply::Refused { code, message } => Err(ApiError::new(code, message)),
    }
}

/// `POST /v1/conversations`
pub(super) fn create_op() -> Operation {
    Operation::post("Create a conversation")
        .describe("The caller is a member. A direct conversation has exactly one other member and is unique per pair: creating it again returns the existing one with 200.")
        .json_body::<CreateConversation>()
        .reply::<ConversationView>(201, "Created.")
        .reply::<ConversationView>(200, "Already existed (direct conversations).")
        .errors(&[409])
}

pub(super) async fn create(
    State(gw): State<Shared>,
    id: Identity,
    JsonBody(body): JsonBody<CreateConversation>,
) -> Result<(StatusCode, Json<ConversationView>), ApiError> {
    let limits = &gw.config.limits;
    // Characters, as JSON Schema's maxLength counts them.
    if body
        .title
        .as_ref()
        .is_some_and(|t| t.chars().count() > limits.max_title_chars)
    {
        // A field over its documented length: invalid, as the schema
        // says; 413 is for bodies over the byte limit.
        return Err(ApiError::invalid(format!(
            "title is over {} characters",
            limits.max_title_chars
        )));
    }
    if body.members.len() > limits.max_members_per_request {
        return Err(ApiError::invalid(format!(
            "at most {} members per request",
            limits.max_members_per_request
        )));
    }
    gw.take_members_added(&id, body.members.len())?;
    let mut members: BTreeSet<UserId> = body.members.into_iter().collect();
    members.insert(id.user.clone());
    let conversation_id = match body.kind {
        ConversationKind::Direct => {
            let others: Vec<&UserId> = members.iter().filter(|m| **m != id.user).collect();
            let [other] = others.as_slice() else {
                return Err(ApiError::invalid(
                    "a direct conversation has exactly one member besides the caller",
                ));
            };
            direct_conversation_id(&id.user, other)
                .ok_or_else(|| ApiError::new(ErrorCode::Internal, "direct conversation id"))?
        }
        ConversationKind::Group | ConversationKind::Channel => {
            let n = gw.ids.next_id()?;
            ConversationId::new(format!("c:{n}"))
                .map_err(|e| ApiError::new(ErrorCode::Internal, e.to_string()))?
        }
    };
    let reply = gw
        .run_command(Command::CreateConversation(CreateConversationCommand {
            command_id: gw.ids.next_id()?,
            tenant: id.tenant.clone(),
            conversation_id: conversation_id.clone(),
            kind: body.kind,
            title: body.title,
            members: members.into_iter().collect(),
            actor: id.user.clone(),
            device: id.device.clone(),
            at: Timestamp::now(),
        }))
        .await?;
    let created = done(reply)?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation_id, &id.user)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(detail_view(detail, &id.user))))
}

/// `GET /v1/conversations`
pub(super) fn list_op() -> Operation {
    Operation::get("The caller's conversations, most recent activity first")
        .reply::<ConversationList>(200, "The list.")
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
) -> Result<Json<ConversationList>, ApiError> {
    let list = gw.store.conversations_of(&id.tenant, &id.user).await?;
    Ok(Json(ConversationList {
        conversations: list.into_iter().map(summary_view).collect(),
    }))
}

/// `GET /v1/conversations/{id}`
pub(super) fn show_op() -> Operation {
    Operation::get("One conversation with every member's marks")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<ConversationView>(200, "The conversation.")
        .errors(&[404])
}

pub(super) async fn show(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<ConversationView>, ApiError> {
    let conversation = path.get()?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    Ok(Json(detail_view(detail, &id.user)))
}
