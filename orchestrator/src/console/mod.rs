//! The console at `GET /`: one page of plain HTML, CSS and JavaScript
//! embedded in the binary (no build step, nothing fetched from elsewhere)
//! for a person with a key: modules, their tools with readable schemas, a
//! form per tool, and their pending approvals.
//!
//! The page and its assets hold no data and need no key; every call the
//! page makes carries the key the person entered, kept in the tab's
//! `sessionStorage`.

use axum::Router;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::http::AppState;

const INDEX: &str = include_str!("index.html");
const STYLE: &str = include_str!("console.css");
const SCRIPT: &str = include_str!("console.js");

/// The console's routes, to merge into the API's router.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| asset("text/html; charset=utf-8", INDEX)))
        .route("/console.css", get(|| asset("text/css; charset=utf-8", STYLE)))
        .route("/console.js", get(|| asset("text/javascript; charset=utf-8", SCRIPT)))
}

/// An embedded asset; the page may only load its own scripts and styles.
async fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; frame-ancestors 'none'",
            ),
        ],
        body,
    )
        .into_response()
}
