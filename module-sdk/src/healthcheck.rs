//! The entry of a module binary ([`run_main`]), and the health probe for
//! container images that have no shell or curl (`FROM scratch`): the
//! service's own binary asks its `/health`.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use crate::config::ServeConfig;

/// How long the probe waits for connecting, and for the answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The whole `main` of a module binary: answers `--healthcheck` first (see
/// [`run_healthcheck_if_requested`]), then runs `run` (parse settings, build
/// the module, serve it) and turns its error into `<name>: <error>` on
/// standard error and a failing exit code.
///
/// ```no_run
/// # use module_sdk::Module;
/// #[tokio::main]
/// async fn main() -> std::process::ExitCode {
///     module_sdk::run_main("demo", async {
///         Module::new("demo", "Demonstration tools.").serve().await
///     })
///     .await
/// }
/// ```
pub async fn run_main<E: std::fmt::Display>(
    name: &str,
    run: impl std::future::Future<Output = Result<(), E>>,
) -> std::process::ExitCode {
    run_healthcheck_if_requested();
    match run.await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// When the process was started as `<binary> --healthcheck`, probes
/// `GET /health` on the port from `PORT` (as `serve` would bind it) and exits
/// 0 when it answers `200`, 1 otherwise; without the flag it returns at once.
/// Call it first in `main`, before parsing other arguments.
pub fn run_healthcheck_if_requested() {
    if std::env::args().nth(1).as_deref() != Some("--healthcheck") {
        return;
    }
    let outcome = ServeConfig::from_env()
        .map_err(|e| e.to_string())
        .and_then(|config| probe_health(local_address(config.host, config.port)));
    match outcome {
        Ok(()) => std::process::exit(0),
        Err(reason) => {
            eprintln!("unhealthy: {reason}");
            std::process::exit(1);
        }
    }
}

/// Where a server bound to `host:port` is reached from the same machine.
pub fn local_address(host: IpAddr, port: u16) -> SocketAddr {
    let host = if host.is_unspecified() { IpAddr::V4(Ipv4Addr::LOCALHOST) } else { host };
    SocketAddr::new(host, port)
}

/// `Ok` when `GET http://{address}/health` answers `200` within a few seconds.
pub fn probe_health(address: SocketAddr) -> Result<(), String> {
    if address.port() == 0 {
        return Err("PORT is 0 (a random port), so there is no known port to probe".into());
    }
    let mut stream =
        TcpStream::connect_timeout(&address, PROBE_TIMEOUT).map_err(|e| format!("cannot connect to {address}: {e}"))?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT)).map_err(|e| e.to_string())?;
    let request = format!("GET /health HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| format!("cannot send to {address}: {e}"))?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| format!("no answer from {address}: {e}"))?;
    let status_line = answer.split(|&b| b == b'\n').next().unwrap_or_default();
    let status_line = String::from_utf8_lossy(status_line);
    match status_line.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        _ => Err(format!("{address}/health answered `{}`", status_line.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_hosts_are_probed_on_loopback() {
        let address = local_address("0.0.0.0".parse().unwrap(), 8000);
        assert_eq!(address.to_string(), "127.0.0.1:8000");
        assert_eq!(local_address("127.0.0.2".parse().unwrap(), 9).to_string(), "127.0.0.2:9");
    }

    #[tokio::test]
    async fn the_probe_accepts_200_and_refuses_anything_else() {
        async fn serve(status: &'static str) -> SocketAddr {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buffer = [0u8; 1024];
                let _ = socket.read(&mut buffer).await;
                let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
                socket.write_all(answer.as_bytes()).await.unwrap();
            });
            address
        }
        let healthy = serve("200 OK").await;
        assert!(tokio::task::spawn_blocking(move || probe_health(healthy)).await.unwrap().is_ok());
        let broken = serve("503 Service Unavailable").await;
        let error = tokio::task::spawn_blocking(move || probe_health(broken)).await.unwrap().unwrap_err();
        assert!(error.contains("503"), "{error}");
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        assert!(probe_health(closed).unwrap_err().contains("cannot connect"));
        assert!(probe_health("127.0.0.1:0".parse().unwrap()).is_err());
    }
}
