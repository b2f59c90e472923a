//! Erasure requests from the gateways, on `sb.erasures.request` (one
//! queue group of every worker): the gateway has checked that a tenant
//! admin asks; here the user must have a trace in the tenant (a
//! conversation they joined, keys or push tokens), and the job is found
//! or started. One request at a time per worker: an admin's request is
//! rare, and the queue group spreads them.

use std::sync::Arc;

use futures::StreamExt;
use switchboard_nats::kv_key::part;
use switchboard_nats::records::erasures::{
    ErasureAnswer, ErasureRequest, Erasures, REQUEST_SUBJECT,
};
use switchboard_store::erasure::pseudonym;

use crate::ctx::Ctx;
use crate::error::WorkerError;

pub(crate) async fn serve(ctx: Arc<Ctx>) {
    let erasures = match Erasures::open(&ctx.js).await {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "erasure requests cannot be served: their bucket cannot be opened");
            return;
        }
    };
    let mut requests = match ctx
        .client
        .queue_subscribe(REQUEST_SUBJECT, "erasures".into())
        .await
    {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve erasure requests");
            return;
        }
    };
    while let Some(m) = requests.next().await {
        let Some(reply) = m.reply.clone() else {
            continue;
        };
        let answer = match serde_json::from_slice::<ErasureRequest>(&m.payload) {
            Ok(r) => answer(&ctx, &erasures, &r).await,
            Err(e) => ErasureAnswer::Failed(format!("undecodable request: {e}")),
        };
        let body = match serde_json::to_vec(&answer) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode an erasure answer");
                continue;
            }
        };
        if let Err(e) = ctx.client.publish(reply, body.into()).await {
            tracing::warn!(error = %e, "cannot answer an erasure request");
        }
    }
}

async fn answer(ctx: &Ctx, erasures: &Erasures, r: &ErasureRequest) -> ErasureAnswer {
    match known(ctx, r).await {
        Ok(true) => {}
        Ok(false) => return ErasureAnswer::UnknownUser,
        Err(e) => return ErasureAnswer::Failed(e.to_string()),
    }
    let name = match pseudonym(rand::random()) {
        Ok(name) => name,
        Err(e) => return ErasureAnswer::Failed(e.to_string()),
    };
    match erasures.begin(&r.tenant, &r.user, &name).await {
        Ok(record) => {
            tracing::info!(job = %record.job.job_id, tenant = %r.tenant, "erasure requested");
            ErasureAnswer::Job(record.job)
        }
        Err(e) => ErasureAnswer::Failed(e.to_string()),
    }
}

/// Whether the tenant knows the user: a conversation they joined, keys
/// in the directory, or push tokens.
async fn known(ctx: &Ctx, r: &ErasureRequest) -> Result<bool, WorkerError> {
    let joined = ctx.store.joined(&r.tenant, &r.user, None, 1).await?;
    if !joined.is_empty() {
        return Ok(true);
    }
    let key = format!("{}.{}", part(r.tenant.as_str()), part(r.user.as_str()));
    for bucket in ["sb_keys", "sb_push_tokens"] {
        let kv = ctx
            .js
            .get_key_value(bucket)
            .await
            .map_err(|e| WorkerError::nats(format!("bucket {bucket}"), e))?;
        let entry = kv
            .get(&key)
            .await
            .map_err(|e| WorkerError::nats(format!("reading {bucket}"), e))?;
        if entry.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
