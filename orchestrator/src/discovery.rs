//! Fetching one module's manifest, and the background loop that keeps each
//! module's manifest fresh: retried with backoff while a module is missing,
//! refreshed periodically once found.

use std::sync::Arc;
use std::time::Duration;

use module_sdk::contract::ModuleManifest;
use module_sdk::error_chain;
use module_sdk::service::BodyError;
use reqwest::StatusCode;

use crate::bounded_body::read_bounded;
use crate::manifest::ManifestError;
use crate::registry::Registry;

/// The first wait before discovering a missing module again.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two attempts at a missing module.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// Why a module's manifest could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The name is not a key of `MODULE_SERVICES`.
    #[error("no module `{0}` is configured in MODULE_SERVICES")]
    NotConfigured(String),
    /// Nothing answered at the module's URL.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The manifest URL.
        url: String,
        /// The connection error.
        reason: String,
    },
    /// The module did not answer within the discovery timeout.
    #[error("{url} did not answer within {seconds} s (DISCOVERY_TIMEOUT)")]
    Timeout {
        /// The manifest URL.
        url: String,
        /// The timeout that ran out.
        seconds: f64,
    },
    /// The module answered with an error status.
    #[error("{url} answered {status}{hint}")]
    Status {
        /// The manifest URL.
        url: String,
        /// The HTTP status.
        status: StatusCode,
        /// What to check, for the statuses that have an obvious cause.
        hint: &'static str,
    },
    /// An MCP server answered `tools/list` with a JSON-RPC error: the MCP
    /// form of an error status, so its previous manifest is kept.
    #[error("{url}: {reason}")]
    ListError {
        /// The server's URL or command.
        url: String,
        /// The error it answered, redacted and shortened.
        reason: String,
    },
    /// The body is not a ModuleManifest.
    #[error("{url} did not send a ModuleManifest: {reason}")]
    NotAManifest {
        /// The manifest URL.
        url: String,
        /// The parser's message.
        reason: String,
    },
    /// The manifest breaks the contract.
    #[error("manifest rejected: {0}")]
    Rejected(#[from] ManifestError),
}

impl DiscoveryError {
    /// Whether the module answered and what it sent was refused (not a
    /// manifest, or one breaking the contract or a budget): its tools then
    /// go away rather than keep the previous manifest's permissions and
    /// schemas while calls reach the new code.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::NotAManifest { .. } | Self::Rejected(_))
    }
}

/// `GET {base_url}/manifest` with the service token, within `timeout`,
/// reading at most `max_bytes` (`MAX_MANIFEST_BYTES`) of it.
pub async fn fetch_manifest(
    client: &reqwest::Client,
    base_url: &str,
    service_token: Option<&str>,
    timeout: Duration,
    max_bytes: usize,
) -> Result<ModuleManifest, DiscoveryError> {
    let url = format!("{base_url}/manifest");
    let transport = |error: reqwest::Error| {
        if error.is_timeout() {
            DiscoveryError::Timeout { url: url.clone(), seconds: timeout.as_secs_f64() }
        } else {
            DiscoveryError::Unreachable { url: url.clone(), reason: error_chain(&error) }
        }
    };
    let mut request = client.get(&url).timeout(timeout);
    if let Some(token) = service_token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    if !status.is_success() {
        let hint = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                ": the module refused the orchestrator's SERVICE_AUTH_TOKEN; give both the same token"
            }
            StatusCode::NOT_FOUND => ": is the URL in MODULE_SERVICES the module's base URL?",
            _ if status.is_redirection() => {
                ": discovery follows no redirect; give MODULE_SERVICES the module's own base URL"
            }
            _ => "",
        };
        return Err(DiscoveryError::Status { url, status, hint });
    }
    let body = match read_bounded(response, max_bytes, "MAX_MANIFEST_BYTES").await {
        Ok(body) => body,
        Err(BodyError::Transport(error)) => return Err(transport(error)),
        Err(too_large) => return Err(DiscoveryError::NotAManifest { url, reason: too_large.to_string() }),
    };
    serde_json::from_slice(&body).map_err(|e| DiscoveryError::NotAManifest { url, reason: e.to_string() })
}

/// Keeps `module` discovered for as long as the process runs: at once,
/// then every `refresh` while it answers, or after a doubling wait from
/// [`FIRST_RETRY`] up to [`MAX_RETRY`] while it does not. Once reached,
/// the periodic refreshes are shared with the replicas on the same cache
/// ([`Registry::refresh_shared`], a claim per module lasting `refresh`);
/// the first discovery and the retries of a missing module are its own.
pub async fn keep_discovered(registry: Arc<Registry>, module: String, refresh: Duration) {
    let mut retry = FIRST_RETRY;
    let mut reached = false;
    loop {
        let outcome =
            if reached { registry.refresh_shared(&module, refresh).await } else { registry.discover(&module).await };
        reached = outcome.is_ok();
        let wait = match outcome {
            Ok(()) => {
                retry = FIRST_RETRY;
                refresh
            }
            Err(_) => {
                let wait = retry;
                retry = (retry * 2).min(MAX_RETRY);
                wait.min(refresh)
            }
        };
        tokio::time::sleep(wait).await;
    }
}
