//! The serving side: answers `sb.store` requests from one process's store.

use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use switchboard_backbone::subject::{STORE_QUEUE_GROUP, STORE_SERVICE};
use switchboard_store::{Store, StoreError, StoreResult};

use crate::calls::{Request, dispatch};

/// The answer on the wire: `{"ok": …}` or `{"err": StoreError}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply<T> {
    Ok(T),
    Err(StoreError),
}

pub(crate) fn reply<T: Serialize>(result: StoreResult<T>) -> Vec<u8> {
    let encoded = match result {
        Ok(v) => serde_json::to_vec(&Reply::Ok(v)),
        Err(e) => serde_json::to_vec(&Reply::<()>::Err(e)),
    };
    encoded.unwrap_or_else(|e| {
        serde_json::to_vec(&Reply::<()>::Err(StoreError::Corrupt(format!(
            "encode reply: {e}"
        ))))
        .unwrap_or_default()
    })
}

async fn handle(store: &dyn Store, payload: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<Request>(payload) {
        Ok(request) => dispatch(store, request).await,
        Err(e) => reply::<()>(Err(StoreError::Corrupt(format!("bad store request: {e}")))),
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[error("subscribing to {subject}")]
pub struct ServeError {
    subject: &'static str,
    #[source]
    source: async_nats::SubscribeError,
}

/// Serves `store` on `sb.store` until the subscription ends. Each request
/// runs in its own task, so a slow read never holds up a commit.
pub async fn serve(client: async_nats::Client, store: Arc<dyn Store>) -> Result<(), ServeError> {
    let mut requests = client
        .queue_subscribe(STORE_SERVICE, STORE_QUEUE_GROUP.to_owned())
        .await
        .map_err(|source| ServeError {
            subject: STORE_SERVICE,
            source,
        })?;
    tracing::info!(subject = STORE_SERVICE, "serving the store over NATS");
    while let Some(msg) = requests.next().await {
        let Some(reply_to) = msg.reply.clone() else {
            continue;
        };
        let (store, client) = (store.clone(), client.clone());
        tokio::spawn(async move {
            let mut body = handle(store.as_ref(), &msg.payload).await;
            // NATS refuses a message over the server's max_payload, and the
            // caller would only see a timeout: answer why, at once.
            let max = client.server_info().max_payload;
            if body.len() > max {
                body = reply::<()>(Err(StoreError::AnswerTooLarge {
                    bytes: body.len(),
                    max,
                }));
            }
            if let Err(e) = client.publish(reply_to, body.into()).await {
                tracing::warn!(error = %e, "store service reply failed");
            }
        });
    }
    Ok(())
}
