//! Who is calling: the identity a request's bearer token proves (the
//! service token, an API key, a JWT), and the caller it may act as.
//!
//! With no token, key or JWT configured the orchestrator is in development
//! mode: every request is trusted, as before identities existed.

pub mod jwt;
pub mod keys;
pub mod revocations;
pub mod routes;
pub mod settings;

use std::collections::BTreeSet;
use std::sync::Arc;

use module_sdk::Permission;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

use axum::http::StatusCode;

use crate::caller::{Caller, CallerFields, ModulesError};
use jwt::JwtVerifier;
use keys::{ApiKey, KeyUser};
use revocations::{RevocationError, Revocations};
pub use settings::IdentitySettings;

/// How an identity was proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum IdentityKind {
    /// Nothing is configured: every request is trusted.
    Development,
    /// `ORCHESTRATOR_API_TOKEN`: a trusted agent backend.
    ServiceToken,
    /// An `[[api_keys]]` entry.
    ApiKey,
    /// A JWT verified against the JWKS.
    Jwt,
}

/// A proven identity: who it is, whom it may act for, and its ceiling.
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// For logs and approvals: `development`, `service-token`, `key:<id>` or `jwt:<user>`.
    pub name: String,
    /// How it was proven.
    pub kind: IdentityKind,
    /// The user it acts for, or any user the request names (a service).
    pub user: KeyUser,
    /// The highest permission it may use.
    pub permission: Permission,
    /// The modules it may use; `None` allows all.
    pub modules: Option<Vec<String>>,
}

/// All an identity carries that decides what it may see and call: its
/// name, kind, user, permission and modules (as a set: their order and
/// repeats decide nothing). Two JWTs of one user share the name
/// `jwt:<user>` but, with different claims, not the grant; what is bound
/// to whoever made it (an MCP session, an MCP task) is bound to this, not
/// to the name. Serialized as tasks shared through Redis keep it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    name: String,
    kind: IdentityKind,
    user: KeyUser,
    permission: Permission,
    modules: Option<BTreeSet<String>>,
}

impl Grant {
    /// The name of the identity it is the grant of.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Why a request may not act as it asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// A user identity named another user.
    #[error("this identity acts for user `{own}` only; it cannot act as `{asked}`")]
    OtherUser {
        /// The identity's user.
        own: String,
        /// The user the request named.
        asked: String,
    },
    /// The request's `modules` list is over a budget.
    #[error(transparent)]
    Modules(#[from] ModulesError),
}

impl AccessError {
    /// The HTTP status it is answered with: `400` for a list over a
    /// budget, `403` for what the identity may not do.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::OtherUser { .. } => StatusCode::FORBIDDEN,
            Self::Modules(_) => StatusCode::BAD_REQUEST,
        }
    }
}

impl Identity {
    /// The identity of development mode: trusted, any user, every permission.
    pub fn development() -> Self {
        Self::trusted("development", IdentityKind::Development)
    }

    fn trusted(name: &str, kind: IdentityKind) -> Self {
        Self { name: name.to_owned(), kind, user: KeyUser::Any, permission: Permission::Owner, modules: None }
    }

    /// Whether it may name any user and send `"approved": true`: development
    /// mode, the service token, and keys with `user_id = "any"`.
    pub fn is_service(&self) -> bool {
        self.user == KeyUser::Any
    }

    /// Whether it sees and decides every user's approvals.
    pub fn is_admin(&self) -> bool {
        self.permission >= Permission::Admin
    }

    /// Whether it may see the modules' addresses and errors and make the
    /// orchestrator discover them now: admins, owners and services.
    pub fn is_operator(&self) -> bool {
        self.is_admin() || self.is_service()
    }

    /// Whether it gets its own share of a budget kept per identity (MCP
    /// sessions and event streams): every identity but development mode's,
    /// which is every caller, so a share would only shrink the total.
    pub fn has_own_share(&self) -> bool {
        self.kind != IdentityKind::Development
    }

    /// An API key's identity, `key:{user}`, for `user` with permission
    /// `user` and every module (for unit tests).
    #[cfg(test)]
    pub(crate) fn user_key(user: &str) -> Self {
        let kind = IdentityKind::ApiKey;
        Self {
            name: format!("key:{user}"),
            kind,
            user: KeyUser::Named(user.to_owned()),
            permission: Permission::User,
            modules: None,
        }
    }

    /// The one user it acts for, if it is not a service.
    pub fn own_user(&self) -> Option<&str> {
        match &self.user {
            KeyUser::Named(user) => Some(user),
            KeyUser::Any => None,
        }
    }

    /// Whether it may see and decide things done for `user`: its own user's,
    /// or anyone's for admins, owners and services (a service, whatever its
    /// permission, may send `"approved": true` for any user's call anyway).
    /// Deciding is further refused, with `APPROVAL_SEPARATE_DECIDER`, for
    /// the approvals of the calls it asked for itself.
    pub fn may_act_for(&self, user: Option<&str>) -> bool {
        self.is_operator() || (user.is_some() && user == self.own_user())
    }

    /// What it may see and call (see [`Grant`]).
    pub fn grant(&self) -> Grant {
        // Every field, so one added to the identity must be weighed here.
        let Self { name, kind, user, permission, modules } = self;
        Grant {
            name: name.clone(),
            kind: *kind,
            user: user.clone(),
            permission: *permission,
            modules: modules.as_ref().map(|modules| modules.iter().cloned().collect()),
        }
    }

    /// The widest caller it may be: its highest permission and its modules.
    pub fn ceiling(&self) -> Caller {
        Caller { user_id: None, permission: self.permission, modules: self.modules.clone() }
    }

    /// The caller a request's fields describe, within this identity: the
    /// permission is the lower of the asked and the allowed one (absent
    /// asks for the identity's own, except for the trusted service token and
    /// development mode, where absent is `guest` as before), the modules
    /// those both allow, the user its own.
    pub fn caller(&self, fields: CallerFields) -> Result<Caller, AccessError> {
        let requested = fields.into_caller_with_default(match self.kind {
            IdentityKind::Development | IdentityKind::ServiceToken => Permission::Guest,
            IdentityKind::ApiKey | IdentityKind::Jwt => self.permission,
        })?;
        let user_id = match (&self.user, requested.user_id) {
            (KeyUser::Any, asked) => asked,
            (KeyUser::Named(own), Some(asked)) if &asked != own => {
                return Err(AccessError::OtherUser { own: own.clone(), asked });
            }
            (KeyUser::Named(own), _) => Some(own.clone()),
        };
        let modules = match (requested.modules, &self.modules) {
            (asked, None) => asked,
            (None, Some(allowed)) => Some(allowed.clone()),
            (Some(asked), Some(allowed)) => Some(asked.into_iter().filter(|m| allowed.contains(m)).collect()),
        };
        Ok(Caller { user_id, permission: requested.permission.min(self.permission), modules })
    }
}

/// Why a request's bearer token proves no identity (each a `401`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token.
    #[error(
        "missing `Authorization: Bearer <token>` header: this orchestrator requires an API key, a JWT or its ORCHESTRATOR_API_TOKEN"
    )]
    Missing,
    /// The token is no configured key, token or valid JWT, or a revoked key.
    #[error("the bearer token is not a valid API key, JWT or ORCHESTRATOR_API_TOKEN of this orchestrator")]
    Unknown,
    /// The key's `expires` has passed.
    #[error("the API key has expired; ask for a new one")]
    Expired,
    /// A JWT that failed verification.
    #[error("{0}")]
    BadJwt(String),
}

/// Every way this orchestrator proves identities.
pub struct Identities {
    /// The SHA-256 of `ORCHESTRATOR_API_TOKEN`: a presented token's digest is
    /// compared with it, one length against the same, so how long the
    /// comparison takes tells nothing of the token's length.
    api_token: Option<[u8; 32]>,
    keys: Vec<ApiKey>,
    revocations: Arc<Revocations>,
    jwt: Option<Arc<JwtVerifier>>,
}

impl Identities {
    /// From the settings: the service token, the keys, the JWT settings (a
    /// JWKS URL fetched by `jwks`: its client and `DISCOVERY_TIMEOUT`), and
    /// the revoked keys kept in the Redis at `redis_url` (none without it).
    pub fn new(
        api_token: Option<String>,
        settings: &IdentitySettings,
        redis_url: Option<&str>,
        jwks: (reqwest::Client, std::time::Duration),
    ) -> Result<Self, RevocationError> {
        let (client, timeout) = jwks;
        Ok(Self {
            api_token: api_token.as_deref().map(keys::digest),
            keys: settings.api_keys.clone(),
            revocations: Arc::new(Revocations::new(redis_url, settings.revocation_refresh)?),
            jwt: settings.jwt.clone().map(|jwt| Arc::new(JwtVerifier::new(jwt, client, timeout))),
        })
    }

    /// Whether requests must prove an identity (anything is configured).
    pub fn required(&self) -> bool {
        self.api_token.is_some() || !self.keys.is_empty() || self.jwt.is_some()
    }

    /// The configured API key (`[[api_keys]]` or `API_KEYS_FILE`) named `id`.
    pub fn key(&self, id: &str) -> Option<&ApiKey> {
        self.keys.iter().find(|key| key.id == id)
    }

    /// Revokes (`revoked`) or restores the API key `id` on every orchestrator
    /// sharing this one's Redis; `false` when it already was so.
    pub async fn set_revoked(&self, id: &str, revoked: bool) -> Result<bool, RevocationError> {
        self.revocations.set(id, revoked).await
    }

    /// A one-word summary for the start-up log.
    pub fn mode(&self) -> &'static str {
        if self.required() { "identities" } else { "development (every request trusted)" }
    }

    /// Loads the JWKS (when JWTs are configured) and keeps a JWKS URL fresh;
    /// reads the revoked keys (with Redis) and keeps them fresh.
    pub async fn start(&self) -> Result<(), jwt::JwtError> {
        self.revocations.start().await;
        if let Some(verifier) = &self.jwt {
            verifier.load().await?;
            verifier.spawn_refresh();
        }
        Ok(())
    }

    /// The identity `token` proves (`None`: no bearer token was sent).
    /// Every key is compared whatever the token looks like, so unknown,
    /// expired and malformed keys take the same path; a revoked key is
    /// refused as an unknown one. A JWT naming a `kid` the JWKS lacks may
    /// wait for the JWKS URL to be fetched again.
    pub async fn authenticate(&self, token: Option<&str>) -> Result<Identity, AuthError> {
        if !self.required() {
            return Ok(Identity::development());
        }
        let token = token.ok_or(AuthError::Missing)?;
        let presented = keys::digest(token);
        let service = self.api_token.is_some_and(|expected| bool::from(expected.ct_eq(&presented)));
        let key = keys::find(&self.keys, token);
        if service {
            return Ok(Identity::trusted("service-token", IdentityKind::ServiceToken));
        }
        if let Some(key) = key {
            if self.revocations.is_revoked(&key.id) {
                return Err(AuthError::Unknown);
            }
            if key.expires.is_some_and(|expires| expires <= OffsetDateTime::now_utc()) {
                return Err(AuthError::Expired);
            }
            return Ok(Identity {
                name: format!("key:{}", key.id),
                kind: IdentityKind::ApiKey,
                user: key.user.clone(),
                permission: key.permission,
                modules: key.modules.clone(),
            });
        }
        match &self.jwt {
            Some(verifier) if token.split('.').count() == 3 => {
                let claims = verifier.verify(token).await.map_err(|e| AuthError::BadJwt(e.to_string()))?;
                Ok(Identity {
                    name: format!("jwt:{}", claims.user_id),
                    kind: IdentityKind::Jwt,
                    user: KeyUser::Named(claims.user_id),
                    permission: claims.permission.as_deref().map_or(Permission::Guest, Permission::for_caller),
                    modules: claims.modules,
                })
            }
            _ => Err(AuthError::Unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_key(permission: Permission, modules: Option<Vec<String>>) -> Identity {
        Identity {
            name: "key:k".into(),
            kind: IdentityKind::ApiKey,
            user: KeyUser::Named("ada".into()),
            permission,
            modules,
        }
    }

    /// A JWKS client no test here uses.
    fn jwks() -> (reqwest::Client, std::time::Duration) {
        (reqwest::Client::new(), std::time::Duration::from_secs(1))
    }

    fn fields(user: Option<&str>, permission: Option<&str>, modules: Option<&[&str]>) -> CallerFields {
        CallerFields {
            user_id: user.map(str::to_owned),
            user_permission: permission.map(str::to_owned),
            modules: modules.map(|m| m.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn a_key_caps_the_permission_and_modules_and_keeps_its_user() {
        let key = user_key(Permission::User, Some(vec!["a".into(), "b".into()]));
        let caller = key.caller(fields(None, Some("owner"), Some(&["b", "c"]))).unwrap();
        assert_eq!(caller.permission, Permission::User);
        assert_eq!(caller.modules, Some(vec!["b".into()]));
        assert_eq!(caller.user_id.as_deref(), Some("ada"));
        let default = key.caller(CallerFields::default()).unwrap();
        assert_eq!((default.permission, default.modules), (Permission::User, Some(vec!["a".into(), "b".into()])));
        assert!(matches!(key.caller(fields(Some("bob"), None, None)), Err(AccessError::OtherUser { .. })));
        assert!(key.caller(fields(Some("ada"), Some("guest"), None)).is_ok());
    }

    #[test]
    fn the_service_token_names_users_and_defaults_to_guest() {
        let service = Identity::trusted("service-token", IdentityKind::ServiceToken);
        let caller = service.caller(fields(Some("bob"), None, None)).unwrap();
        assert_eq!((caller.user_id.as_deref(), caller.permission), (Some("bob"), Permission::Guest));
        assert!(service.is_service() && service.may_act_for(Some("anyone")));
        let key = user_key(Permission::User, None);
        assert!(key.may_act_for(Some("ada")) && !key.may_act_for(Some("bob")) && !key.may_act_for(None));
        let guest_service = Identity { user: KeyUser::Any, ..user_key(Permission::Guest, None) };
        assert!(guest_service.is_operator() && guest_service.may_act_for(Some("bob")));
    }

    #[test]
    fn a_grant_is_all_that_decides_what_an_identity_may_do() {
        let jwt = |permission, modules: &[&str]| Identity {
            name: "jwt:ada".into(),
            kind: IdentityKind::Jwt,
            permission,
            modules: Some(modules.iter().map(|m| (*m).to_owned()).collect()),
            ..user_key(permission, None)
        };
        let broad = jwt(Permission::Admin, &["a", "b"]);
        assert_eq!(broad.grant(), jwt(Permission::Admin, &["b", "a", "b"]).grant(), "order and repeats decide nothing");
        assert_ne!(broad.grant(), jwt(Permission::User, &["a", "b"]).grant(), "a lower permission");
        assert_ne!(broad.grant(), jwt(Permission::Admin, &["a"]).grant(), "fewer modules");
        assert_ne!(broad.grant(), Identity { modules: None, ..broad.clone() }.grant(), "every module");
        assert_ne!(broad.grant(), Identity { user: KeyUser::Named("bob".into()), ..broad.clone() }.grant());
        assert_eq!(broad.grant().name(), "jwt:ada", "the name stays the user's");
    }

    #[tokio::test]
    async fn unknown_expired_and_missing_tokens_are_refused() {
        let live = keys::generate_key();
        let old = keys::generate_key();
        let entry = |id: &str, key: &str, expires: &str| keys::ApiKeyEntry {
            id: id.into(),
            hash: keys::hash_text(key),
            user_id: "ada".into(),
            permission: "user".into(),
            modules: None,
            expires: Some(keys::Expiry::Text(expires.into())),
        };
        let settings = IdentitySettings {
            api_keys: vec![
                entry("live", &live, "2100-01-01T00:00:00Z").check().unwrap(),
                entry("old", &old, "2000-01-01T00:00:00Z").check().unwrap(),
            ],
            ..IdentitySettings::default()
        };
        let identities = Identities::new(Some("service".into()), &settings, None, jwks()).unwrap();
        assert_eq!(identities.authenticate(Some(&live)).await.unwrap().name, "key:live");
        assert_eq!(identities.authenticate(Some(&old)).await, Err(AuthError::Expired));
        identities.revocations.replace(["live".to_owned()].into());
        assert_eq!(identities.authenticate(Some(&live)).await, Err(AuthError::Unknown), "revoked: refused as unknown");
        identities.revocations.replace(Default::default());
        assert_eq!(identities.authenticate(Some("nope")).await, Err(AuthError::Unknown));
        assert_eq!(identities.authenticate(None).await, Err(AuthError::Missing));
        assert_eq!(identities.authenticate(Some("service")).await.unwrap().kind, IdentityKind::ServiceToken);
        for near in ["servic", "service!", "Service", ""] {
            assert_eq!(identities.authenticate(Some(near)).await, Err(AuthError::Unknown), "{near:?}");
        }
        let open = Identities::new(None, &IdentitySettings::default(), None, jwks()).unwrap();
        assert_eq!(open.authenticate(None).await.unwrap().kind, IdentityKind::Development);
    }
}
