//! `/v1/conversations` and `/v1/conversations/{id}`: creating a
//! conversation, the caller's list a page at a time (its cursor is
//! opaque to clients), and one conversation in detail; and the views of a
//! conversation the members endpoints answer with too.

use std::collections::BTreeSet;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use switchboard_nats::envelope::{
    Command, CommandReply, CreateConversationCommand, direct_conversation_id,
};
use switchboard_protocol::conversation::{ConversationList, CreateConversation, Members};
use switchboard_protocol::{
    Content, ConversationId, ConversationKind, ConversationView, ErrorCode, MemberSettings,
    MemberView, Message, Timestamp, UserId,
};
use switchboard_store::{ConversationDetail, ConversationSummary, ListCursor, ListQuery};

use super::extract::Shared;
use super::extract::{JsonBody, PathParams};
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::state::Gateway;

fn member_views(d: &ConversationDetail) -> Vec<MemberView> {
    d.members
        .iter()
        .map(|m| MemberView {
            user_id: m.user_id.clone(),
            delivered_seq: m.delivered_seq,
            read_seq: m.read_seq,
            role: m.role,
        })
        .collect()
}

/// A conversation with every member's marks, as `caller` sees it.
pub(super) fn detail_view(d: ConversationDetail, caller: &UserId) -> ConversationView {
    let me = d.members.iter().find(|m| &m.user_id == caller);
    let read_seq = me.map_or(0, |m| m.read_seq);
    let settings = me.map(|m| m.settings.clone()).unwrap_or_default();
    let members = Members::Detailed(member_views(&d));
    let mut r = d.record;
    r.last_message = last_seen_by(r.last_message, caller);
    ConversationView {
        unread_count: d.reader_unread_count,
        read_seq,
        notifications: settings.notifications,
        muted: muted(&settings),
        mention_count: d.reader_mention_count,
        conversation_id: r.conversation_id,
        kind: r.kind,
        title: r.title,
        members,
        created_at: r.created_at,
        last_seq: r.last_seq,
        preview: preview(r.last_message.as_ref()),
        last_message: r.last_message,
        policy: r.policy,
        custom: r.custom,
        channel: r.channel,
    }
}

/// None for a deleted message (no content) and ciphertext.
fn preview(last: Option<&Message>) -> Option<String> {
    last.and_then(|m| m.content.as_ref())
        .and_then(Content::preview)
}

/// Whether the member's pushes are muted now.
fn muted(settings: &MemberSettings) -> bool {
    settings
        .muted_until
        .is_some_and(|until| until > Timestamp::now())
}

/// The conversation's last message as `caller` may see it: none when it
/// is a shadow-banned sender's not theirs (v1.3). The list and the
/// conversation's own read put the one before in its place
/// ([`visible_last`]); the answers of changes leave it out.
fn last_seen_by(last: Option<Message>, caller: &UserId) -> Option<Message> {
    last.filter(|m| m.seen_by(caller)).map(Message::for_client)
}

fn summary_view(s: ConversationSummary) -> ConversationView {
    let mut r = s.record;
    r.last_message = last_seen_by(r.last_message, &s.me.user_id);
    ConversationView {
        unread_count: s.unread_count,
        read_seq: s.me.read_seq,
        notifications: s.me.settings.notifications,
        muted: muted(&s.me.settings),
        mention_count: s.mention_count,
        conversation_id: r.conversation_id,
        kind: r.kind,
        title: r.title,
        members: Members::Ids(s.member_ids),
        created_at: r.created_at,
        last_seq: r.last_seq,
        preview: preview(r.last_message.as_ref()),
        last_message: r.last_message,
        policy: r.policy,
        custom: r.custom,
        channel: r.channel,
    }
}

/// The writer's answer to a command: whether it created something, or
/// its refusal.
pub(super) fn done(reply: CommandReply) -> Result<bool, ApiError> {
    match reply {
        CommandReply::Done { created, .. } => Ok(created),
        CommandReply::Refused {
            code,
            message,
            retry_after_ms,
        } => Err(ApiError::new(code, message).retry_after(retry_after_ms)),
        CommandReply::Sent { .. } => Err(ApiError::new(
            ErrorCode::Internal,
            "the writer answered a command as a send",
        )),
    }
}

/// `POST /v1/conversations`
pub(super) fn create_op() -> Operation {
    Operation::post("Create a conversation")
        .describe("The caller is a member. A direct conversation has exactly one other member and is unique per pair: creating it again returns the existing one with 200. A user may be put into at most the tenant's `unsolicited_groups_per_day` groups and channels a day (20 by default) by people they have not spoken with: past it 403 `forbidden`, naming them; tenant admins are not limited.")
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
    gw.rates.members_added(&id, body.members.len())?;
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
            actor_is_admin: id.admin,
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

#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct ListParams {
    /// Conversations per page: `conversations_default_limit` (50) when
    /// absent; at least 1, larger values are capped at
    /// `conversations_max_limit` (200).
    limit: Option<usize>,
    /// The `next_cursor` of the page before; absent for the first page.
    #[schemars(regex(pattern = r"^2:[0-9]{1,15}:[A-Za-z0-9._:@-]{1,128}$"))]
    cursor: Option<String>,
}

/// The cursor as clients see it: `2:<last activity, Unix ms>:<conversation
/// id>`, to be passed back as it came (the version first, so that its form
/// may change). The pattern the OpenAPI document states is exactly what
/// decodes, so a client (or a contract test) can tell a cursor from junk.
/// Version 1 was the same text in base64url; it is still taken.
fn encode_cursor(c: &ListCursor) -> String {
    format!(
        "2:{}:{}",
        c.last_activity.unix_ms(),
        c.conversation_id.as_str()
    )
}

fn decode_cursor(text: &str) -> Result<ListCursor, ApiError> {
    let bad = || ApiError::invalid("cursor is not a next_cursor this server gave");
    let legacy;
    let rest = match text.strip_prefix("2:") {
        Some(rest) => rest,
        None => {
            let raw = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
            legacy = String::from_utf8(raw).map_err(|_| bad())?;
            legacy.strip_prefix("1:").ok_or_else(bad)?
        }
    };
    let (ms, id) = rest.split_once(':').ok_or_else(bad)?;
    if ms.is_empty() || ms.len() > 15 || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    Ok(ListCursor {
        last_activity: Timestamp::from_unix_ms(ms.parse().map_err(|_| bad())?),
        conversation_id: ConversationId::new(id).map_err(|_| bad())?,
    })
}

/// `GET /v1/conversations`
pub(super) fn list_op() -> Operation {
    Operation::get("The caller's conversations, most recent activity first, a page at a time")
        .describe("Page with next_cursor (null on the last page). A conversation whose activity changes while the client pages moves to the front: it is never listed twice, and the pages after the move do not hold it; the first page and live `message` events do. Without `limit`, the first `conversations_default_limit` (50) conversations.")
        .query_fields::<ListParams>()
        .reply::<ConversationList>(200, "A page.")
}

pub(super) async fn list(
    State(gw): State<Shared>,
    id: Identity,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<ConversationList>, ApiError> {
    let Query(params) = params?;
    let limits = &gw.config.limits;
    let limit = params
        .limit
        .unwrap_or(limits.conversations_default_limit)
        .clamp(1, limits.conversations_max_limit.max(1));
    let after = params.cursor.as_deref().map(decode_cursor).transpose()?;
    // One more than the page: whether there is a next one.
    let query = ListQuery {
        after,
        limit: limit.saturating_add(1),
    };
    let mut page = gw
        .store
        .conversation_page(&id.tenant, &id.user, query)
        .await?;
    let next_cursor = if page.len() > limit {
        page.truncate(limit);
        page.last()
            .map(|s| encode_cursor(&ListCursor::of(&s.record)))
    } else {
        None
    };
    for s in &mut page {
        visible_last(&gw, &id, &mut s.record).await?;
    }
    Ok(Json(ConversationList {
        conversations: page.into_iter().map(summary_view).collect(),
        next_cursor,
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
    let mut detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    visible_last(&gw, &id, &mut detail.record).await?;
    Ok(Json(detail_view(detail, &id.user)))
}

/// Newest messages read back for a conversation's last message the
/// caller may see, when its last is a shadow-banned sender's (v1.3).
const LOOK_BACK_FOR_LAST: usize = 20;

/// `record`'s last message the caller's way: where it is a shadow-banned
/// sender's not theirs, the newest before it that they may see (among
/// the [`LOOK_BACK_FOR_LAST`] newest, none from before the caller joined
/// where that history is not theirs), so the list's preview does not go
/// blank. Costs two reads (the floor, the history) only for such a
/// conversation.
async fn visible_last(
    gw: &Gateway,
    id: &Identity,
    record: &mut switchboard_store::ConversationRecord,
) -> Result<(), ApiError> {
    if record
        .last_message
        .as_ref()
        .is_none_or(|m| m.seen_by(&id.user))
    {
        return Ok(());
    }
    // Nothing from before the caller joined, where that is not theirs.
    let first = crate::floors::first_seq(
        gw.store.as_ref(),
        &id.tenant,
        &id.user,
        &record.conversation_id,
    )
    .await?;
    let query = switchboard_store::HistoryQuery {
        before_seq: None,
        after_seq: Some(first - 1),
        limit: LOOK_BACK_FOR_LAST,
        thread_root: None,
    };
    let newest = gw
        .store
        .history(&id.tenant, &record.conversation_id, &id.user, query)
        .await?;
    record.last_message = newest
        .into_iter()
        .find(|m| m.thread_id.is_none() && m.seen_by(&id.user));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_decodes_to_what_it_encodes_and_junk_is_refused() {
        let at = ListCursor {
            last_activity: Timestamp::from_unix_ms(1_779_441_701_123),
            conversation_id: ConversationId::new("c:a.b@x-1").unwrap(),
        };
        let text = encode_cursor(&at);
        assert_eq!(text, "2:1779441701123:c:a.b@x-1");
        assert_eq!(decode_cursor(&text).unwrap(), at);
        // Version 1, base64url, from servers before.
        let legacy = URL_SAFE_NO_PAD.encode("1:1779441701123:c:a.b@x-1");
        assert_eq!(decode_cursor(&legacy).unwrap(), at);
        // What the documented pattern allows decodes, at its ends too.
        let longest = format!("2:{}:{}", "9".repeat(15), "z".repeat(128));
        assert!(decode_cursor(&longest).is_ok());
        assert!(decode_cursor("2:0:a").is_ok());
        for junk in [
            "",
            "2:",
            "2::a",
            "2:1:",
            "2:1234567890123456:a",
            "2:x:a",
            "3:1:a",
            "2:1:a b",
        ] {
            assert!(decode_cursor(junk).is_err(), "{junk:?}");
        }
    }
}
