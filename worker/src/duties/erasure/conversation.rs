//! An erasure's work in one conversation, done by the conversation's
//! writer between two batches of commands (`archive::serve_requests`),
//! so that nothing it rewrites races an edit: live messages that name
//! the user, in steps of `STEP` rows (a request does at most `STEPS`,
//! then asks again for the rest behind the commands waiting), then every
//! archived bucket, then the membership, which also takes the
//! conversation off the user's `joined` list: the job's sign that this
//! conversation is done.

use serde::{Deserialize, Serialize};
use switchboard_nats::kv_key::part;
use switchboard_nats::records::erasures::ErasureRecord;
use switchboard_protocol::{Timestamp, UserId};
use switchboard_store::{BucketKey, ConversationKey, Mutation};

use tracing::Instrument;

use crate::ctx::Ctx;

pub(crate) const ERASE_REQUEST: &str = "erase";

/// Message rows one step looks at (and at most rewrites in one commit),
/// and steps per request: past them, the writer asks again for the rest
/// at the back of its partition's queue, so commands that came meanwhile
/// go first.
const STEP: usize = 500;
const STEPS: usize = 1;

/// The payload of an `erase` request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EraseRequest {
    pub key: ConversationKey,
    pub user: UserId,
    pub pseudonym: UserId,
}

/// Asks the conversation's writer to erase the job's user there, once
/// per `window` (the request's `Nats-Msg-Id` says which).
pub(super) async fn request(
    ctx: &Ctx,
    key: &ConversationKey,
    record: &ErasureRecord,
    window: u128,
) -> Result<(), crate::duties::maintenance::RequestError> {
    let (Some(user), Ok(pseudonym)) = (
        record.user.clone(),
        UserId::new(record.job.pseudonym.clone()),
    ) else {
        return Ok(());
    };
    let id = format!(
        "erase.{}.{}.{window}",
        record.job.job_id,
        part(key.conversation_id.as_str())
    );
    let payload = serde_json::to_vec(&EraseRequest {
        key: key.clone(),
        user,
        pseudonym,
    })?;
    crate::duties::maintenance::publish_request(ctx, key, ERASE_REQUEST, &id, payload).await
}

/// Serves one `erase` request. Whether it changed the conversation's
/// members (the writer's cached state must then be read again).
pub(crate) async fn serve(ctx: &Ctx, r: &EraseRequest, lease_valid: &impl Fn() -> bool) -> bool {
    let span = tracing::info_span!(
        "erase",
        tenant = %r.key.tenant,
        conversation = %r.key.conversation_id
    );
    match erase(ctx, r, lease_valid).instrument(span).await {
        Ok(done) => done,
        Err(Stop::Unfinished) => {
            continue_later(ctx, r).await;
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "erasure in the conversation stopped; the job asks again");
            false
        }
    }
}

/// The rest of the conversation's erasure, asked for at the back of the
/// partition's queue; if that fails, the job asks again (`ASK_AGAIN`).
async fn continue_later(ctx: &Ctx, r: &EraseRequest) {
    if let Err(e) = crate::duties::maintenance::continue_later(ctx, &r.key, ERASE_REQUEST, r).await
    {
        tracing::warn!(error = %e, "erasure: the rest waits for the job's next request");
    }
}

/// Why a request stopped; the job asks again.
#[derive(Debug, thiserror::Error)]
enum Stop {
    #[error(transparent)]
    Store(#[from] switchboard_store::StoreError),
    #[error("the writer's lease may have run out")]
    Lease,
    #[error("the conversation needs another request")]
    Unfinished,
}

async fn erase(ctx: &Ctx, r: &EraseRequest, lease_valid: &impl Fn() -> bool) -> Result<bool, Stop> {
    let at = Timestamp::now();
    let fenced = |m: Mutation| async move {
        if !lease_valid() {
            return Err(Stop::Lease);
        }
        ctx.store.commit(vec![m]).await.map_err(Stop::from)
    };
    // Where an earlier request stopped, in this worker's memory: after
    // a restart it starts over, passing quickly over what is rewritten.
    // Keyed by the job's pseudonym: a later job for the same user starts
    // afresh. `u64::MAX` marks a conversation this worker finished: a
    // request that comes after (the job asking again, a second chain) has
    // nothing to do.
    let progress = (r.key.clone(), r.pseudonym.clone());
    let mut after = ctx
        .erased_through
        .lock()
        .ok()
        .and_then(|m| m.get(&progress).copied())
        .unwrap_or(0);
    if after == u64::MAX {
        return Ok(false);
    }
    // The index forgets what they sent here, archived history too, before
    // their rows go (a change it gets again on a repeat is a no-op).
    let forget = switchboard_nats::search::IndexOp::RemoveSender {
        tenant: r.key.tenant.clone(),
        conversation_id: r.key.conversation_id.clone(),
        sender: r.user.clone(),
    };
    // The erasure does not go on without it: the next request repeats it.
    ctx.index_feed
        .store(vec![forget])
        .await
        .map_err(|_| Stop::Unfinished)?;
    let mut finished = false;
    for _ in 0..STEPS {
        let scan = ctx.store.naming(&r.key, &r.user, after, STEP).await?;
        if !scan.seqs.is_empty() {
            fenced(Mutation::EraseMessages {
                key: r.key.clone(),
                user: r.user.clone(),
                pseudonym: r.pseudonym.clone(),
                seqs: scan.seqs,
                at,
            })
            .await?;
        }
        after = scan.last_seen;
        if scan.done {
            finished = true;
            break;
        }
    }
    if let Ok(mut marks) = ctx.erased_through.lock() {
        marks.insert(progress.clone(), after);
    }
    if !finished {
        return Err(Stop::Unfinished);
    }
    for b in ctx.store.archived_buckets(&r.key, 0, u64::MAX).await? {
        fenced(Mutation::EraseArchived {
            bucket: BucketKey {
                tenant: r.key.tenant.clone(),
                conversation_id: r.key.conversation_id.clone(),
                day: b.day,
            },
            user: r.user.clone(),
            pseudonym: r.pseudonym.clone(),
            at,
        })
        .await?;
    }
    fenced(Mutation::EraseMember {
        key: r.key.clone(),
        user: r.user.clone(),
        pseudonym: r.pseudonym.clone(),
    })
    .await?;
    if let Ok(mut marks) = ctx.erased_through.lock() {
        // A bound, not a policy: past it, a repeated request rescans.
        if marks.len() > 100_000 {
            marks.clear();
        }
        marks.insert(progress, u64::MAX);
    }
    tracing::info!("conversation erased");
    crate::metrics::conversation_erased();
    Ok(true)
}
