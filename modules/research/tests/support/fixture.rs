//! A local HTTP server standing in for the web and for SearxNG.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

/// Characters of the path of the long redirect targets: far more than any
/// error may quote.
pub const LONG_PATH_CHARS: usize = 50_000;

/// The fixture server, running on the test's runtime.
pub struct Fixture {
    /// Where it listens.
    pub address: SocketAddr,
    /// How many requests reached `/secret`; a refused redirect must leave it at 0.
    pub secret_hits: Arc<AtomicUsize>,
    /// The most requests `/counted` was answering at one time.
    pub most_counted_at_once: Arc<AtomicUsize>,
    /// Holds the port the redirects to a closed port name: bound for as
    /// long as the fixture lives but never listening, so a connection to it
    /// is refused and no other socket can take the port meanwhile.
    _closed: tokio::net::TcpSocket,
}

impl Fixture {
    /// Starts the server on a free loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let secret_hits = Arc::new(AtomicUsize::new(0));
        let most_counted_at_once = Arc::new(AtomicUsize::new(0));
        let (closed, closed_address) = refusing_address();
        let state = Shared {
            port: address.port(),
            closed_port: closed_address.port(),
            secret_hits: secret_hits.clone(),
            counted_now: Arc::new(AtomicUsize::new(0)),
            most_counted_at_once: most_counted_at_once.clone(),
        };
        let app = Router::new()
            .route("/page.html", get(page))
            .route("/latin1.html", get(latin1))
            .route(
                "/notes.txt",
                get(|| async { ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "Plain notes.\nSecond line.") }),
            )
            .route(
                "/image.png",
                get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0x89, b'P', b'N', b'G']) }),
            )
            .route("/redirect", get(|| async { redirect("/page.html") }))
            .route("/loop", get(|| async { redirect("/loop") }))
            .route(
                "/to-private",
                get(|State(s): State<Shared>| async move { redirect(&format!("http://127.0.0.2:{}/secret", s.port)) }),
            )
            .route(
                "/to-unspecified",
                get(|State(s): State<Shared>| async move { redirect(&format!("http://0.0.0.0:{}/secret", s.port)) }),
            )
            .route(
                "/to-ipv6-loopback",
                get(|State(s): State<Shared>| async move { redirect(&format!("http://[::1]:{}/secret", s.port)) }),
            )
            .route("/to-file", get(|| async { redirect("file:///etc/passwd") }))
            .route("/to-smtp", get(|| async { redirect("http://127.0.0.1:25/") }))
            .route(
                "/to-long-private",
                get(|State(s): State<Shared>| async move {
                    redirect(&format!("http://127.0.0.2:{}/{}", s.port, "a".repeat(LONG_PATH_CHARS)))
                }),
            )
            .route("/to-long-missing", get(|| async { redirect(&format!("/missing/{}", "a".repeat(LONG_PATH_CHARS))) }))
            .route("/to-over-64k", get(|| async { redirect(&format!("/page.html?{}", "a".repeat(70_000))) }))
            .route(
                "/to-long-closed",
                get(|State(s): State<Shared>| async move {
                    redirect(&format!("http://127.0.0.1:{}/{}", s.closed_port, "a".repeat(LONG_PATH_CHARS)))
                }),
            )
            .route(
                "/secret",
                get(|State(s): State<Shared>| async move {
                    s.secret_hits.fetch_add(1, Ordering::SeqCst);
                    "TOP SECRET"
                }),
            )
            .route("/counted", get(counted))
            .route("/huge", get(huge))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "too late"
                }),
            )
            .route("/stall", get(stall))
            .route(
                "/slow-searx/search",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    "too late"
                }),
            )
            .route("/search", get(search))
            .route("/endless/search", get(endless_search))
            .route("/broken-searx/search", get(broken_search))
            .route("/long-title-and-links", get(long_title_and_links))
            .route("/gzip", get(gzip))
            .route("/formatting/{repetitions}", get(formatting))
            .route("/nested-divs/{count}", get(nested_divs))
            .route("/unclosed-tables/{count}", get(unclosed_tables))
            .route("/tables-around-text/{count}", get(tables_around_text))
            .route("/paragraphs/{count}", get(paragraphs))
            .with_state(state);
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { address, secret_hits, most_counted_at_once, _closed: closed }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

/// A loopback address that refuses connections, and the socket that
/// holds it: bound but never listening, so no other socket can take the
/// port while the socket lives (a port bound and closed again could be).
pub fn refusing_address() -> (tokio::net::TcpSocket, SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = socket.local_addr().unwrap();
    (socket, address)
}

#[derive(Clone)]
struct Shared {
    port: u16,
    /// A loopback port nothing listens on (see `Fixture::_closed`).
    closed_port: u16,
    secret_hits: Arc<AtomicUsize>,
    counted_now: Arc<AtomicUsize>,
    most_counted_at_once: Arc<AtomicUsize>,
}

fn redirect(location: &str) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, location.to_owned())]).into_response()
}

async fn page() -> Response {
    let html = r#"<!doctype html><html><head><meta charset="utf-8"><title>Fixture  page</title>
        <script>document.write("script text")</script></head>
        <body><nav><a href="/">Home</a></nav>
        <main><h1>Rivers of Europe</h1><p>The Danube flows through ten countries.</p>
        <p>See <a href="/notes.txt">the notes</a> and <a href="https://example.org/x">elsewhere</a>.</p></main>
        </body></html>"#;
    ([(header::CONTENT_TYPE, "text/html")], html).into_response()
}

/// A page in ISO-8859-1, said so only in the header.
async fn latin1() -> Response {
    let body: &[u8] = b"<title>Caf\xe9</title><p>Cr\xe8me br\xfbl\xe9e</p>";
    ([(header::CONTENT_TYPE, "text/html; charset=ISO-8859-1")], body).into_response()
}

/// A short page answered after 300 ms, counting the requests it answers
/// at one time.
async fn counted(State(s): State<Shared>) -> Response {
    let now = s.counted_now.fetch_add(1, Ordering::SeqCst) + 1;
    s.most_counted_at_once.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.counted_now.fetch_sub(1, Ordering::SeqCst);
    html("<p>Counted.</p>".to_owned())
}

/// An endless page.
async fn huge() -> Response {
    let chunk = Bytes::from("<p>".to_owned() + &"endless text ".repeat(1000) + "</p>");
    let stream = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
    ([(header::CONTENT_TYPE, "text/html")], Body::from_stream(stream)).into_response()
}

/// Headers and a first chunk, then nothing.
async fn stall() -> Response {
    let first = futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(b"<p>start")) });
    let never = futures::stream::pending();
    ([(header::CONTENT_TYPE, "text/html")], Body::from_stream(futures::StreamExt::chain(first, never))).into_response()
}

/// `<p><b id=N>x</p>` repeated: the tree builder rebuilds every unclosed
/// `<b>` in each later paragraph, N²/2 elements from 18·N bytes.
async fn formatting(Path(repetitions): Path<usize>) -> Response {
    html((0..repetitions).map(|i| format!("<p><b id={i}>x</p>")).collect())
}

/// `count` nested `<div>`s around one word.
async fn nested_divs(Path(count): Path<usize>) -> Response {
    html(format!("{}deep", "<div>".repeat(count)))
}

/// `count` unclosed `<table><tr><td>`, each table inside the last cell.
async fn unclosed_tables(Path(count): Path<usize>) -> Response {
    html(format!("{}cell", "<table><tr><td>".repeat(count)))
}

/// `count` unclosed `<table><tr><td>`, each inside the last cell, around
/// 1.9 MB of text: within every tree budget, but slow to lay out.
async fn tables_around_text(Path(count): Path<usize>) -> Response {
    html(format!("{}{}", "<table><tr><td>".repeat(count), "word ".repeat(380_000)))
}

/// `count` ordinary paragraphs: a large page whose tree is within budget.
async fn paragraphs(Path(count): Path<usize>) -> Response {
    html((0..count).map(|i| format!("<p>{i}</p>")).collect())
}

fn html(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// A 40,000-character title, a link of 3,000 characters and 300 links
/// of about 100 characters after a short text.
async fn long_title_and_links() -> Response {
    let links: String =
        (0..300).map(|i| format!("<a href=\"/link/{i}/{}\">link number {i}</a> ", "a".repeat(50))).collect();
    html(format!(
        "<title>{}</title><main><p>Short text.</p></main><footer><a href=\"/{}\">long</a> {links}</footer>",
        "T".repeat(40_000),
        "u".repeat(3000)
    ))
}

/// A page sent gzip-encoded whatever the request asked for.
async fn gzip() -> Response {
    // gzip of `<p>hello</p>`.
    let body: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03\xb3\x29\xb0\xcb\x48\xcd\xc9\xc9\xb7\xd1\x2f\xb0\x03\x00\x44\xfb\xae\xd2\x0c\x00\x00\x00";
    ([(header::CONTENT_TYPE, "text/html"), (header::CONTENT_ENCODING, "gzip")], body).into_response()
}

/// A search answer that opens its results and never ends.
async fn endless_search() -> Response {
    let first = futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(b"{\"results\": [")) });
    let spaces = Bytes::from(" ".repeat(64 * 1024));
    let rest = futures::stream::repeat_with(move || Ok::<_, std::io::Error>(spaces.clone()));
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(futures::StreamExt::chain(first, rest)))
        .into_response()
}

/// A search answer that breaks off after its first bytes.
async fn broken_search() -> Response {
    let first = futures::stream::once(async { Ok::<_, std::io::Error>(Bytes::from_static(b"{\"results\": [")) });
    let broken = futures::stream::once(async {
        // After the head and the first bytes have gone out.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Err(std::io::Error::other("the connection broke"))
    });
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(futures::StreamExt::chain(first, broken)))
        .into_response()
}

/// SearxNG's `/search?format=json`, with the fields a real instance sends.
async fn search(Query(query): Query<HashMap<String, String>>) -> Response {
    if query.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "Forbidden").into_response();
    }
    let q = query.get("q").cloned().unwrap_or_default();
    if q == "engine failure" {
        return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
    }
    let category = query.get("categories").cloned().unwrap_or_default();
    // A result a hostile engine could send comes first; it must be dropped.
    let hostile = json!({"url": "javascript:alert(1)", "title": "hostile", "content": "x"});
    let results: Vec<_> = std::iter::once(hostile)
        .chain((1..=8).map(|i| {
            json!({
                "url": format!("https://example.org/{category}/{i}"),
                "title": format!("{q} result {i}"),
                "content": format!("Snippet {i} about {q}."),
                "engine": "duckduckgo",
                "engines": ["duckduckgo"],
                "category": category,
                "score": 1.0 / f64::from(i),
                "publishedDate": if category == "news" { json!(format!("2024-05-0{i}T08:00:00")) } else { json!(null) },
            })
        }))
        .collect();
    axum::Json(json!({
        "query": q,
        "number_of_results": 0,
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": []
    }))
    .into_response()
}
