//! Raw TCP clients for tests of how a server treats slow, stalled or
//! oversized requests, which an HTTP client library would not send.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// A connection to `address` that has sent `bytes` and then nothing more.
pub async fn send_and_stall(address: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.expect("the server accepts a connection");
    stream.write_all(bytes).await.expect("the request bytes are sent");
    stream
}

/// Everything the server sends until it closes the connection (a reset
/// counts as closing); `None` if it is still open after `within`.
pub async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    read(stream, within, None).await
}

/// The first answer on `stream`: its head and the start of its JSON body
/// (or what came before the server closed); `None` after `within`.
pub async fn read_answer(stream: &mut TcpStream, within: Duration) -> Option<String> {
    read(stream, within, Some("\r\n\r\n{")).await
}

/// What `stream` receives until it closes or what came holds `until`.
async fn read(stream: &mut TcpStream, within: Duration, until: Option<&str>) -> Option<String> {
    let mut received = Vec::new();
    let reading = timeout(within, async {
        let mut buffer = [0u8; 4096];
        while until.is_none_or(|marker| !String::from_utf8_lossy(&received).contains(marker)) {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    });
    reading.await.ok().map(|()| String::from_utf8_lossy(&received).into_owned())
}
