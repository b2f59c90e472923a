//! Open channels (v1.3): the tenant's directory of public channels
//! (`GET /v1/channels`), joining one (`POST /v1/conversations/{id}/join`),
//! invites (`POST/GET /v1/conversations/{id}/invites`, `DELETE
//! .../invites/{code}`) and taking one up (`GET /v1/invites/{code}`,
//! `POST /v1/invites/{code}/accept`). Each change is a command its
//! conversation's writer checks (visibility, bans, blocks, an invite's
//! uses and expiry); the directory is read from its own rows.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use switchboard_nats::envelope::{Command, InviteCommand, JoinCommand};
use switchboard_protocol::channels::{
    ChannelDirectory, ChannelEntry, CreateInvite, DEFAULT_DIRECTORY_LIMIT, DIRECTORY_SCAN_ROWS,
    INVITE_CODE_CHARS, Invite, InviteList, InvitePreview, MAX_DIRECTORY_LIMIT,
    MAX_DIRECTORY_QUERY_CHARS, is_invite_code,
};
use switchboard_protocol::{ConversationId, ConversationView, ErrorCode, Timestamp};
use switchboard_store::{ConversationKey, Listing};

use super::conversations::{detail_view, done};
use super::extract::{JsonBody, PathParams, Shared};
use super::openapi::Operation;
use super::roles::actor;
use crate::auth::Identity;
use crate::error::ApiError;

/// Directory rows read per store call while a page fills.
const DIRECTORY_CHUNK: usize = 200;

#[derive(Deserialize, schemars::JsonSchema)]
pub(super) struct DirectoryParams {
    /// Only channels whose title or topic contains this, ignoring case (at
    /// most 100 characters).
    #[schemars(length(max = 100))]
    q: Option<String>,
    /// The `next_cursor` of the page before.
    cursor: Option<ConversationId>,
    /// Channels per page: 20 when absent, at most 50.
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

/// `GET /v1/channels`
pub(super) fn directory_op() -> Operation {
    Operation::get("The tenant's public channels")
        .describe("Groups and channels whose `visibility` is `public`, oldest first, each with `conversation_id`, `title`, `topic` and `member_count`. `q` keeps those whose title or topic contains it, ignoring case. A page looks at 2000 channels at most: with `q`, a page may hold fewer than `limit` (even none) and still have a `next_cursor`; follow it until it is null.")
        .query_fields::<DirectoryParams>()
        .reply::<ChannelDirectory>(200, "A page of the directory.")
        .errors(&[400])
}

pub(super) async fn directory(
    State(gw): State<Shared>,
    id: Identity,
    params: Result<Query<DirectoryParams>, QueryRejection>,
) -> Result<Json<ChannelDirectory>, ApiError> {
    let Query(params) = params?;
    let q = params.q.unwrap_or_default().trim().to_lowercase();
    if q.chars().count() > MAX_DIRECTORY_QUERY_CHARS {
        return Err(ApiError::invalid(format!(
            "q is at most {MAX_DIRECTORY_QUERY_CHARS} characters"
        )));
    }
    let limit = match params.limit {
        None => DEFAULT_DIRECTORY_LIMIT,
        Some(n) if (1..=MAX_DIRECTORY_LIMIT).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::invalid(format!(
                "limit is 1 to {MAX_DIRECTORY_LIMIT}"
            )));
        }
    };
    let (found, next_cursor) = directory_page(&gw, &id, &q, params.cursor, limit).await?;
    let keys = found
        .iter()
        .map(|(c, _)| ConversationKey::new(id.tenant.clone(), c.clone()))
        .collect();
    let counts = gw.store.member_counts(keys).await?;
    let channels = found
        .into_iter()
        .zip(counts)
        .map(|((conversation_id, l), member_count)| ChannelEntry {
            conversation_id,
            title: l.title,
            topic: l.topic,
            member_count,
        })
        .collect();
    Ok(Json(ChannelDirectory {
        channels,
        next_cursor: next_cursor.map(|c| c.as_str().to_owned()),
    }))
}

/// The directory rows after `after` that match `q`, at most `limit`,
/// looking at [`DIRECTORY_SCAN_ROWS`] at most; and where the next page
/// starts, if there may be more.
async fn directory_page(
    gw: &Shared,
    id: &Identity,
    q: &str,
    mut after: Option<ConversationId>,
    limit: usize,
) -> Result<(Vec<(ConversationId, Listing)>, Option<ConversationId>), ApiError> {
    let mut found = Vec::new();
    let mut looked = 0;
    while looked < DIRECTORY_SCAN_ROWS {
        let want = DIRECTORY_CHUNK.min(DIRECTORY_SCAN_ROWS - looked);
        let rows = gw.store.directory(&id.tenant, after.clone(), want).await?;
        let last_chunk = rows.len() < want;
        let n = rows.len();
        for (i, (conversation, listing)) in rows.into_iter().enumerate() {
            looked += 1;
            after = Some(conversation.clone());
            if q.is_empty() || listing.matches(q) {
                found.push((conversation, listing));
                if found.len() == limit {
                    let more = !(last_chunk && i + 1 == n);
                    return Ok((found, after.filter(|_| more)));
                }
            }
        }
        if last_chunk {
            return Ok((found, None));
        }
    }
    Ok((found, after))
}

/// `POST /v1/conversations/{id}/join`
pub(super) fn join_op() -> Operation {
    Operation::post("Join a public channel")
        .describe("Any user of the tenant joins a group or channel whose `visibility` is `public` (403 `forbidden` when it is private: an invite lets them in; 403 when they are banned). Joining again changes nothing. A `members_added` system message whose `actor` is the user who joined tells the members. The newcomer reads the history from that message on, unless the channel's `history_visible_to_new_members` is true; nothing from before counts as unread.")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<ConversationView>(200, "The conversation, joined.")
        .errors(&[403, 404])
}

pub(super) async fn join(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<ConversationView>, ApiError> {
    let conversation = path.get()?;
    joined(&gw, &id, conversation, None).await
}

async fn joined(
    gw: &Shared,
    id: &Identity,
    conversation: ConversationId,
    invite: Option<String>,
) -> Result<Json<ConversationView>, ApiError> {
    let command = Command::Join(JoinCommand {
        by: actor(gw, id, conversation.clone())?,
        invite,
    });
    done(gw.run_command(command).await?)?;
    let detail = gw
        .store
        .conversation(&id.tenant, &conversation, &id.user)
        .await?;
    Ok(Json(detail_view(detail, &id.user)))
}

/// A new invite code: [`INVITE_CODE_CHARS`] characters of `A-Z a-z 0-9`,
/// from the system's secure random source.
fn new_code() -> Result<String, ApiError> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    use ring::rand::SecureRandom;
    let rng = ring::rand::SystemRandom::new();
    let mut code = String::with_capacity(INVITE_CODE_CHARS);
    while code.len() < INVITE_CODE_CHARS {
        let mut bytes = [0u8; 32];
        rng.fill(&mut bytes)
            .map_err(|_| ApiError::new(ErrorCode::Internal, "no random source"))?;
        // 248 = 4 * 62: the bytes below it map onto the alphabet evenly.
        for b in bytes.into_iter().filter(|b| *b < 248) {
            if code.len() < INVITE_CODE_CHARS {
                code.push(char::from(ALPHABET[usize::from(b % 62)]));
            }
        }
    }
    Ok(code)
}

/// `POST /v1/conversations/{id}/invites`
pub(super) fn create_invite_op() -> Operation {
    Operation::post("Make an invite")
        .describe("Owners and admins (and tenant admins) of a group or channel, private or public (403 otherwise; 409 in a direct conversation). `max_uses` (1 to 100000) and `expires_at` (at most 365 days ahead) bound it; absent, it works until revoked. The `code` is 12 letters and digits. A conversation keeps at most 100 invites (used-up and expired ones count until revoked; 429 `quota_exceeded` past it).")
        .path::<ConversationId>("id", "The conversation.")
        .json_body::<CreateInvite>()
        .reply::<Invite>(201, "The invite.")
        .errors(&[400, 403, 404, 409, 429])
}

pub(super) async fn create_invite(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
    JsonBody(body): JsonBody<CreateInvite>,
) -> Result<(StatusCode, Json<Invite>), ApiError> {
    let conversation = path.get()?;
    let by = actor(&gw, &id, conversation.clone())?;
    if let Some(why) = body.refusal(by.at) {
        return Err(ApiError::invalid(why));
    }
    let invite = Invite {
        code: new_code()?,
        conversation_id: conversation,
        created_by: id.user.clone(),
        created_at: by.at,
        max_uses: body.max_uses,
        uses: 0,
        expires_at: body.expires_at,
    };
    let command = Command::Invite(InviteCommand {
        by,
        code: invite.code.clone(),
        create: Some(body),
    });
    done(gw.run_command(command).await?)?;
    Ok((StatusCode::CREATED, Json(invite)))
}

/// `GET /v1/conversations/{id}/invites`
pub(super) fn list_invites_op() -> Operation {
    Operation::get("The conversation's invites")
        .describe("Owners and admins (and tenant admins) only (403 otherwise). Newest first, used-up and expired ones included (with their `uses` and `expires_at`) until revoked.")
        .path::<ConversationId>("id", "The conversation.")
        .reply::<InviteList>(200, "The invites.")
        .errors(&[403, 404])
}

pub(super) async fn list_invites(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<ConversationId>,
) -> Result<Json<InviteList>, ApiError> {
    let conversation = path.get()?;
    super::safety::require_moderator(
        &gw,
        &id,
        &conversation,
        "only owners and admins see the invites",
    )
    .await?;
    let key = ConversationKey::new(id.tenant.clone(), conversation);
    let invites = gw.store.invites(&key).await?;
    Ok(Json(InviteList { invites }))
}

/// `DELETE /v1/conversations/{id}/invites/{code}`
pub(super) fn revoke_invite_op() -> Operation {
    Operation::delete("Revoke an invite")
        .describe("Owners and admins (and tenant admins). From then on the code lets nobody in (404); those who joined with it stay.")
        .path::<ConversationId>("id", "The conversation.")
        .path::<String>("code", "The invite's code.")
        .reply_empty(204, "Revoked.")
        .errors(&[403, 404])
}

pub(super) async fn revoke_invite(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<(ConversationId, String)>,
) -> Result<StatusCode, ApiError> {
    let (conversation, code) = path.get()?;
    if !is_invite_code(&code) {
        return Err(ApiError::new(ErrorCode::NotFound, "no such invite"));
    }
    let command = Command::Invite(InviteCommand {
        by: actor(&gw, &id, conversation)?,
        code,
        create: None,
    });
    done(gw.run_command(command).await?)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The invite `code` names, if it still lets anyone in.
async fn live_invite(gw: &Shared, id: &Identity, code: &str) -> Result<Invite, ApiError> {
    let gone = || ApiError::new(ErrorCode::NotFound, "no such invite");
    if !is_invite_code(code) {
        return Err(gone());
    }
    let invite = gw
        .store
        .invite_by_code(&id.tenant, code)
        .await?
        .ok_or_else(gone)?;
    if let Some(why) = invite.spent(Timestamp::now()) {
        return Err(ApiError::new(ErrorCode::NotFound, why));
    }
    Ok(invite)
}

/// `GET /v1/invites/{code}`
pub(super) fn preview_invite_op() -> Operation {
    Operation::get("What an invite leads to")
        .describe("Any user of the tenant: the conversation's id, title, topic and member count, for the page that asks whether to accept. 404 for a code that was never made, was revoked, has expired or is used up.")
        .path::<String>("code", "The invite's code.")
        .reply::<InvitePreview>(200, "The invite.")
        .errors(&[404])
}

pub(super) async fn preview_invite(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<String>,
) -> Result<Json<InvitePreview>, ApiError> {
    let code = path.get()?;
    let invite = live_invite(&gw, &id, &code).await?;
    let key = ConversationKey::new(id.tenant.clone(), invite.conversation_id.clone());
    let Some(Some(state)) = gw.store.sequencer_states(vec![key]).await?.pop() else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such invite"));
    };
    Ok(Json(InvitePreview {
        code,
        channel: ChannelEntry {
            conversation_id: invite.conversation_id,
            title: state.title,
            topic: state.channel.topic,
            member_count: state.members.len() as u64,
        },
        expires_at: invite.expires_at,
    }))
}

/// `POST /v1/invites/{code}/accept`
pub(super) fn accept_invite_op() -> Operation {
    Operation::post("Join with an invite")
        .describe("Any user of the tenant joins the invite's conversation, private or public, as `join` does (history from the join on unless the channel says otherwise). 404 for a code that was never made or was revoked; 403 when it has expired or is used up, when the caller is banned there, or when the invite's creator blocks the caller. Each user who joins with it counts one use; a member already is answered without counting one.")
        .path::<String>("code", "The invite's code.")
        .reply::<ConversationView>(200, "The conversation, joined.")
        .errors(&[403, 404])
}

pub(super) async fn accept_invite(
    State(gw): State<Shared>,
    id: Identity,
    path: PathParams<String>,
) -> Result<Json<ConversationView>, ApiError> {
    let code = path.get()?;
    if !is_invite_code(&code) {
        return Err(ApiError::new(ErrorCode::NotFound, "no such invite"));
    }
    // The writer decides on the invite as it stands then; this read only
    // finds its conversation.
    let invite = gw
        .store
        .invite_by_code(&id.tenant, &code)
        .await?
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, "no such invite"))?;
    joined(&gw, &id, invite.conversation_id, Some(code)).await
}
