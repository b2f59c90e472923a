//! Presence notifications (F9): turns users' transitions between online and
//! offline (seen in `sb_presence`) into `presence` frames for the members of
//! their direct conversations, and records when they were last seen.
//!
//! Scope: only direct-conversation contacts are told, never the members of
//! groups and channels. Presence fan-out is what overwhelms chat servers at
//! scale (one user's status times every room they are in); contacts keep it
//! proportional to a user's one-to-one relationships.
//!
//! Every worker watches, but only the one holding partition 0's lease
//! notifies, so each transition is announced once (around a handover, a
//! transition may be announced twice or missed; clients reconcile with
//! `GET /v1/users/{user}/presence`).

use std::sync::Arc;

use async_nats::jetstream::kv;
use switchboard_nats::envelope::frame_event;
use switchboard_nats::records::presence::{RoutingTable, Transition, last_seen_key};
use switchboard_protocol::{PresenceStatus, ServerFrame};
use tokio::sync::broadcast::error::RecvError;

use crate::ctx::Ctx;

pub(crate) async fn notify(ctx: Arc<Ctx>, view: Arc<RoutingTable>, last_seen: kv::Store) {
    let mut transitions = view.subscribe();
    loop {
        let t = match transitions.recv().await {
            Ok(t) => t,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "presence notifier fell behind; some transitions were not announced"
                );
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if ctx.leader.holds() {
            announce(&ctx, &last_seen, t).await;
        }
    }
}

async fn announce(ctx: &Ctx, last_seen: &kv::Store, t: Transition) {
    if !t.online {
        let value = t.at.unix_ms().to_string().into_bytes();
        if let Err(e) = last_seen
            .put(last_seen_key(&t.tenant, &t.user), value.into())
            .await
        {
            tracing::warn!(error = %e, "recording last seen failed");
        }
    }
    let contacts = match ctx.store.contacts(&t.tenant, &t.user).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "presence: reading contacts failed");
            return;
        }
    };
    let (headers, payload) = frame_event(&ServerFrame::Presence {
        user_id: t.user.clone(),
        status: if t.online {
            PresenceStatus::Online
        } else {
            PresenceStatus::Offline
        },
        last_seen: Some(t.at),
    });
    if let Err(e) = ctx
        .sessions
        .publish(&t.tenant, &contacts, &(headers, payload))
        .await
    {
        tracing::warn!(error = %e, "publishing presence failed");
    }
}
