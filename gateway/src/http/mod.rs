//! The HTTP application: every route the gateway answers, in one place, and
//! what answers the rest (404 for a path no route has, 405 for a method its
//! route lacks). The handlers live one file per resource beside this one;
//! the extractors they share in `extract`; what they refuse with is
//! `crate::error::ApiError`.

mod blobs;
mod browser;
mod conversations;
mod dev_token;
mod extract;
mod health;
mod history;
mod keys;
mod media;
mod members;
mod openapi;
mod plugins;
mod presence;
mod push;
mod tenants;
mod versions;
mod web_client;
mod websocket;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use switchboard_protocol::ErrorCode;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::Gateway;
use crate::error::ApiError;

/// The state every handler is given.
type Shared = Arc<Gateway>;

pub(crate) fn router(gw: Shared) -> axum::Router {
    let limits = &gw.config.limits;
    let body_limit = limits.max_body_bytes;
    // The longest pause between two chunks of a request body.
    let body_timeout = Duration::from_millis(limits.http_body_timeout_ms.max(1));
    // A plugin upload may be base64 in JSON, a third larger than the
    // component.
    let plugin_upload_limit = gw.plugins.host().limits().max_component_bytes * 4 / 3 + 64 * 1024;
    let document: Arc<str> = openapi::document(&gw.config).into();
    let mut router = axum::Router::new()
        .route("/v1/ws", get(websocket::upgrade))
        .route(
            "/v1/conversations",
            post(conversations::create).get(conversations::list),
        )
        .route("/v1/conversations/{id}", get(conversations::show))
        .route("/v1/conversations/{id}/members", post(members::add))
        .route(
            "/v1/conversations/{id}/members/{user}",
            delete(members::remove),
        )
        .route("/v1/conversations/{id}/messages", get(history::page))
        .route(
            "/v1/conversations/{id}/messages/{message_id}/versions",
            get(versions::list),
        )
        .route("/v1/users/{user}/presence", get(presence::show))
        .route("/v1/media", post(media::grant_upload))
        .route("/v1/media/{blob_ref}", get(media::download))
        .route(
            "/v1/devices/{device}/keys",
            get(keys::own_keys).put(keys::publish),
        )
        .route("/v1/users/{user}/devices", get(keys::devices))
        .route("/v1/users/{user}/devices/{device}/claim", post(keys::claim))
        .route(
            "/v1/devices/{device}/push",
            put(push::register).get(push::show).delete(push::unregister),
        )
        .route(
            "/v1/admin/plugins/{hook}",
            put(plugins::deploy)
                .layer(DefaultBodyLimit::max(plugin_upload_limit))
                .get(plugins::list)
                .delete(plugins::remove),
        )
        .route("/v1/admin/plugins/{hook}/rollback", post(plugins::rollback))
        .route(
            "/v1/operator/tenants",
            get(tenants::list).post(tenants::create),
        )
        .route(
            "/v1/operator/tenants/{id}",
            get(tenants::show)
                .patch(tenants::change)
                .delete(tenants::remove),
        )
        .route(
            "/v1/openapi.json",
            get(move || openapi::serve(document.clone())),
        )
        .route(
            "/v1/asyncapi.json",
            get(|| openapi::serve(switchboard_protocol::ASYNCAPI_JSON.into())),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz));
    if gw.media.local.is_some() {
        // Uploads are streamed to disk, never buffered: the body limit is
        // the grant's own size, checked in `blobs::accept`.
        router = router.route(
            "/v1/blobs/{token}",
            get(blobs::serve)
                .put(blobs::accept)
                .layer(DefaultBodyLimit::disable()),
        );
    }
    if gw.config.serve_web_client {
        router = router
            .route("/", get(web_client::page))
            .route("/web/app.js", get(web_client::app))
            .route("/web/switchboard.js", get(web_client::sdk));
    }
    if let Some(metrics) = gw.config.metrics.clone() {
        router = router.route(
            "/metrics",
            get(move || async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        crate::metrics::CONTENT_TYPE,
                    )],
                    (metrics.0)(),
                )
            }),
        );
    }
    if gw.config.dev_tokens.is_some() {
        router = router.route("/v1/dev/token", post(dev_token::issue));
    }
    router
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .layer(axum::middleware::from_fn_with_state(
            gw.clone(),
            browser::guard,
        ))
        .with_state(gw)
}

/// The answer for a path no route has, and for a route this gateway's
/// configuration leaves out.
fn no_such_endpoint() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint")
}

async fn no_route() -> ApiError {
    no_such_endpoint()
}

async fn method_not_allowed() -> Response {
    let mut r = ApiError::invalid("method not allowed on this endpoint").into_response();
    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    r
}

#[cfg(test)]
mod tests {
    /// Reads every file of this folder, so a route added anywhere in it,
    /// or in a file added to it, is checked too.
    #[test]
    fn the_openapi_document_lists_every_route() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../openapi.json")).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http");
        let mut routes = 0;
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let source = std::fs::read_to_string(&path).unwrap();
            let code = source.split("#[cfg(test)]").next().unwrap();
            for piece in code.split(".route(").skip(1) {
                let Some(route) = piece
                    .trim_start()
                    .strip_prefix('"')
                    .and_then(|p| p.split('"').next())
                else {
                    continue;
                };
                if route == "/" || route.starts_with("/web/") {
                    continue; // the browser client, not an API
                }
                routes += 1;
                assert!(
                    doc["paths"].get(route).is_some(),
                    "{route} ({}) is missing from openapi.json",
                    path.display()
                );
            }
        }
        assert!(routes >= 20, "found {routes} routes");
    }

    /// The bodies of openapi.json cannot drift from the protocol types
    /// they describe: the same fields, and (for what clients send) the
    /// same required ones; what the server sends may promise more fields
    /// than the types require (it always writes them). The document keeps
    /// its own constraints (lengths, patterns, ranges) beside them.
    #[test]
    fn the_openapi_bodies_have_the_protocol_types_fields() {
        use switchboard_protocol::schema::schema_of;
        use switchboard_protocol::{conversation, error, frames, keys, message, push};
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../openapi.json")).unwrap();
        let schemas = &doc["components"]["schemas"];
        let request = |path: &str, method: &str| {
            doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
                .clone()
        };
        let sent_by_server = [
            (
                &schemas["Message"],
                schema_of::<message::Message>(),
                "Message",
            ),
            (
                &schemas["Member"],
                schema_of::<conversation::MemberView>(),
                "Member",
            ),
            (
                &schemas["Conversation"],
                schema_of::<conversation::ConversationView>(),
                "Conversation",
            ),
            (
                &schemas["Presence"],
                schema_of::<frames::PresenceInfo>(),
                "Presence",
            ),
            (
                &schemas["Version"],
                schema_of::<message::MessageVersion>(),
                "Version",
            ),
            (
                &schemas["OneTimePrekey"],
                schema_of::<keys::OneTimePrekey>(),
                "OneTimePrekey",
            ),
            (
                &schemas["SignedPrekey"],
                schema_of::<keys::SignedPrekey>(),
                "SignedPrekey",
            ),
            (&schemas["Error"], schema_of::<error::ErrorBody>(), "Error"),
        ];
        for (documented, generated, name) in &sent_by_server {
            assert_eq!(fields(documented), fields(generated), "{name}: fields");
            let promised = required(documented);
            for field in required(generated) {
                assert!(
                    promised.contains(&field),
                    "{name}: `{field}` is required by the type"
                );
            }
        }
        let sent_by_clients = [
            (
                request("/v1/conversations", "post"),
                schema_of::<conversation::CreateConversation>(),
                "POST /v1/conversations",
            ),
            (
                request("/v1/conversations/{id}/members", "post"),
                schema_of::<conversation::AddMembers>(),
                "POST /v1/conversations/{id}/members",
            ),
            (
                request("/v1/devices/{device}/push", "put"),
                schema_of::<push::PushRegistration>(),
                "PUT /v1/devices/{device}/push",
            ),
        ];
        for (documented, generated, name) in &sent_by_clients {
            let documented = resolve(&doc, documented);
            assert_eq!(fields(&documented), fields(generated), "{name}: fields");
            assert_eq!(
                required(&documented),
                required(generated),
                "{name}: required"
            );
        }
    }

    /// A `$ref` to a component, followed once.
    fn resolve(doc: &serde_json::Value, schema: &serde_json::Value) -> serde_json::Value {
        match schema["$ref"].as_str() {
            Some(r) => doc
                .pointer(r.trim_start_matches('#'))
                .cloned()
                .unwrap_or_default(),
            None => schema.clone(),
        }
    }

    fn fields(schema: &serde_json::Value) -> std::collections::BTreeSet<String> {
        schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn required(schema: &serde_json::Value) -> std::collections::BTreeSet<String> {
        schema["required"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}
