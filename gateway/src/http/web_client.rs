//! `GET /`: the browser client (`web/index.html`, its script `web/app.js`
//! and the SDK bundled as `web/switchboard.js`), when `serve_web_client`
//! is on.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// Its own scripts and its own origin's API and WebSocket; nothing else.
/// No inline script: data can never become code.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
     connect-src 'self' ws: wss:; img-src 'self' blob: data:; media-src 'self' blob:; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn page() -> Response {
    asset(
        "text/html; charset=utf-8",
        include_str!("../../web/index.html"),
    )
}

pub(super) async fn app() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../web/app.js"),
    )
}

pub(super) async fn sdk() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../web/switchboard.js"),
    )
}
