//! The HTTP application: every route the gateway answers, in one place, and
//! what answers the rest (404 for a path no route has, 405 for a method its
//! route lacks). The handlers live one file per resource beside this one;
//! the extractors they share in `extract`; what they refuse with is
//! `crate::error::ApiError`.

mod blobs;
mod browser;
mod channels;
mod conversations;
mod dev_token;
mod erasure;
mod export;
mod extract;
mod health;
mod history;
mod keys;
mod media;
mod members;
mod metered;
mod moderation;
mod mutes;
mod openapi;
mod pins;
mod plugin_deploys;
mod plugins;
mod polls;
mod posting;
mod presence;
mod previews;
mod profiles;
mod public;
mod push;
mod reports;
mod roles;
mod safety;
mod scheduled;
mod search;
mod tenants;
mod threads;
mod versions;
mod web_client;
mod webhooks;
mod websocket;

use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower_http::timeout::RequestBodyTimeoutLayer;

use self::extract::{Shared, no_such_endpoint};
use self::openapi::{Api, Operation};
use crate::config::GatewayConfig;
use crate::error::ApiError;
use crate::error::GatewayError;

/// The application; `listening` is the address it is served on, where
/// URLs it gives out point when no `public_url` is configured.
/// The gateway's HTTP application: REST, WebSocket, health; `listening`
/// is the address it serves on (the base of local blob URLs when no
/// `public_url` is set).
pub fn router(gw: Shared, listening: Option<std::net::SocketAddr>) -> axum::Router {
    let limits = &gw.config.limits;
    let body_limit = limits.max_body_bytes;
    // The longest pause between two chunks of a request body.
    let body_timeout = Duration::from_millis(limits.http_body_timeout_ms.max(1));
    // A plugin upload may be base64 in JSON, a third larger than the
    // component.
    let plugin_upload_limit = gw.plugins.host().limits().max_component_bytes * 4 / 3 + 64 * 1024;
    let mut app = api(&gw.config, plugin_upload_limit, gw.media.local.is_some())
        .finish(&gw.config)
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(metered::count))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .layer(axum::Extension(public::PublicBase::of(
            &gw.config, listening,
        )));
    // Inside the browser guard, whose headers its refusals get too.
    if let Some(hosts) = public::Hosts::of(&gw.config) {
        app = app.layer(axum::middleware::from_fn_with_state(
            hosts,
            public::check_host,
        ));
    }
    app.layer(axum::middleware::from_fn_with_state(
        gw.clone(),
        browser::guard,
    ))
    .with_state(gw)
}

/// Every route, each with its operation of the OpenAPI document: those
/// the configuration turns on, and the local blob store's when media is
/// kept on this machine.
fn api(config: &GatewayConfig, plugin_upload_limit: usize, local_media: bool) -> Api {
    let mut api = Api::new()
        .route("/v1/ws", websocket::upgrade_op(), websocket::upgrade)
        .route(
            "/v1/conversations",
            conversations::create_op(),
            conversations::create,
        )
        .route(
            "/v1/conversations",
            conversations::list_op(),
            conversations::list,
        )
        .route(
            "/v1/conversations/{id}",
            conversations::show_op(),
            conversations::show,
        )
        .route(
            "/v1/conversations/{id}/members",
            members::add_op(),
            members::add,
        )
        .route(
            "/v1/conversations/{id}/members/{user}",
            members::remove_op(),
            members::remove,
        )
        .route(
            "/v1/conversations/{id}/members/{user}",
            roles::change_role_op(),
            roles::change_role,
        )
        .route(
            "/v1/conversations/{id}/settings",
            roles::settings_op(),
            roles::settings,
        )
        .route(
            "/v1/conversations/{id}/settings",
            roles::put_settings_op(),
            roles::put_settings,
        )
        .route(
            "/v1/conversations/{id}/threads",
            threads::list_op(),
            threads::list,
        )
        .route("/v1/conversations/{id}", safety::patch_op(), safety::patch)
        .route(
            "/v1/conversations/{id}/bans",
            safety::list_bans_op(),
            safety::list_bans,
        )
        .route("/v1/conversations/{id}/bans", safety::ban_op(), safety::ban)
        .route(
            "/v1/channels",
            channels::directory_op(),
            channels::directory,
        )
        .route(
            "/v1/conversations/{id}/join",
            channels::join_op(),
            channels::join,
        )
        .route(
            "/v1/conversations/{id}/invites",
            channels::create_invite_op(),
            channels::create_invite,
        )
        .route(
            "/v1/conversations/{id}/invites",
            channels::list_invites_op(),
            channels::list_invites,
        )
        .route(
            "/v1/conversations/{id}/invites/{code}",
            channels::revoke_invite_op(),
            channels::revoke_invite,
        )
        .route(
            "/v1/invites/{code}",
            channels::preview_invite_op(),
            channels::preview_invite,
        )
        .route(
            "/v1/invites/{code}/accept",
            channels::accept_invite_op(),
            channels::accept_invite,
        )
        .route(
            "/v1/conversations/{id}/bans/{user}",
            safety::unban_op(),
            safety::unban,
        )
        .route(
            "/v1/conversations/{id}/mutes",
            mutes::list_op(),
            mutes::list,
        )
        .route(
            "/v1/conversations/{id}/mutes",
            mutes::mute_op(),
            mutes::mute,
        )
        .route(
            "/v1/conversations/{id}/mutes/{user}",
            mutes::unmute_op(),
            mutes::unmute,
        )
        .route(
            "/v1/conversations/{id}/messages/{message_id}/votes",
            polls::vote_op(),
            polls::vote,
        )
        .route(
            "/v1/conversations/{id}/messages/{message_id}/close",
            polls::close_op(),
            polls::close,
        )
        .route(
            "/v1/conversations/{id}/messages/{message_id}/reports",
            reports::create_op(),
            reports::create,
        )
        .route("/v1/admin/reports", reports::list_op(), reports::list)
        .route(
            "/v1/admin/reports/{report_id}/resolve",
            reports::resolve_op(),
            reports::resolve,
        )
        .route(
            "/v1/admin/users/{user}",
            erasure::erase_op(),
            erasure::erase,
        )
        .route("/v1/admin/jobs/{job_id}", erasure::job_op(), erasure::job)
        .route("/v1/admin/webhooks", webhooks::list_op(), webhooks::list)
        .route("/v1/admin/webhooks", webhooks::put_op(), webhooks::put)
        .route(
            "/v1/admin/push/templates",
            push::templates_op(),
            push::templates,
        )
        .route(
            "/v1/admin/push/templates",
            push::set_templates_op(),
            push::set_templates,
        )
        .route("/v1/admin/previews", previews::show_op(), previews::show)
        .route("/v1/admin/previews", previews::set_op(), previews::set)
        .route(
            "/v1/admin/blocklist",
            moderation::blocklist_op(),
            moderation::blocklist,
        )
        .route(
            "/v1/admin/blocklist",
            moderation::set_blocklist_op(),
            moderation::set_blocklist,
        )
        .route(
            "/v1/admin/bans",
            moderation::list_bans_op(),
            moderation::list_bans,
        )
        .route(
            "/v1/admin/bans/{user}",
            moderation::ban_op(),
            moderation::ban,
        )
        .route(
            "/v1/admin/bans/{user}",
            moderation::unban_op(),
            moderation::unban,
        )
        .route(
            "/v1/admin/shadow_bans",
            moderation::list_shadow_bans_op(),
            moderation::list_shadow_bans,
        )
        .route(
            "/v1/admin/shadow_bans/{user}",
            moderation::shadow_ban_op(),
            moderation::shadow_ban,
        )
        .route(
            "/v1/admin/shadow_bans/{user}",
            moderation::shadow_unban_op(),
            moderation::shadow_unban,
        )
        .route(
            "/v1/admin/audit",
            moderation::audit_op(),
            moderation::audit_log,
        )
        .route("/v1/me/export", export::export_op(), export::export)
        .route("/v1/search", search::search_op(), search::search)
        .route("/v1/scheduled", scheduled::list_op(), scheduled::list)
        .route(
            "/v1/scheduled/{scheduled_id}",
            scheduled::cancel_op(),
            scheduled::cancel,
        )
        .route("/v1/blocks", safety::list_blocks_op(), safety::list_blocks)
        .route("/v1/blocks/{user}", safety::block_op(), safety::block)
        .route("/v1/blocks/{user}", safety::unblock_op(), safety::unblock)
        .route("/v1/conversations/{id}/pins", pins::list_op(), pins::list)
        .route("/v1/conversations/{id}/pins", pins::pin_op(), pins::pin)
        .route(
            "/v1/conversations/{id}/pins/{message_id}",
            pins::unpin_op(),
            pins::unpin,
        )
        .route(
            "/v1/conversations/{id}/messages",
            history::page_op(),
            history::page,
        )
        .route(
            "/v1/conversations/{id}/messages",
            posting::post_op(),
            posting::post,
        )
        .route(
            "/v1/conversations/{id}/messages/{message_id}/versions",
            versions::list_op(),
            versions::list,
        )
        .route("/v1/users", profiles::list_op(), profiles::list)
        .route("/v1/users/{user}", profiles::show_op(), profiles::show)
        .route(
            "/v1/me/profile",
            profiles::patch_own_op(),
            profiles::patch_own,
        )
        .route(
            "/v1/admin/users/{user}/profile",
            profiles::patch_custom_op(),
            profiles::patch_custom,
        )
        .route(
            "/v1/users/{user}/presence",
            presence::show_op(),
            presence::show,
        )
        .route("/v1/media", media::grant_upload_op(), media::grant_upload)
        .route(
            "/v1/media/{blob_ref}",
            media::download_op(),
            media::download,
        )
        .route(
            "/v1/devices/{device}/keys",
            keys::publish_op(),
            keys::publish,
        )
        .route(
            "/v1/devices/{device}/keys",
            keys::own_keys_op(),
            keys::own_keys,
        )
        .route(
            "/v1/users/{user}/devices",
            keys::devices_op(),
            keys::devices,
        )
        .route(
            "/v1/users/{user}/devices/{device}/claim",
            keys::claim_op(),
            keys::claim,
        )
        .route(
            "/v1/devices/{device}/push",
            push::register_op(),
            push::register,
        )
        .route("/v1/devices/{device}/push", push::show_op(), push::show)
        .route(
            "/v1/devices/{device}/push",
            push::unregister_op(),
            push::unregister,
        )
        .route_with_body_limit(
            "/v1/admin/plugins/{hook}",
            plugin_deploys::deploy_op(),
            DefaultBodyLimit::max(plugin_upload_limit),
            plugin_deploys::deploy,
        )
        .route(
            "/v1/admin/plugins/{hook}",
            plugins::list_op(),
            plugins::list,
        )
        .route(
            "/v1/admin/plugins/{hook}",
            plugins::remove_op(),
            plugins::remove,
        )
        .route(
            "/v1/admin/plugins/{hook}/rollback",
            plugins::rollback_op(),
            plugins::rollback,
        )
        .route_with_body_limit(
            "/v1/admin/plugins/{hook}/shadow",
            plugin_deploys::deploy_shadow_op(),
            DefaultBodyLimit::max(plugin_upload_limit),
            plugin_deploys::deploy_shadow,
        )
        .route(
            "/v1/admin/plugins/{hook}/deploys",
            plugin_deploys::deploys_op(),
            plugin_deploys::deploys,
        )
        .route(
            "/v1/admin/plugins/{hook}/deploys/{id}",
            plugin_deploys::deploy_progress_op(),
            plugin_deploys::deploy_progress,
        )
        .route(
            "/v1/admin/plugins/{hook}/shadow",
            plugins::shadow_op(),
            plugins::shadow,
        )
        .route(
            "/v1/admin/plugins/{hook}/shadow",
            plugins::remove_shadow_op(),
            plugins::remove_shadow,
        )
        .route(
            "/v1/admin/plugins/{hook}/shadow/promote",
            plugins::promote_op(),
            plugins::promote,
        )
        .route(
            "/v1/admin/plugins/moderation/replay",
            plugins::replay_op(),
            plugins::replay,
        )
        .route("/v1/operator/tenants", tenants::list_op(), tenants::list)
        .route(
            "/v1/operator/tenants",
            tenants::create_op(),
            tenants::create,
        )
        .route(
            "/v1/operator/tenants/{id}",
            tenants::show_op(),
            tenants::show,
        )
        .route(
            "/v1/operator/tenants/{id}",
            tenants::change_op(),
            tenants::change,
        )
        .route(
            "/v1/operator/tenants/{id}",
            tenants::remove_op(),
            tenants::remove,
        )
        .route("/v1/asyncapi.json", asyncapi_op(), || {
            openapi::serve(switchboard_protocol::ASYNCAPI_JSON.into())
        })
        .route("/healthz", health::healthz_op(), health::healthz)
        .route("/readyz", health::readyz_op(), health::readyz);
    if local_media {
        // Uploads are streamed to disk, never buffered: the body limit is
        // the grant's own size, checked in `blobs::accept`.
        api = api
            .route_with_body_limit(
                "/v1/blobs/{token}",
                blobs::accept_op(),
                DefaultBodyLimit::disable(),
                blobs::accept,
            )
            .route("/v1/blobs/{token}", blobs::serve_op(), blobs::serve);
    }
    if config.serve_web_client {
        api = api
            .page("/", web_client::page)
            .page("/web/app.js", web_client::app)
            .page("/web/switchboard.js", web_client::sdk);
    }
    if let Some(metrics) = config.metrics.clone() {
        api = api.route("/metrics", metrics_op(), move || async move {
            (
                [(
                    axum::http::header::CONTENT_TYPE,
                    crate::metrics::CONTENT_TYPE,
                )],
                (metrics.0)(),
            )
        });
    }
    if config.dev_tokens.is_some() {
        api = api.route("/v1/dev/token", dev_token::issue_op(), dev_token::issue);
    }
    api
}

/// `GET /v1/asyncapi.json`
fn asyncapi_op() -> Operation {
    Operation::get("The AsyncAPI 3 document of the WebSocket at /v1/ws")
        .describe(
            "Every client and server frame, as JSON Schema generated from the server's own types.",
        )
        .for_anyone()
        .reply_document("AsyncAPI 3.0.0.")
}

/// `GET /metrics`
fn metrics_op() -> Operation {
    Operation::get("Prometheus metrics")
        .describe("The process's metrics in Prometheus' text format (README, \"Metrics and health\"). Served on the gateway's port only with `metrics_on_listen = true` (the default of `switchboard dev`, not of `switchboard gateway`: metrics name tenants); otherwise on `--metrics-listen` only.")
        .for_anyone()
        .reply_text(200, "Every metric family with its samples.", "text/plain")
}

/// Serves the gateway's HTTP application on `listener`, under the
/// connection caps and timeouts of `[limits]`, until `shutdown` resolves;
/// then waits for open HTTP requests (not WebSockets: they drain on their
/// own).
pub async fn serve(
    gw: &Shared,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    let limits = crate::server::ServeLimits::of(&gw.config.limits);
    let app = router(gw.clone(), listener.local_addr().ok());
    crate::server::serve(listener, app, limits, shutdown).await?;
    Ok(())
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
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use serde_json::{Value, json};

    use super::*;
    use crate::config::DevTokens;

    /// A configuration with every optional route on.
    fn everything_on() -> GatewayConfig {
        let mut config = GatewayConfig::new("g".into(), Vec::new());
        config.serve_web_client = true;
        config.dev_tokens = Some(DevTokens {
            tenant: "demo".into(),
            hs256_secret: "a-dev-secret-of-length".into(),
        });
        config.metrics = Some(crate::metrics::Exposition(Arc::new(String::new)));
        config
    }

    fn document(config: &GatewayConfig, local_media: bool) -> Value {
        api(config, 1 << 20, local_media).document(config)
    }

    /// Each operation of each path, with the path.
    fn operations(doc: &Value) -> Vec<(String, String, Value)> {
        let mut all = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                all.push((path.clone(), method.clone(), op.clone()));
            }
        }
        all
    }

    #[test]
    fn the_document_has_exactly_the_configured_routes() {
        let all = document(&everything_on(), true);
        let paths: BTreeSet<&str> = all["paths"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        for served in ["/metrics", "/v1/dev/token", "/v1/blobs/{token}", "/v1/ws"] {
            assert!(paths.contains(served), "{served}");
        }
        assert!(!paths.contains("/"), "the web client is not an API");
        assert!(operations(&all).len() >= 35, "{}", operations(&all).len());
        assert!(paths.contains("/v1/openapi.json"));

        let plain = GatewayConfig::new("g".into(), Vec::new());
        let some = document(&plain, false);
        for off in ["/metrics", "/v1/dev/token", "/v1/blobs/{token}"] {
            assert!(some["paths"].get(off).is_none(), "{off} is off");
        }
    }

    /// `gateway/openapi.json` is the document of the default
    /// configuration with every optional route on, for readers and
    /// client generators that have no gateway at hand; with
    /// `SWITCHBOARD_BLESS=1` it is rewritten instead.
    #[test]
    fn the_checked_in_document_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
        let generated =
            serde_json::to_string_pretty(&document(&everything_on(), true)).unwrap() + "\n";
        if std::env::var_os("SWITCHBOARD_BLESS").is_some() {
            std::fs::write(path, &generated).unwrap();
            return;
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "gateway/openapi.json is not what the routes generate: run SWITCHBOARD_BLESS=1 cargo test -p switchboard-gateway --lib http::tests"
        );
    }

    /// Each `{name}` of a route is a path parameter of its operation, and
    /// each path parameter is in the route.
    #[test]
    fn path_parameters_are_the_routes_own() {
        for (path, method, op) in operations(&document(&everything_on(), true)) {
            let in_route: BTreeSet<String> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .map(str::to_owned)
                .collect();
            let declared: BTreeSet<String> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            assert_eq!(in_route, declared, "{method} {path}");
        }
    }

    /// Every `$ref` names a component the document has.
    #[test]
    fn every_reference_resolves() {
        fn walk(doc: &Value, v: &Value, seen: &mut usize) {
            match v {
                Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                        *seen += 1;
                        let target = r.strip_prefix('#').and_then(|p| doc.pointer(p));
                        assert!(target.is_some(), "{r} does not resolve");
                    }
                    m.values().for_each(|v| walk(doc, v, seen));
                }
                Value::Array(a) => a.iter().for_each(|v| walk(doc, v, seen)),
                _ => {}
            }
        }
        let doc = document(&everything_on(), true);
        let mut seen = 0;
        walk(&doc, &doc, &mut seen);
        assert!(seen > 50, "{seen} references");
    }

    /// The limits of the configuration are in the bodies they limit.
    #[test]
    fn the_document_carries_the_configured_limits() {
        let mut config = everything_on();
        config.limits.max_title_chars = 77;
        config.limits.max_members_per_request = 12;
        config.media.max_bytes = 1234;
        let doc = document(&config, true);
        let schemas = &doc["components"]["schemas"];
        let field = |schema: &str, field: &str, key: &str| {
            schemas[schema]["properties"][field][key].clone()
        };
        assert_eq!(field("CreateConversation", "title", "maxLength"), json!(77));
        assert_eq!(
            field("CreateConversation", "members", "maxItems"),
            json!(12)
        );
        assert_eq!(field("AddMembers", "members", "maxItems"), json!(12));
        assert_eq!(field("UploadRequest", "size", "maximum"), json!(1234));
        assert_eq!(
            field("ReplayRequest", "limit", "maximum"),
            json!(config.limits.plugin_replay_max_messages)
        );
        assert!(field("UploadRequest", "mime", "pattern").is_string());
        assert_eq!(
            field("DeviceKeysUpload", "one_time_prekeys", "maxItems"),
            json!(crate::key_directory::MAX_ONE_TIME_PREKEYS)
        );
        // The bodies are the components of those types.
        let create = &doc["paths"]["/v1/conversations"]["post"]["requestBody"]["content"]["application/json"]
            ["schema"]["$ref"];
        assert_eq!(create, "#/components/schemas/CreateConversation");
    }

    /// Who may call what: the operator API takes the operator token, the
    /// documents and health take nothing, the rest a tenant's JWT.
    #[test]
    fn each_operation_names_its_callers() {
        for (path, method, op) in operations(&document(&everything_on(), true)) {
            let security = op.get("security");
            if path.starts_with("/v1/operator/") {
                assert_eq!(security, Some(&json!([{ "operator": [] }])), "{path}");
            } else if path.starts_with("/v1/blobs/")
                || [
                    "/healthz",
                    "/readyz",
                    "/metrics",
                    "/v1/asyncapi.json",
                    "/v1/openapi.json",
                    "/v1/dev/token",
                ]
                .contains(&path.as_str())
            {
                assert_eq!(security, Some(&json!([])), "{path}");
            } else {
                assert_eq!(security, None, "{method} {path}");
                assert!(op["responses"].get("401").is_some(), "{method} {path}");
            }
        }
    }
}
