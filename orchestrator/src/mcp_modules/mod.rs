//! MCP servers as modules of the fleet: the orchestrator is their MCP client.
//! Discovery lists a server's tools (every page, within `MAX_MANIFEST_BYTES`
//! with the server's instructions when they describe the module,
//! and `DISCOVERY_TIMEOUT`, a cursor given twice refused as a loop) as a manifest that is then checked and cached
//! like any module's; a call goes to `tools/call` and comes back as a
//! ToolResult; `notifications/tools/list_changed` discovers the module
//! again, at most once per [`rediscovery::REDISCOVERY_INTERVAL`]. One session per server is kept open and reopened after it breaks,
//! at most once per [`FIRST_RECONNECT_DELAY`], doubling to
//! [`MAX_RECONNECT_DELAY`] while it keeps failing, a session that ends
//! within [`MAX_RECONNECT_DELAY`] of opening counting as a failure (so a
//! crashing stdio server, even one that answers its handshake first, is
//! restarted a bounded number of times). Opening one (starting a
//! stdio server, the handshake) takes at most `DISCOVERY_TIMEOUT`: every
//! call of the module waits for it. A server with more than
//! `MAX_MCP_SERVER_REQUESTS` requests of its own unanswered loses its
//! session ([`server_requests`]), which counts as a failure too.

pub mod child_stderr;
pub mod connection;
pub mod http_client;
pub mod manifest;
pub mod rediscovery;
pub mod results;
pub mod server_requests;
pub mod settings;
pub mod stdio_client;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use module_sdk::ErrorKind;
use module_sdk::contract::{ModuleManifest, ToolCall, ToolResult};
use module_sdk::mcp::USER_ID_META_KEY;
use module_sdk::service::TraceParent;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams, RequestParamsMeta};
use rmcp::service::ClientCacheConfig;
use serde_json::Value;
use tokio::time::Instant;

use crate::discovery::DiscoveryError;
use crate::limits::Budgets;
use crate::registry::Registry;
use connection::{Connection, connect};
use rediscovery::Changes;
use settings::McpServerSettings;

/// The first wait before a server that could not be reached is tried again.
pub const FIRST_RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// The longest wait between two attempts at a server.
pub const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(60);
/// The most characters of a looping cursor an error shows.
const MAX_CURSOR_CHARS_SHOWN: usize = 100;

/// The configured MCP servers, by module name.
pub struct McpServers {
    servers: BTreeMap<String, McpServer>,
    /// The modules to discover again, on their servers' word.
    changes: Arc<Changes>,
    /// Whether a task follows `changes` already.
    followed: AtomicBool,
}

impl Default for McpServers {
    /// No MCP server.
    fn default() -> Self {
        Self { servers: BTreeMap::new(), changes: Arc::default(), followed: AtomicBool::new(false) }
    }
}

impl McpServers {
    /// The servers of `settings`, none connected yet, within `budgets`, a
    /// session opened within `open_timeout` (`DISCOVERY_TIMEOUT`), those
    /// over HTTP reached with `http` ([`http_client::shared_client`]).
    pub fn new(
        settings: &BTreeMap<String, McpServerSettings>,
        budgets: &Budgets,
        open_timeout: Duration,
        http: &reqwest_mcp::Client,
    ) -> Self {
        let changes = Arc::new(Changes::default());
        let servers = settings
            .iter()
            .map(|(name, settings)| {
                let server = McpServer {
                    module: name.clone(),
                    settings: settings.clone(),
                    max_manifest_bytes: budgets.max_manifest_bytes,
                    max_answer_bytes: budgets.max_answer_bytes,
                    max_server_requests: budgets.max_mcp_server_requests,
                    open_timeout,
                    http: http.clone(),
                    changes: Arc::clone(&changes),
                    session: tokio::sync::Mutex::default(),
                    listed: std::sync::Mutex::default(),
                };
                (name.clone(), server)
            })
            .collect();
        Self { servers, changes, followed: AtomicBool::new(false) }
    }

    /// The MCP server configured as module `module`, if it is one.
    pub fn get(&self, module: &str) -> Option<&McpServer> {
        self.servers.get(module)
    }

    /// Discovers a module again whenever its server says its tools changed
    /// (or a call found it gone), at most once per
    /// [`rediscovery::REDISCOVERY_INTERVAL`], in a task that lasts as long
    /// as the runtime (started once).
    pub fn follow_list_changes(registry: &Arc<Registry>) {
        let servers = registry.mcp_servers();
        if !servers.followed.swap(true, Ordering::SeqCst) {
            rediscovery::spawn(Arc::clone(&servers.changes), Arc::clone(registry));
        }
    }
}

/// One MCP server configured as a module, and its session.
pub struct McpServer {
    module: String,
    settings: McpServerSettings,
    max_manifest_bytes: usize,
    max_answer_bytes: usize,
    /// `MAX_MCP_SERVER_REQUESTS`.
    max_server_requests: usize,
    /// `DISCOVERY_TIMEOUT`: the most opening a session may take.
    open_timeout: Duration,
    /// The client of servers over HTTP.
    http: reqwest_mcp::Client,
    changes: Arc<Changes>,
    session: tokio::sync::Mutex<Session>,
    /// The names of the tools of the listing whose manifest the registry
    /// took last ([`McpServer::use_names`]): a call goes to the tool listed.
    listed: std::sync::Mutex<ListedNames>,
}

/// The server's name of each tool of one `tools/list`, by its name in the
/// fleet (after `module.`).
#[derive(Debug, Default)]
pub struct ListedNames(BTreeMap<String, String>);

impl ListedNames {
    /// The server's name of the tool called `exposed` in the fleet.
    fn get(&self, exposed: &str) -> Option<String> {
        self.0.get(exposed).cloned()
    }
}

/// The open session, and when the next one may be opened.
#[derive(Default)]
struct Session {
    live: Option<Arc<Connection>>,
    /// When the live session opened.
    opened_at: Option<Instant>,
    /// Whether a session was ever open.
    opened_before: bool,
    failures: u32,
    next_attempt: Option<Instant>,
    /// Why the orchestrator ended the last session, until the next attempt.
    ended_because: Option<String>,
}

impl Session {
    /// The live session is over, found so at `now`: the wait before the
    /// next attempt starts again only if it lasted [`MAX_RECONNECT_DELAY`];
    /// otherwise the failures counted before it opened still count. (Its
    /// end is found when it is next used, so a session that died early and
    /// was found so much later counts as lasting: one more prompt reopen.)
    /// `because`: why the orchestrator ended it, if it did.
    fn end(&mut self, now: Instant, because: Option<String>) {
        self.live = None;
        self.ended_because = because;
        if self.opened_at.take().is_some_and(|at| now.saturating_duration_since(at) >= MAX_RECONNECT_DELAY) {
            self.failures = 0;
            self.next_attempt = None;
        }
    }
}

impl McpServer {
    /// The server's tools as the module's manifest (unchecked) and the
    /// server's names of them, within `timeout`; `url` is the module's URL
    /// as shown, for the errors. Calls go by the names only once the
    /// manifest is taken ([`Self::use_names`]).
    pub async fn fetch_manifest(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<(ModuleManifest, ListedNames), DiscoveryError> {
        tokio::time::timeout(timeout, self.list_tools(url))
            .await
            .unwrap_or_else(|_| Err(DiscoveryError::Timeout { url: url.to_owned(), seconds: timeout.as_secs_f64() }))
    }

    /// Sends calls, from now on, to the tools of `names`: those of the
    /// listing whose manifest the registry has just taken, so a manifest
    /// refused (or a listing whose outcome came too late) changes neither.
    pub fn use_names(&self, names: ListedNames) {
        *self.listed.lock().unwrap_or_else(PoisonError::into_inner) = names;
    }

    async fn list_tools(&self, url: &str) -> Result<(ModuleManifest, ListedNames), DiscoveryError> {
        let session =
            self.open().await.map_err(|reason| DiscoveryError::Unreachable { url: url.to_owned(), reason })?;
        let mut tools = Vec::new();
        let info = session.service.peer_info();
        // The server's instructions (when they are the module's description),
        // the tools' JSON and the cursors: the cursors are kept to find a loop.
        let instructions = info.as_deref().and_then(|info| info.instructions.as_deref());
        let mut bytes = instructions.filter(|_| self.settings.description.is_none()).map_or(0, str::len);
        let mut cursors = HashSet::new();
        let mut cursor = None;
        loop {
            let page = match session
                .service
                .list_tools(cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c))))
                .await
            {
                Ok(page) => page,
                // Refused unread, the session still usable.
                Err(error) if results::is_too_large(&error) => {
                    let reason = over_manifest_budget(self.max_manifest_bytes);
                    return Err(DiscoveryError::NotAManifest { url: url.to_owned(), reason });
                }
                Err(error) => {
                    let reason = list_failure(&self.settings, &error);
                    if !matches!(error, ServiceError::McpError(_)) {
                        self.forget(&session).await;
                        let reason = with_end_reason(&session, reason);
                        return Err(DiscoveryError::Unreachable { url: url.to_owned(), reason });
                    }
                    return Err(DiscoveryError::ListError { url: url.to_owned(), reason });
                }
            };
            let listed = serde_json::to_vec(&page.tools).map_or(usize::MAX, |page| page.len());
            bytes = bytes.saturating_add(listed).saturating_add(page.next_cursor.as_ref().map_or(0, String::len));
            if bytes > self.max_manifest_bytes {
                let reason = over_manifest_budget(self.max_manifest_bytes);
                return Err(DiscoveryError::NotAManifest { url: url.to_owned(), reason });
            }
            tools.extend(page.tools);
            match page.next_cursor {
                Some(next) if cursors.contains(&next) => {
                    let shown: String = next.chars().take(MAX_CURSOR_CHARS_SHOWN).collect();
                    let reason = format!("its tools/list pages loop: the cursor {shown:?} came a second time");
                    return Err(DiscoveryError::NotAManifest { url: url.to_owned(), reason });
                }
                Some(next) => {
                    cursors.insert(next.clone());
                    cursor = Some(next);
                }
                None => break,
            }
        }
        let names = self
            .settings
            .listed_names(tools.iter().map(|tool| tool.name.as_ref()))
            .map_err(|reason| DiscoveryError::NotAManifest { url: url.to_owned(), reason })?;
        Ok((manifest::manifest_of(&self.module, &self.settings, info.as_deref(), tools), ListedNames(names)))
    }

    /// Calls the tool of `call` (`module.tool`) with its arguments, the
    /// user's id and `trace` in `_meta`, by `deadline`.
    pub async fn call(&self, call: &ToolCall, trace: &TraceParent, deadline: Instant) -> ToolResult {
        let name = call.tool_name.as_str();
        let seconds = deadline.saturating_duration_since(Instant::now()).as_secs_f64();
        let answer = tokio::time::timeout_at(deadline, self.call_within(call, trace)).await;
        answer.unwrap_or_else(|_| {
            let message = format!("`{name}` did not finish within {seconds} s; it may still be running");
            ToolResult::failure(name, ErrorKind::Timeout, message)
        })
    }

    async fn call_within(&self, call: &ToolCall, trace: &TraceParent) -> ToolResult {
        let name = call.tool_name.as_str();
        let session = match self.open().await {
            Ok(session) => session,
            Err(reason) => {
                let message = format!("the MCP server of module `{}` cannot be reached: {reason}", self.module);
                return ToolResult::failure(name, ErrorKind::Unavailable, message);
            }
        };
        let exposed = name.split_once('.').map_or(name, |(_, tool)| tool);
        let server_name = match self.listed_name(exposed) {
            Some(server_name) => server_name,
            // Not listed by this replica yet: the manifest in use came from
            // the cache or another replica, or the tool is new. Listed now,
            // so the call still goes only to a tool the server lists; the
            // module is discovered again, as its names are taken only with
            // a manifest the registry takes.
            None => {
                let module = format!("the MCP server of module `{}`", self.module);
                let names = match self.list_tools(&module).await {
                    Ok((_, names)) => names,
                    Err(error) => {
                        let message = format!("cannot tell which tool `{exposed}` is: {error}");
                        return ToolResult::failure(name, ErrorKind::Unavailable, message);
                    }
                };
                self.changes.mark(&self.module);
                match names.get(exposed) {
                    Some(server_name) => server_name,
                    None => {
                        let message = format!("{module} does not list `{exposed}`");
                        return ToolResult::failure(name, ErrorKind::UnknownTool, message);
                    }
                }
            }
        };
        let mut params = CallToolRequestParams::new(server_name).with_arguments(call.arguments.clone());
        // The trace context goes where MCP puts it (SEP-414), as an HTTP module's goes in its headers.
        let meta = params.meta_or_default();
        meta.set_traceparent(trace.header());
        if let Some(user) = &call.user_id {
            meta.insert(USER_ID_META_KEY.to_owned(), Value::from(user.as_str()));
        }
        match session.service.call_tool(params).await {
            Ok(answer) => results::tool_result(name, answer, self.max_answer_bytes),
            Err(error) => {
                if !results::keeps_session(&error) {
                    self.forget(&session).await;
                }
                let mut result = results::failure(&self.module, name, &error, self.max_answer_bytes);
                result.error = result.error.map(|message| with_end_reason(&session, self.settings.redact(&message)));
                result
            }
        }
    }

    /// The server's name of the tool `exposed` (its name in the fleet), as
    /// the listing of the manifest this replica took last listed it.
    fn listed_name(&self, exposed: &str) -> Option<String> {
        self.listed.lock().unwrap_or_else(PoisonError::into_inner).get(exposed)
    }

    /// The open session, or a new one when none is open and the last
    /// attempt is far enough back.
    async fn open(&self) -> Result<Arc<Connection>, String> {
        let mut session = self.session.lock().await;
        if let Some(live) = &session.live {
            if !live.is_closed() {
                return Ok(Arc::clone(live));
            }
            let because = live.end_reason();
            tracing::warn!(module = %self.module, reason = because.as_deref(), "the MCP session ended");
            session.end(Instant::now(), because);
            // Discovered again, so `GET /modules` shows whether it is back.
            self.changes.mark(&self.module);
        }
        let now = Instant::now();
        if let Some(at) = session.next_attempt.filter(|at| *at > now) {
            let wait = (at - now).as_secs_f64();
            let last = match &session.ended_because {
                Some(reason) => format!("the last session ended: {reason}"),
                None => "the last attempt to connect failed, or its session ended soon after".to_owned(),
            };
            return Err(format!("{last}; the next is allowed in {wait:.1} s"));
        }
        // Counted before connecting, so an attempt cut short by a timeout counts too.
        let delay = FIRST_RECONNECT_DELAY.saturating_mul(1 << session.failures.min(6)).min(MAX_RECONNECT_DELAY);
        session.failures = session.failures.saturating_add(1);
        session.next_attempt = Some(now + delay);
        session.ended_because = None;
        let limit = self.max_manifest_bytes.max(self.max_answer_bytes);
        // Bounded: every call of the module waits for this behind the lock.
        let (module, transport) = (&self.module, &self.settings.transport);
        let opening = connect(module, transport, limit, self.max_server_requests, &self.http, &self.changes);
        let connection = match tokio::time::timeout(self.open_timeout, opening).await {
            Ok(opened) => opened.map_err(|reason| self.settings.redact(&reason))?,
            Err(_) => {
                let seconds = self.open_timeout.as_secs_f64();
                return Err(format!(
                    "the session did not open (start and handshake) within {seconds} s (DISCOVERY_TIMEOUT)"
                ));
            }
        };
        // rmcp would keep every `tools/list` page with a `ttlMs` (up to 512 of
        // them, for a day, before `MAX_MANIFEST_BYTES` counts them) and answer
        // a failed tools/list with the stale page: each discovery asks the server.
        connection.service.peer().set_response_cache_config(ClientCacheConfig::disabled()).await;
        tracing::info!(module = %self.module, "MCP session opened");
        let connection = Arc::new(connection);
        // The count of failures and the next attempt's time stay until the session has lasted (`Session::end`).
        session.live = Some(Arc::clone(&connection));
        session.opened_at = Some(Instant::now());
        if std::mem::replace(&mut session.opened_before, true) || session.failures > 1 {
            // Back after a break or failed attempts: discovered again, so `GET /modules` shows it up.
            self.changes.mark(&self.module);
        }
        Ok(connection)
    }

    /// Drops `broken` (if it is still the open session) and asks for the
    /// module to be discovered again, so `GET /modules` shows what happened.
    async fn forget(&self, broken: &Arc<Connection>) {
        let mut session = self.session.lock().await;
        if session.live.as_ref().is_some_and(|live| Arc::ptr_eq(live, broken)) {
            session.end(Instant::now(), broken.end_reason());
            self.changes.mark(&self.module);
        }
    }
}

/// Why discovery failed when the tools listed took more than `max_manifest_bytes`.
fn over_manifest_budget(max_manifest_bytes: usize) -> String {
    format!("its tools/list is over MAX_MANIFEST_BYTES ({max_manifest_bytes})")
}

/// Why discovery failed when `tools/list` of the server configured as
/// `settings` failed with `error`: redacted, shortened.
fn list_failure(settings: &McpServerSettings, error: &ServiceError) -> String {
    results::shortened(&settings.redact(&format!("tools/list failed: {}", module_sdk::error_chain(error))))
}

/// `message`, with why the orchestrator ended `connection`'s session, if it did.
fn with_end_reason(connection: &Connection, message: String) -> String {
    match connection.end_reason() {
        Some(reason) => format!("{message} ({reason})"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_tools_list_error_is_shortened() {
        let (_, servers) =
            settings::read_modules(BTreeMap::from([("gh".to_owned(), Value::from("mcp+http://127.0.0.1:1/mcp"))]))
                .unwrap();
        let error = ServiceError::McpError(rmcp::model::ErrorData::internal_error("e".repeat(10_000), None));
        let reason = list_failure(&servers["gh"], &error);
        assert!(reason.starts_with("tools/list failed"), "{reason}");
        assert_eq!(reason.chars().count(), results::MAX_ERROR_CHARS);
    }

    #[test]
    fn a_session_that_ends_soon_keeps_the_backoff_and_a_lasting_one_resets_it() {
        let opened_at = Instant::now();
        let next_attempt = Some(opened_at + Duration::from_secs(4));
        let opened = || Session { opened_at: Some(opened_at), failures: 3, next_attempt, ..Session::default() };
        let mut short = opened();
        short.end(opened_at + Duration::from_secs(1), None);
        assert_eq!((short.failures, short.next_attempt), (3, next_attempt));
        let mut lasting = opened();
        lasting.end(opened_at + MAX_RECONNECT_DELAY, None);
        assert_eq!((lasting.failures, lasting.next_attempt, lasting.opened_at), (0, None, None));
    }
}
