//! The serving side: the store of one process as the NATS micro service
//! `switchboard-store` (so `nats micro ls`, `info` and `stats` show it),
//! with an endpoint per kind of caller (`wire::Access`).
//!
//! A request is answered only on the endpoint its call belongs to: a
//! commit asked on `sb.store.read` or `sb.store.marks` is refused, so the
//! backbone's permissions on the three subjects are what decides who may
//! write. The one subject of earlier releases, `sb.store`, still answers
//! reads and marks (their gateways', during a rolling upgrade), never a
//! commit. Requests in flight are bounded in all and per caller
//! (`switchboard_nats::admission`); past the bound a request is
//! answered `Unavailable` at once, and the caller may retry.

use std::sync::Arc;

use async_nats::service::ServiceExt;
use futures::StreamExt;
use switchboard_nats::admission::{Admission, AdmissionLimits};
use switchboard_nats::subject::{STORE_LEGACY, STORE_QUEUE_GROUP};
use switchboard_store::{Store, StoreError};

use crate::calls::store_calls;
use crate::wire::{Access, Call, Request, decode_request, reply};

/// The micro service's name, as `nats micro ls` lists it.
pub const SERVICE_NAME: &str = "switchboard-store";

macro_rules! dispatcher {
    (
        read { $( $read:ident ( $($rarg:ident : [$($rty:tt)+]),* ) -> $rret:ty; )* }
        marks { $( $mark:ident ( $($marg:ident : [$($mty:tt)+]),* ) -> $mret:ty; )* }
        write { $( $write:ident ( $($warg:ident : [$($wty:tt)+]),* ) -> $wret:ty; )* }
    ) => {
        /// Runs `request` on `store`, and encodes the answer.
        async fn dispatch(store: &dyn Store, request: Request) -> Vec<u8> {
            match request {
                Request::Read(read) => reply(store.read(read).await),
                $( Request::Call(Call::$read { $($rarg),* }) => reply(store.$read($(::switchboard_store::arg_lent!($rarg; $($rty)+)),*).await), )*
                $( Request::Call(Call::$mark { $($marg),* }) => reply(store.$mark($(::switchboard_store::arg_lent!($marg; $($mty)+)),*).await), )*
                $( Request::Call(Call::$write { $($warg),* }) => reply(store.$write($(::switchboard_store::arg_lent!($warg; $($wty)+)),*).await), )*
            }
        }
    };
}

store_calls!(dispatcher);

/// Where a request arrived: one of the endpoints, or the single subject
/// of earlier releases (`sb.store`), served for their gateways during a
/// rolling upgrade: reads and marks only.
#[derive(Debug, Clone, Copy)]
enum Arrival {
    Endpoint(Access),
    Legacy,
}

impl Arrival {
    fn takes(self, call: Access) -> bool {
        match self {
            Arrival::Endpoint(endpoint) => endpoint == call,
            Arrival::Legacy => call != Access::Write,
        }
    }
}

/// Answers one request that arrived at `arrival`.
async fn handle(store: &dyn Store, arrival: Arrival, payload: &[u8]) -> Vec<u8> {
    match decode_request(payload) {
        Ok(request) if arrival.takes(request.access()) => dispatch(store, request).await,
        Ok(request) => reply::<()>(Err(StoreError::Refused(format!(
            "this call is asked on {} only",
            request.access().subject(),
        )))),
        Err(e) => reply::<()>(Err(StoreError::Corrupt(format!("bad store request: {e}")))),
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[error("starting the store service {SERVICE_NAME}")]
pub struct ServeError {
    #[source]
    source: async_nats::Error,
}

/// Serves `store` until the connection ends. Each admitted request runs
/// in its own task, so a slow read never holds up a commit.
pub async fn serve(
    client: async_nats::Client,
    store: Arc<dyn Store>,
    limits: AdmissionLimits,
) -> Result<(), ServeError> {
    let service = client
        .service_builder()
        .description("The Switchboard message store of this process")
        // Several processes may serve (a restarted holder, briefly two):
        // each request is answered by one.
        .queue_group(STORE_QUEUE_GROUP)
        .start(SERVICE_NAME, env!("CARGO_PKG_VERSION"))
        .await
        .map_err(|source| ServeError { source })?;
    let mut endpoints = Vec::new();
    for access in Access::ALL {
        let endpoint = service
            .endpoint_builder()
            .name(access.endpoint())
            .add(access.subject())
            .await
            .map_err(|source| ServeError { source })?;
        let arrival = Arrival::Endpoint(access);
        endpoints.push(endpoint.map(move |request| (arrival, request)).boxed());
    }
    let legacy = service
        .endpoint_builder()
        .name("legacy")
        .add(STORE_LEGACY)
        .await
        .map_err(|source| ServeError { source })?;
    endpoints.push(legacy.map(|request| (Arrival::Legacy, request)).boxed());
    let mut requests = futures::stream::select_all(endpoints);
    let admission = Admission::new(limits);
    tracing::info!(service = SERVICE_NAME, "serving the store over NATS");
    while let Some((arrival, request)) = requests.next().await {
        let Some(reply_to) = request.message.reply.as_ref() else {
            continue;
        };
        let admitted = match admission.admit(reply_to.as_str()) {
            Ok(admitted) => admitted,
            Err(refused) => {
                let busy = reply::<()>(Err(StoreError::Unavailable(refused.to_string())));
                if let Err(e) = request.respond(Ok(busy.into())).await {
                    tracing::warn!(error = %e, "store service reply failed");
                }
                continue;
            }
        };
        let (store, client) = (store.clone(), client.clone());
        tokio::spawn(async move {
            let _admitted = admitted;
            let mut body = handle(store.as_ref(), arrival, &request.message.payload).await;
            // NATS refuses a message over the server's max_payload, and the
            // caller would only see a timeout: answer why, at once.
            let max = client.server_info().max_payload;
            if body.len() > max {
                body = reply::<()>(Err(StoreError::AnswerTooLarge {
                    bytes: body.len(),
                    max,
                }));
            }
            if let Err(e) = request.respond(Ok(body.into())).await {
                tracing::warn!(error = %e, "store service reply failed");
            }
        });
    }
    drop(service);
    Ok(())
}
