//! API keys and JWTs for the identity, approval and console tests: keys
//! written as an `API_KEYS_FILE`, and ES256 tokens signed with fixed test keys.

use std::io::Write;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A test key: its id, the key itself, and its `[[api_keys]]` entry fields.
pub struct TestKey {
    /// The key's id.
    pub id: &'static str,
    /// The secret sent as the bearer token.
    pub key: String,
    /// `user_id`: a user or `any`.
    pub user_id: &'static str,
    /// The highest permission.
    pub permission: &'static str,
    /// The allowed modules (`None`: all).
    pub modules: Option<&'static [&'static str]>,
    /// An RFC 3339 expiry.
    pub expires: Option<&'static str>,
}

impl TestKey {
    /// A key for `user_id` with `permission`, never expiring, all modules.
    pub fn new(id: &'static str, user_id: &'static str, permission: &'static str) -> Self {
        Self { id, key: format!("ok_test_{id}_{}", "x".repeat(32)), user_id, permission, modules: None, expires: None }
    }
}

/// Writes `keys` as an `API_KEYS_FILE` (hashed by the real `hash-key` command).
pub fn keys_file(keys: &[TestKey]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for key in keys {
        let hash = hash_key(&key.key);
        writeln!(
            file,
            "[[api_keys]]\nid = {:?}\nhash = {hash:?}\nuser_id = {:?}\npermission = {:?}",
            key.id, key.user_id, key.permission
        )
        .unwrap();
        if let Some(modules) = key.modules {
            writeln!(file, "modules = {modules:?}").unwrap();
        }
        if let Some(expires) = key.expires {
            writeln!(file, "expires = {expires}").unwrap();
        }
    }
    file
}

/// `orchestrator hash-key` of `key`, run as the operator would.
pub fn hash_key(key: &str) -> String {
    use std::process::{Command, Stdio};
    let mut child = Command::new(super::BINARY)
        .arg("hash-key")
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{key}").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "hash-key failed");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The JWT issuer's signing key (P-256, PKCS#8), a fixed test key.
pub const ISSUER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgVKOe1VmSiA+/TmzP
5pkVbQSKBvYbD/t8+l7tY9A0PT2hRANCAAQy7xfjTE2eGbT09cq82ndnk46UqkLm
HcS2wd6AMbwAoCZqd5Ym6fL5sB5uDNCej7boOoP/IFJAhZzR+D/FGOsn
-----END PRIVATE KEY-----
";

/// Another P-256 key, not in the JWKS: tokens it signs have a bad signature.
pub const OTHER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg0GtWu9ToWHpzcnAe
7fC4wLHtUIMo1ISI7tzfroarK2ihRANCAAQlsuHkfDfkvUpHXK0N76EDgVh1acK3
l7pJxCaVPAZe/wz0elkcqq1Den6vDdmvOG0AY0ibV1Ft9ZkmvJbjC/R6
-----END PRIVATE KEY-----
";

/// The `kid` of the issuer's key.
pub const KID: &str = "test-issuer-1";

/// A JWKS file holding the issuer's public key.
pub fn jwks_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(jwks(&[(ISSUER_KEY, KID)]).as_bytes()).unwrap();
    file
}

/// A JWKS of the public keys of `keys` (PEM, `kid`), as text.
pub fn jwks(keys: &[(&str, &str)]) -> String {
    let jwk = |(pem, kid): &(&str, &str)| {
        let key = EncodingKey::from_ec_pem(pem.as_bytes()).unwrap();
        let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
        jwk.common.key_id = Some((*kid).to_owned());
        jwk
    };
    serde_json::to_string(&JwkSet { keys: keys.iter().map(jwk).collect() }).unwrap()
}

/// Seconds since the epoch, offset by `delta`.
pub fn now_plus(delta: i64) -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp() + delta
}

/// An ES256 token with `claims`, signed with `pem`, naming the issuer's `kid`.
pub fn token(pem: &str, claims: &Value) -> String {
    token_of(pem, KID, claims)
}

/// An ES256 token with `claims`, signed with `pem`, naming `kid`.
pub fn token_of(pem: &str, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_pem(pem.as_bytes()).unwrap()).unwrap()
}

/// Claims for `user` with `permission`, for issuer `test-issuer` and audience `orchestrator`.
pub fn claims(user: &str, permission: &str) -> Value {
    json!({"sub": user, "permission": permission, "iss": "test-issuer", "aud": "orchestrator", "exp": now_plus(600)})
}
