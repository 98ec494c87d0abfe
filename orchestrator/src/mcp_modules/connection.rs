//! One live MCP client session with a server: over streamable HTTP (with
//! the configured headers or bearer token, never through a proxy, its event
//! stream reopened at most once a second: see [`super::http_client`]), or
//! to a child process on stdio that dies with the session, with whatever it
//! started (it leads a process group of its own, killed with the tree
//! below it: `sh -c` or `npx` start the real server as a grandchild), its
//! standard error logged line by line until the session ends ([`super::child_stderr`]).
//! Every message read is bounded (over stdio by [`super::stdio_client`],
//! which fails the request whose answer is too long instead of dropping it), and so
//! are the server's own requests waiting for an answer
//! (`MAX_MCP_SERVER_REQUESTS`, see [`super::server_requests`]); a
//! `notifications/tools/list_changed` asks for the module to be discovered
//! again ([`super::rediscovery`]).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use limited_process::ProcessGroupGuard;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::handler::client::ClientHandler;
use rmcp::service::{MaybeSendFuture, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use tokio::sync::watch;

use super::child_stderr::StderrReader;
use super::http_client::{self, SessionClient};
use super::rediscovery::Changes;
use super::server_requests::{EndReason, ServerRequestBudget};
use super::settings::McpTransport;
use super::stdio_client::StdioClient;

/// What a stdio server's child keeps of the orchestrator's environment,
/// besides its table's `env`: the list the official MCP SDKs' stdio clients
/// pass (from sudo's). Nothing else: the orchestrator's own secrets
/// (`SERVICE_AUTH_TOKEN`, `ORCHESTRATOR_API_TOKEN`, `REDIS_URL`, the other
/// servers' tokens in `MODULE_SERVICES`) stay with it.
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// Asks for the module to be discovered again on each `notifications/tools/list_changed`.
#[derive(Debug, Clone)]
pub struct ListChanges {
    module: String,
    changes: Arc<Changes>,
}

impl ClientHandler for ListChanges {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        // At debug: a server may send thousands a second (the discoveries that follow are logged).
        tracing::debug!(module = %self.module, "the MCP server's tools changed; discovering it again");
        self.changes.mark(&self.module);
        std::future::ready(())
    }
}

/// A session with an MCP server, and the child process it runs in, if any.
pub struct Connection {
    /// The client session (dropped first, which ends it).
    pub service: RunningService<RoleClient, ListChanges>,
    /// Why the orchestrator ended the session, once it has.
    ended: EndReason,
    /// Kills the child's process group and tree when the connection is
    /// dropped, before the child itself is (so its pid is still its own).
    _group: Option<ProcessGroupGuard>,
    /// Killed when the connection is dropped (`kill_on_drop`).
    _child: Option<tokio::process::Child>,
    /// Reads the child's standard error until shortly after the connection is dropped.
    _stderr: Option<StderrReader>,
}

impl Connection {
    /// Whether the session has ended (the server closed it or went away).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed() || self.ended.borrow().is_some()
    }

    /// Why the orchestrator ended the session, if it did (the server went
    /// over `MAX_MCP_SERVER_REQUESTS`, or sent a stdio line over the message
    /// limit whose id could not be read).
    pub fn end_reason(&self) -> Option<String> {
        self.ended.borrow().clone()
    }
}

/// Opens a session with the server of `module` at `transport`: the
/// handshake, no message read over `max_message_bytes`, the session ended
/// when the server has more than `max_server_requests` requests
/// unanswered; over HTTP with `http`; list changes, and the end of a
/// session for that, ask `changes` for the module to be discovered again.
pub async fn connect(
    module: &str,
    transport: &McpTransport,
    max_message_bytes: usize,
    max_server_requests: usize,
    http: &reqwest_mcp::Client,
    changes: &Arc<Changes>,
) -> Result<Connection, String> {
    let on_end = {
        let (module, changes) = (module.to_owned(), Arc::clone(changes));
        // Discovered again, so `GET /modules` shows why.
        move || changes.mark(&module)
    };
    let handler = ListChanges { module: module.to_owned(), changes: Arc::clone(changes) };
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
            config.retry_config = http_client::reconnect_policy();
            let transport = StreamableHttpClientTransport::with_client(SessionClient::new(http.clone()), config);
            let transport =
                ServerRequestBudget::new(transport, module, max_server_requests, watch::Sender::new(None), on_end);
            let ended = transport.end_reason();
            let service = handler.serve(transport).await.map_err(|e| http_client::handshake_error(&e))?;
            Ok(Connection { service, ended, _group: None, _child: None, _stderr: None })
        }
        McpTransport::Stdio { command, env } => {
            let (program, arguments) = command.split_first().ok_or("no command to run")?;
            let mut command = tokio::process::Command::new(program);
            // Only its stdin, stdout and stderr: no descriptor the orchestrator inherited.
            limited_process::close_from_on_exec(command.as_std_mut(), 3);
            let mut child = command
                .args(arguments)
                .env_clear()
                .envs(INHERITED_ENV.iter().filter_map(|name| Some((name, std::env::var_os(name)?))))
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("cannot start `{program}`: {e}"))?;
            // Dropped before `child`, here too when the handshake fails or takes too long.
            let group = ProcessGroupGuard::new(child.id());
            let (Some(stdout), Some(stdin), Some(stderr)) =
                (child.stdout.take(), child.stdin.take(), child.stderr.take())
            else {
                return Err("the child's stdin, stdout and stderr were not piped".to_owned());
            };
            // Read to its end (the child's tree gone), each line logged naming
            // the module; ended with the connection, here too when the handshake fails.
            let stderr = StderrReader::spawn(module.to_owned(), stderr);
            let ending = watch::Sender::new(None);
            let transport = StdioClient::new(module, stdout, stdin, max_message_bytes, ending.clone());
            let transport = ServerRequestBudget::new(transport, module, max_server_requests, ending, on_end);
            let ended = transport.end_reason();
            let service = handler.serve(transport).await.map_err(|e| module_sdk::error_chain(&e))?;
            Ok(Connection { service, ended, _group: Some(group), _child: Some(child), _stderr: Some(stderr) })
        }
    }
}
