//! `GET /v1/me/export` (v1.2): the caller's own data as one JSON document,
//! written as it is read, so that its size does not decide the memory it
//! takes: a page of history at a time, through a bounded channel to the
//! socket. What it holds: the profile (user, tenant, when, and the
//! stored profile of v1.3), the blocks,
//! each conversation the caller is a member of with their role, settings
//! and marks, and every message they sent there, newest first, read
//! from their own index so that others' messages cost nothing.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Serialize;
use switchboard_protocol::{ConversationId, ConversationKind, Message, Timestamp, UserId};
use switchboard_store::ConversationKey;
use tokio::sync::mpsc;

use super::extract::Shared;
use super::openapi::Operation;
use crate::auth::Identity;
use crate::error::ApiError;

/// History read per step, and chunks queued for the socket at most: what
/// one export holds in memory, whatever its size.
const PAGE: usize = 200;
const QUEUED_CHUNKS: usize = 4;

/// The head of the document (its fields before `conversations`): who,
/// and their profile as stored (v1.3).
#[derive(Serialize)]
struct Profile<'a> {
    user_id: &'a UserId,
    tenant: &'a str,
    exported_at: Timestamp,
    display_name: Option<String>,
    avatar: Option<String>,
    status: Option<switchboard_protocol::profile::Status>,
    custom: serde_json::Map<String, serde_json::Value>,
    updated_at: Option<Timestamp>,
}

/// One conversation of the caller, before its messages.
#[derive(Serialize)]
struct Membership {
    conversation_id: ConversationId,
    kind: ConversationKind,
    title: Option<String>,
    joined_at: Timestamp,
    role: switchboard_protocol::Role,
    settings: switchboard_protocol::MemberSettings,
    read_seq: u64,
}

/// `GET /v1/me/export`
pub(super) fn export_op() -> Operation {
    Operation::get("The caller's own data")
        .describe("One JSON document, streamed: `profile` (`user_id`, `tenant`, `exported_at`, and the profile as stored: `display_name`, `avatar`, `status`, `custom`, `updated_at`), `blocks` (as `GET /v1/blocks`), and `conversations`: each conversation the caller is a member of with `kind`, `title`, `joined_at`, `role`, `settings`, `read_seq` and `messages`, every message the caller sent there (message objects, newest first). Conversations the caller left are not in it. A failure midway ends the body early (the JSON is then incomplete). At most `exports_per_hour` per user (4 by default; 429 past it).")
        .reply::<serde_json::Value>(200, "The document.")
        .errors(&[429])
}

pub(super) async fn export(State(gw): State<Shared>, id: Identity) -> Result<Response, ApiError> {
    gw.rates.export(&id)?;
    // The first reads happen before the answer starts: a store that is
    // down is a 503, not a cut body.
    let blocks = gw.store.blocks(&id.tenant, &id.user).await?;
    let profile = gw
        .store
        .profiles(&id.tenant, vec![id.user.clone()])
        .await?
        .pop()
        .flatten()
        .unwrap_or_else(|| switchboard_protocol::profile::Profile::empty(id.user.clone()));
    let conversations = gw.store.memberships(&id.tenant, &id.user).await?;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(QUEUED_CHUNKS);
    tokio::spawn(async move {
        if let Err(e) = write(&gw, &id, profile, blocks, conversations, &tx).await {
            tracing::warn!(error = %e, "an export stopped midway");
            let _ = tx.send(Err(std::io::Error::other(e.message))).await;
        }
    });
    let chunks = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"switchboard-export.json\""),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Body::from_stream(chunks),
    )
        .into_response())
}

/// Where the document goes, a chunk at a time; a reader that went away
/// ends the export.
struct Out<'a>(&'a mpsc::Sender<Result<Bytes, std::io::Error>>);

impl Out<'_> {
    async fn raw(&self, text: impl Into<Bytes>) -> Result<(), ApiError> {
        self.0
            .send(Ok(text.into()))
            .await
            .map_err(|_| ApiError::invalid("the reader went away"))
    }

    async fn json<T: Serialize>(&self, value: &T) -> Result<(), ApiError> {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| ApiError::new(switchboard_protocol::ErrorCode::Internal, e.to_string()))?;
        self.raw(bytes).await
    }
}

async fn write(
    gw: &Shared,
    id: &Identity,
    profile: switchboard_protocol::profile::Profile,
    blocks: Vec<switchboard_protocol::safety::Block>,
    conversations: Vec<(ConversationId, ConversationKind, usize)>,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> Result<(), ApiError> {
    let out = Out(tx);
    out.raw(r#"{"profile":"#).await?;
    out.json(&Profile {
        user_id: &id.user,
        tenant: id.tenant.as_str(),
        exported_at: Timestamp::now(),
        display_name: profile.display_name,
        avatar: profile.avatar,
        status: profile.status,
        custom: profile.custom,
        updated_at: profile.updated_at,
    })
    .await?;
    out.raw(r#","blocks":"#).await?;
    out.json(&blocks).await?;
    out.raw(r#","conversations":["#).await?;
    let mut first = true;
    for (conversation, _, _) in conversations {
        let detail = match gw
            .store
            .conversation(&id.tenant, &conversation, &id.user)
            .await
        {
            Ok(d) => d,
            // Left (or gone) since the list was read.
            Err(
                switchboard_store::StoreError::NotAMember | switchboard_store::StoreError::NotFound,
            ) => {
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let Some(me) = detail.members.iter().find(|m| m.user_id == id.user) else {
            continue;
        };
        let membership = Membership {
            conversation_id: conversation.clone(),
            kind: detail.record.kind,
            title: detail.record.title.clone(),
            joined_at: me.joined_at,
            role: me.role,
            settings: me.settings.clone(),
            read_seq: me.read_seq,
        };
        drop(detail);
        let head = serde_json::to_string(&membership)
            .map_err(|e| ApiError::new(switchboard_protocol::ErrorCode::Internal, e.to_string()))?;
        // The membership's object, reopened to add its messages.
        let head = head.strip_suffix('}').unwrap_or(&head);
        out.raw(format!(
            "{}{head},\"messages\":[",
            if first { "" } else { "," }
        ))
        .await?;
        first = false;
        messages_of(gw, id, &conversation, &out).await?;
        out.raw("]}").await?;
    }
    out.raw("]}").await
}

/// Every message the caller sent in `conversation`, newest first, a page
/// at a time from the caller's own index (`Read::SentBy`): what others
/// wrote there is never read.
async fn messages_of(
    gw: &Shared,
    id: &Identity,
    conversation: &ConversationId,
    out: &Out<'_>,
) -> Result<(), ApiError> {
    let key = ConversationKey {
        tenant: id.tenant.clone(),
        conversation_id: conversation.clone(),
    };
    let mut before = None;
    let mut first = true;
    loop {
        let rows = gw.store.sent_by(&key, &id.user, before, PAGE).await?;
        let Some(oldest) = rows.last().map(|r| r.seq) else {
            return Ok(());
        };
        // A row whose message is gone since (expired with its archived
        // bucket) is passed over.
        let mut page: Vec<_> = rows
            .into_iter()
            .filter_map(|r| r.message.map(Message::for_client))
            .collect();
        switchboard_store::mine::mark_mine(gw.store.as_ref(), &id.tenant, &id.user, &mut page)
            .await?;
        for m in &page {
            if !first {
                out.raw(",").await?;
            }
            first = false;
            out.json(m).await?;
        }
        before = Some(oldest);
    }
}
