//! `GET /`: the dev browser client (`web/index.html`), when
//! `serve_web_client` is on.

use axum::http::header;
use axum::response::{IntoResponse, Response};

pub(super) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // The page's own inline script and style, and its own origin's
            // API and WebSocket; nothing else.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self' ws: wss:; img-src 'self' blob: data:; media-src 'self' blob:; \
                 frame-ancestors 'none'",
            ),
        ],
        include_str!("../../web/index.html"),
    )
        .into_response()
}
