//! One live MCP client session with a server: over streamable HTTP (with
//! the configured headers or bearer token), or to a child process on
//! stdio that dies with the session. Every message read is bounded; a
//! `notifications/tools/list_changed` is passed on as the module's name.

use std::collections::HashMap;
use std::process::Stdio;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::handler::client::ClientHandler;
use rmcp::service::{MaybeSendFuture, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use tokio::sync::mpsc::Sender;

use super::settings::McpTransport;

/// Passes each `notifications/tools/list_changed` on as the module's name.
#[derive(Debug, Clone)]
pub struct ListChanges {
    module: String,
    changed: Sender<String>,
}

impl ClientHandler for ListChanges {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        tracing::info!(module = %self.module, "the MCP server's tools changed; discovering it again");
        // A full queue already holds a re-discovery; a closed one has nobody to tell.
        let _ = self.changed.try_send(self.module.clone());
        std::future::ready(())
    }
}

/// A session with an MCP server, and the child process it runs in, if any.
pub struct Connection {
    /// The client session (dropped first, which ends it).
    pub service: RunningService<RoleClient, ListChanges>,
    /// Killed when the connection is dropped (`kill_on_drop`).
    _child: Option<tokio::process::Child>,
}

impl Connection {
    /// Whether the session has ended (the server closed it or went away).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }
}

/// Opens a session with the server of `module` at `transport`: the
/// handshake, no message read over `max_message_bytes`; list changes go to `changed`.
pub async fn connect(
    module: &str,
    transport: &McpTransport,
    max_message_bytes: usize,
    changed: Sender<String>,
) -> Result<Connection, String> {
    let handler = ListChanges { module: module.to_owned(), changed };
    match transport {
        McpTransport::Http { url, headers, bearer_token } => {
            let headers: HashMap<HeaderName, HeaderValue> = headers
                .iter()
                .filter_map(|(name, value)| Some((HeaderName::from_bytes(name.as_bytes()).ok()?, value.parse().ok()?)))
                .collect();
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                .custom_headers(headers)
                .max_json_response_size(max_message_bytes)
                .max_sse_event_size(max_message_bytes);
            if let Some(token) = bearer_token {
                config = config.auth_header(token);
            }
            let service = handler
                .serve(StreamableHttpClientTransport::from_config(config))
                .await
                .map_err(|e| module_sdk::error_chain(&e))?;
            Ok(Connection { service, _child: None })
        }
        McpTransport::Stdio { command, env } => {
            let (program, arguments) = command.split_first().ok_or("no command to run")?;
            let mut child = tokio::process::Command::new(program)
                .args(arguments)
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start `{program}`: {e}"))?;
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err("the child's stdin and stdout were not piped".to_owned());
            };
            let transport = AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(max_message_bytes);
            let service = handler.serve(transport).await.map_err(|e| module_sdk::error_chain(&e))?;
            Ok(Connection { service, _child: Some(child) })
        }
    }
}
