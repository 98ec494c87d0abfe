//! JWT bearer tokens verified against a JWKS (a file, or a URL fetched at
//! start-up and every `JWT_JWKS_REFRESH_SECONDS`), with the issuer,
//! audience, expiry and an algorithm allow-list checked by `jsonwebtoken`.
//!
//! A JWKS URL is also fetched again for a token naming a `kid` it lacks (a
//! key rotated in since the last fetch), one fetch at a time and at most one
//! every `JWT_UNKNOWN_KID_REFETCH_SECONDS`, so made-up `kid`s cannot make
//! the orchestrator hammer the issuer. Keys no fetch has confirmed for
//! `JWT_JWKS_MAX_STALE_SECONDS` (the URL failing since) verify no token: a
//! key the issuer revoked meanwhile would otherwise be trusted for ever.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use module_sdk::service::BodyError;
use serde_json::Value;

use crate::bounded_body::read_bounded;

/// Where the signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A JWKS file, read at start-up.
    File(PathBuf),
    /// An `https://` URL (`http://` only on a loopback host), fetched at
    /// start-up and on every refresh.
    Url(String),
}

/// The client fetching a JWKS URL: the orchestrator's trusted roots, no
/// proxy, and no redirects (a redirect fails the fetch: following one could
/// hand the signing keys to whoever answers it, over plain http even).
pub fn jwks_client(tls: rustls::ClientConfig) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .http1_only()
        .build()
}

/// The JWT settings (`JWT_*`).
#[derive(Debug, Clone, PartialEq)]
pub struct JwtSettings {
    /// `JWT_JWKS`: a path or an http(s) URL.
    pub jwks: JwksSource,
    /// `JWT_ISSUER`: the required `iss`, when set.
    pub issuer: Option<String>,
    /// `JWT_AUDIENCE`: the required `aud` (always set: without it any token
    /// the issuer signed for any other application would be accepted).
    pub audience: String,
    /// `JWT_ALGORITHMS`: the accepted `alg` values (never `none`).
    pub algorithms: Vec<Algorithm>,
    /// `JWT_USER_CLAIM`: the claim naming the user (default `sub`).
    pub user_claim: String,
    /// `JWT_PERMISSION_CLAIM`: the claim with the permission (default `permission`; absent is guest).
    pub permission_claim: String,
    /// `JWT_MODULES_CLAIM`: the claim with the allowed modules (an array or a
    /// space- or comma-separated string; absent allows all).
    pub modules_claim: String,
    /// `JWT_JWKS_REFRESH_SECONDS`: how often a JWKS URL is fetched again.
    pub refresh: Duration,
    /// `JWT_UNKNOWN_KID_REFETCH_SECONDS`: the least time between two fetches
    /// of a JWKS URL made for tokens naming a `kid` it lacks.
    pub unknown_kid_refetch: Duration,
    /// `JWT_JWKS_MAX_STALE_SECONDS`: how long after its last successful fetch
    /// a JWKS URL's keys still verify tokens.
    pub max_stale: Duration,
    /// `JWT_JWKS_MAX_BYTES`: the most bytes of a JWKS URL's answer read; a
    /// larger one fails the fetch as an unreachable URL does.
    pub max_bytes: usize,
}

/// Why keys could not be loaded or a token was refused.
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    /// The JWKS could not be read or fetched.
    #[error("cannot load the JWKS from {source_name}: {reason}")]
    Jwks {
        /// The file or URL.
        source_name: String,
        /// What went wrong.
        reason: String,
    },
    /// The token is not valid (signature, issuer, audience, expiry, algorithm).
    #[error("the JWT is not valid: {0}")]
    Invalid(String),
    /// No fetch of the JWKS URL has succeeded for longer than `JWT_JWKS_MAX_STALE_SECONDS`.
    #[error(
        "no JWT is accepted now: the JWKS was last fetched from {url} {age_seconds} s ago, longer than \
         JWT_JWKS_MAX_STALE_SECONDS ({max_seconds} s) allows (a key revoked since would still be trusted); \
         every fetch since failed (see the orchestrator's log), and JWTs are accepted again once one succeeds"
    )]
    Stale {
        /// The JWKS URL.
        url: String,
        /// Whole seconds since its last successful fetch.
        age_seconds: u64,
        /// `JWT_JWKS_MAX_STALE_SECONDS`.
        max_seconds: f64,
    },
}

/// The identity a valid token carries.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtClaims {
    /// The user claim.
    pub user_id: String,
    /// The permission claim, if any.
    pub permission: Option<String>,
    /// The modules claim, if any.
    pub modules: Option<Vec<String>>,
}

/// A key set and when it was read or fetched.
struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// Verifies tokens against the current key set.
pub struct JwtVerifier {
    settings: JwtSettings,
    keys: RwLock<Arc<Keys>>,
    /// The client and the timeout (`DISCOVERY_TIMEOUT`) of every fetch.
    client: reqwest::Client,
    timeout: Duration,
    /// When the last fetch for an unknown `kid` started; held while one runs,
    /// so the tokens that wait for it look their `kid` up in its keys.
    unknown_kid_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl JwtVerifier {
    /// A verifier with no keys yet (every token is refused until
    /// [`Self::load`]), fetching a JWKS URL with `client`, each fetch
    /// within `timeout`.
    pub fn new(settings: JwtSettings, client: reqwest::Client, timeout: Duration) -> Self {
        Self {
            settings,
            keys: RwLock::new(Arc::new(Keys { set: JwkSet { keys: Vec::new() }, fetched: Instant::now() })),
            client,
            timeout,
            unknown_kid_fetch: tokio::sync::Mutex::new(None),
        }
    }

    /// The settings it verifies with.
    pub fn settings(&self) -> &JwtSettings {
        &self.settings
    }

    /// Reads or fetches the JWKS and makes it current; a fetch gives up after
    /// the timeout (`DISCOVERY_TIMEOUT`), so a JWKS URL that never answers can
    /// hold neither start-up nor the refreshes after it, and reads at most
    /// `JWT_JWKS_MAX_BYTES`, so one that answers without end cannot fill memory.
    pub async fn load(&self) -> Result<(), JwtError> {
        let timeout = self.timeout;
        let (name, json) = match &self.settings.jwks {
            JwksSource::File(path) => {
                let name = path.display().to_string();
                let json = tokio::fs::read(path)
                    .await
                    .map_err(|e| JwtError::Jwks { source_name: name.clone(), reason: e.to_string() })?;
                (name, Bytes::from(json))
            }
            JwksSource::Url(url) => {
                let fail = |e: reqwest::Error| JwtError::Jwks {
                    source_name: url.clone(),
                    reason: match e.is_timeout() {
                        true => format!("no answer within DISCOVERY_TIMEOUT ({} s)", timeout.as_secs_f64()),
                        false => e.to_string(),
                    },
                };
                let request = self.client.get(url).timeout(timeout);
                let response = request.send().await.and_then(|r| r.error_for_status()).map_err(fail)?;
                if response.status().is_redirection() {
                    let to = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
                    return Err(JwtError::Jwks {
                        source_name: url.clone(),
                        reason: format!(
                            "it redirects (status {}, to {}); a JWKS URL's redirects are not followed: \
                             set JWT_JWKS to the final https:// URL",
                            response.status().as_u16(),
                            to.unwrap_or("nowhere given")
                        ),
                    });
                }
                let max_bytes = self.settings.max_bytes;
                let body = read_bounded(response, max_bytes, "JWT_JWKS_MAX_BYTES").await.map_err(|e| match e {
                    BodyError::TooLarge { max, .. } => JwtError::Jwks {
                        source_name: url.clone(),
                        reason: format!(
                            "the JWKS is larger than {max} bytes, the limit JWT_JWKS_MAX_BYTES sets \
                             (raise it for an issuer with that many keys)"
                        ),
                    },
                    BodyError::Transport(e) => fail(e),
                })?;
                (url.clone(), body)
            }
        };
        let set: JwkSet = serde_json::from_slice(&json)
            .map_err(|e| JwtError::Jwks { source_name: name, reason: format!("not a JWKS: {e}") })?;
        *self.keys.write().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Arc::new(Keys { set, fetched: Instant::now() });
        Ok(())
    }

    /// Fetches a JWKS URL again every refresh interval (a file is read
    /// once); a failed fetch keeps the previous keys, and says so in the log,
    /// as an error once they are past `JWT_JWKS_MAX_STALE_SECONDS`.
    pub fn spawn_refresh(self: &Arc<Self>) {
        if !matches!(self.settings.jwks, JwksSource::Url(_)) {
            return;
        }
        let verifier = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(verifier.settings.refresh).await;
                if let Err(error) = verifier.load().await {
                    match verifier.fresh(&verifier.current()) {
                        Ok(()) => tracing::warn!(%error, "keeping the previous JWKS"),
                        Err(stale) => tracing::error!(%error, "{stale}"),
                    }
                }
            }
        });
    }

    /// The current key set.
    fn current(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// `Err` when `keys` come from a JWKS URL no fetch has confirmed for
    /// longer than `JWT_JWKS_MAX_STALE_SECONDS` (a file's keys never are).
    fn fresh(&self, keys: &Keys) -> Result<(), JwtError> {
        let age = keys.fetched.elapsed();
        match &self.settings.jwks {
            JwksSource::Url(url) if age > self.settings.max_stale => Err(JwtError::Stale {
                url: url.clone(),
                age_seconds: age.as_secs(),
                max_seconds: self.settings.max_stale.as_secs_f64(),
            }),
            _ => Ok(()),
        }
    }

    /// The key set to look `kid` up in: the current one, or, when it lacks
    /// `kid` and the JWKS is a URL, the one a fetch made now gives (see the
    /// module's documentation). A token arriving while such a fetch runs
    /// waits for it; one arriving within `JWT_UNKNOWN_KID_REFETCH_SECONDS`
    /// of its start fetches nothing.
    async fn keys_with(&self, kid: &str) -> Arc<Keys> {
        let keys = self.current();
        if keys.set.find(kid).is_some() || !matches!(self.settings.jwks, JwksSource::Url(_)) {
            return keys;
        }
        let mut last = self.unknown_kid_fetch.lock().await;
        if last.is_none_or(|started| started.elapsed() >= self.settings.unknown_kid_refetch) {
            *last = Some(Instant::now());
            tracing::info!("fetching the JWKS again: a token names a `kid` it lacks");
            if let Err(error) = self.load().await {
                tracing::warn!(%error, "keeping the previous JWKS");
            }
        }
        self.current()
    }

    /// The claims of `token`, once its signature, algorithm, expiry, issuer
    /// and audience are checked.
    pub async fn verify(&self, token: &str) -> Result<JwtClaims, JwtError> {
        let invalid = |e: jsonwebtoken::errors::Error| JwtError::Invalid(e.to_string());
        // `alg: none` and unknown algorithms fail here: they are not `Algorithm`s.
        let header = jsonwebtoken::decode_header(token).map_err(invalid)?;
        if !self.settings.algorithms.contains(&header.alg) {
            return Err(JwtError::Invalid(format!("algorithm {:?} is not in JWT_ALGORITHMS", header.alg)));
        }
        let keys = match &header.kid {
            Some(kid) => self.keys_with(kid).await,
            None => self.current(),
        };
        self.fresh(&keys)?;
        let jwk = match &header.kid {
            Some(kid) => keys.set.find(kid),
            None if keys.set.keys.len() == 1 => keys.set.keys.first(),
            None => None,
        }
        .ok_or_else(|| JwtError::Invalid("no key of the JWKS matches the token's `kid`".into()))?;
        if jwk.common.key_algorithm.is_some_and(|alg| alg.to_string() != format!("{:?}", header.alg)) {
            return Err(JwtError::Invalid("the token's algorithm is not its key's".into()));
        }
        let key = DecodingKey::from_jwk(jwk).map_err(invalid)?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.validate_nbf = true;
        let mut required = vec!["exp"];
        if let Some(issuer) = &self.settings.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_audience(&[&self.settings.audience]);
        required.push("aud");
        validation.set_required_spec_claims(&required);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &validation).map_err(invalid)?.claims;
        self.claims(&claims)
    }

    fn claims(&self, claims: &Value) -> Result<JwtClaims, JwtError> {
        let user_id = claims
            .get(&self.settings.user_claim)
            .and_then(Value::as_str)
            .filter(|user| !user.is_empty())
            .ok_or_else(|| {
                JwtError::Invalid(format!("the `{}` claim (the user) is missing", self.settings.user_claim))
            })?
            .to_owned();
        let permission = claims.get(&self.settings.permission_claim).and_then(Value::as_str).map(str::to_owned);
        let modules = match claims.get(&self.settings.modules_claim) {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(items.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
            Some(Value::String(text)) => {
                Some(text.split([' ', ',']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
            }
            Some(_) => {
                return Err(JwtError::Invalid(format!(
                    "the `{}` claim must be an array or a string of module names",
                    self.settings.modules_claim
                )));
            }
        };
        Ok(JwtClaims { user_id, permission, modules })
    }
}
