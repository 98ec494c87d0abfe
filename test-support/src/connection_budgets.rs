//! The checks of the connection budgets that `module_sdk::service::serve_router`
//! gives every server of the workspace (`HEADER_READ_TIMEOUT_SECONDS`,
//! `BODY_READ_TIMEOUT_SECONDS`, `MAX_CONNECTIONS`, `MAX_BODY_BYTES`,
//! `MAX_HEADER_BYTES`), written
//! once and run against each real binary from raw TCP clients.
//!
//! Each check takes the server's address and a `POST` route that reads a
//! JSON body (`/execute` on a module, `/v1/tool-calls?format=openai` on the
//! orchestrator), and panics with what the server sent when a budget does
//! not hold. Requests name `Host: localhost`, one the orchestrator in
//! development mode answers (it refuses other names, against DNS rebinding).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, sleep, timeout};

use crate::raw_tcp::{read_answer, read_until_closed, send_and_stall};

/// How long past a timeout a slow connection may take to be closed.
pub const MARGIN: Duration = Duration::from_secs(5);

/// Connections that sent half a request head, and connections that sent a
/// head and half a body, all stalled: see [`SlowClients::assert_closed`].
pub struct SlowClients {
    heads: Vec<TcpStream>,
    bodies: Vec<TcpStream>,
}

impl SlowClients {
    /// Opens `count` connections of each kind to `post_path` on `address`.
    pub async fn hold(address: SocketAddr, post_path: &str, count: usize) -> Self {
        let half_a_head = format!("POST {post_path} HTTP/1.1\r\nHost: localhost\r\nContent-Ty");
        let half_a_body = format!(
            "POST {post_path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"tool_name\""
        );
        let mut held = Self { heads: Vec::new(), bodies: Vec::new() };
        for _ in 0..count {
            held.heads.push(send_and_stall(address, half_a_head.as_bytes()).await);
            held.bodies.push(send_and_stall(address, half_a_body.as_bytes()).await);
        }
        held
    }

    /// Every held connection is closed within `timeout` (the header and body
    /// read timeouts, equal here) and [`MARGIN`]: a half-sent head silently
    /// or with `408`, a half-sent body with `408` naming
    /// `BODY_READ_TIMEOUT_SECONDS` and `Connection: close`.
    pub async fn assert_closed(mut self, timeout: Duration) {
        let within = timeout + MARGIN;
        for stream in &mut self.heads {
            let answer = read_until_closed(stream, within).await.expect("a half-sent head is closed after its timeout");
            assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 408"), "{answer}");
        }
        for stream in &mut self.bodies {
            let answer = read_until_closed(stream, within).await.expect("a half-sent body is closed after its timeout");
            assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
            assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
            assert!(answer.contains("BODY_READ_TIMEOUT_SECONDS"), "{answer}");
        }
    }
}

/// With `slots` connections stalled in their heads (the server's
/// `MAX_CONNECTIONS`), one more connection is not served until the
/// `header_timeout` frees a slot, and then it is.
pub async fn assert_connection_cap(address: SocketAddr, post_path: &str, slots: usize, header_timeout: Duration) {
    let half_a_head = format!("POST {post_path} HTTP/1.1\r\nHost: localhost\r\nContent-Ty");
    let mut held = Vec::new();
    for _ in 0..slots {
        held.push(send_and_stall(address, half_a_head.as_bytes()).await);
    }
    let mut waiting =
        send_and_stall(address, b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await;
    let mut first_byte = [0u8; 1];
    let early = timeout(Duration::from_millis(1000), waiting.read(&mut first_byte)).await;
    assert!(early.is_err(), "one more connection was served while {slots} held every slot: {early:?}");

    let answer = read_until_closed(&mut waiting, header_timeout + MARGIN).await.expect("served once a slot frees");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for stream in &mut held {
        assert!(read_until_closed(stream, MARGIN).await.is_some(), "a held connection is closed by its timeout");
    }
}

/// A declared `Content-Length` of 1 GiB, with or without
/// `Expect: 100-continue`, gets `413` naming `MAX_BODY_BYTES` before any of
/// the body is sent, and never a `100 Continue`.
pub async fn assert_declared_body_refused_early(address: SocketAddr, post_path: &str) {
    for expect in ["", "Expect: 100-continue\r\n"] {
        let head = format!(
            "POST {post_path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n{expect}\r\n"
        );
        let mut stream = send_and_stall(address, head.as_bytes()).await;
        let answer = read_answer(&mut stream, MARGIN).await.expect("an answer without the body");
        assert!(answer.starts_with("HTTP/1.1 413"), "{expect:?}: {answer}");
        assert!(!answer.contains("100 Continue"), "{answer}");
        assert!(answer.contains("MAX_BODY_BYTES") && answer.contains("1073741824"), "{answer}");
    }
}

/// Request heads over `max_header_bytes` (one 100 KB header, and 2000 small
/// ones: past the fixed 100 header fields, though under the byte limit)
/// get `431` with `Connection: close` and the connection closed, while a
/// head just under the limit is served: `GET get_path` answers `200`.
pub async fn assert_large_heads_refused(address: SocketAddr, get_path: &str, max_header_bytes: usize) {
    let head = |headers: &str| format!("GET {get_path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n");
    let long = head(&format!("X-Long: {}\r\n", "a".repeat(100_000)));
    let many = head(&(0..2000).map(|i| format!("X-H{i}: v\r\n")).collect::<String>());
    for (what, request) in [("one 100 KB header", long), ("2000 headers", many)] {
        let mut stream = send_and_stall(address, request.as_bytes()).await;
        let answer = read_until_closed(&mut stream, MARGIN).await.expect("refused and closed at once");
        assert!(answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large"), "{what}: {answer}");
        assert!(answer.to_ascii_lowercase().contains("connection: close"), "{what}: {answer}");
    }
    let under = head(&format!("X-Long: {}\r\nConnection: close\r\n", "a".repeat(max_header_bytes - 200)));
    let mut stream = send_and_stall(address, under.as_bytes()).await;
    let answer = read_until_closed(&mut stream, MARGIN).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "a head under the limit: {answer}");
}

/// The receive buffer of [`assert_slow_reader_gets_the_whole_answer`]'s client.
const SLOW_READER_BUFFER: usize = 64 * 1024;

/// How large an answer must be for [`assert_slow_reader_gets_the_whole_answer`]
/// to show anything: three times what the server's send buffer (up to
/// `net.ipv4.tcp_wmem`'s maximum) and the client's receive buffer hold,
/// and at least 12 MiB. Read over three header timeouts, such an answer is
/// still being written when the first timeout ends.
pub fn slow_reader_answer_bytes() -> usize {
    3 * (tcp_send_buffer_max() + 2 * SLOW_READER_BUFFER).max(4 * 1024 * 1024)
}

/// The most a TCP socket's send buffer grows to on this host (the last of
/// `net.ipv4.tcp_wmem`'s three numbers; 4 MiB, Linux's default, if unread).
fn tcp_send_buffer_max() -> usize {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .ok()
        .and_then(|text| text.split_whitespace().last()?.parse().ok())
        .unwrap_or(4 * 1024 * 1024)
}

/// An answer still being written is not idle time: a client that posts
/// `body` to `post_path` and reads the answer (at least
/// [`slow_reader_answer_bytes`] long) slowly, through a small receive buffer,
/// over three `header_timeout`s, gets all of it. The header timeout counts
/// only from the answer's last written byte; a server that started it when
/// the answer was handed over would close the connection while most of the
/// answer is still unsent, and this client would get it cut off.
pub async fn assert_slow_reader_gets_the_whole_answer(
    address: SocketAddr,
    post_path: &str,
    body: &str,
    header_timeout: Duration,
) {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.set_recv_buffer_size(SLOW_READER_BUFFER as u32).expect("a small receive buffer");
    let mut stream = socket.connect(address).await.expect("the server accepts a connection");
    let head = format!(
        "POST {post_path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("the head is sent");
    stream.write_all(body.as_bytes()).await.expect("the body is sent");

    // The head and the body's first bytes (JSON text, so one byte a char),
    // however long a debug build takes to make a large answer.
    let received = read_answer(&mut stream, Duration::from_secs(60)).await.expect("an answer head");
    let head_end = received.find("\r\n\r\n").unwrap_or_else(|| panic!("no whole answer head: {received}")) + 4;
    let (answer_head, body_start) = received.split_at(head_end);
    assert!(answer_head.starts_with("HTTP/1.1 200"), "{answer_head}");
    let length: usize = answer_head
        .lines()
        .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().parse()))
        .unwrap_or_else(|| panic!("no Content-Length: {answer_head}"))
        .expect("a numeric Content-Length");
    let minimum = slow_reader_answer_bytes();
    assert!(length >= minimum, "an answer of {length} bytes, under {minimum}, outlasts no timeout");

    // An even pace: a share of the answer every tick, over three header timeouts.
    const TICK: Duration = Duration::from_millis(50);
    let ticks = ((3 * header_timeout).as_millis() / TICK.as_millis()).max(1);
    let per_tick = length / usize::try_from(ticks).expect("a few ticks") + 1;
    let mut body_read = body_start.len();
    let started = Instant::now();
    let mut buffer = vec![0u8; per_tick];
    while body_read < length {
        let mut quota = per_tick.min(length - body_read);
        while quota > 0 {
            match timeout(MARGIN, stream.read(&mut buffer[..quota])).await {
                Ok(Ok(n)) if n > 0 => {
                    body_read += n;
                    quota -= n;
                }
                other => panic!(
                    "the answer was cut off after {body_read} of {length} body bytes, {:?} into a slow read ({other:?})",
                    started.elapsed()
                ),
            }
        }
        sleep(TICK).await;
    }
}

/// With `MAX_BODY_BYTES` at 1000, a chunked body of 1,200 bytes whose last
/// chunk never comes gets `413` naming the setting: only a server that stops
/// reading at the limit can answer.
pub async fn assert_chunked_body_stopped_at_the_limit(address: SocketAddr, post_path: &str) {
    let head = format!(
        "POST {post_path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let mut stream = send_and_stall(address, head.as_bytes()).await;
    stream.write_all(over_the_limit_chunks().as_bytes()).await.expect("the chunks are sent");
    let answer = read_answer(&mut stream, MARGIN).await.expect("an answer before the body ends");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("MAX_BODY_BYTES (1000)"), "{answer}");
}

/// Two chunks of 600 bytes, past a `MAX_BODY_BYTES` of 1000 and no more, in
/// one write: a server that refuses at the limit closes the connection, and
/// a write after that would fail with a broken pipe.
fn over_the_limit_chunks() -> String {
    format!("258\r\n{}\r\n", "x".repeat(600)).repeat(2)
}
