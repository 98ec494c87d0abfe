//! API keys: generated as 32 random bytes, stored only as their SHA-256
//! hash (`sha256:<hex>`), looked up in constant time.
//!
//! Keys are high-entropy random tokens, not passwords: a fast hash cannot
//! be brute-forced back to a 256-bit key, so a slow password hash (argon2)
//! would only cost every request time. Short keys are refused when hashed.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use module_sdk::Permission;
use rand::RngCore;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use time::OffsetDateTime;

/// The prefix of every stored key hash.
pub const HASH_PREFIX: &str = "sha256:";
/// The shortest key `orchestrator hash-key` accepts.
pub const MIN_KEY_LENGTH: usize = 32;
/// The prefix of generated keys (so a leaked one is recognisable in logs and scanners).
const KEY_PREFIX: &str = "ok_";

/// Who a key may act for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyUser {
    /// Only this user.
    Named(String),
    /// Any user the request names (`user_id = "any"`): a service key.
    Any,
}

/// One checked API key of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    /// The key's name, for logs and approvals (never the key).
    pub id: String,
    /// The SHA-256 of the key.
    pub hash: [u8; 32],
    /// The user it acts for.
    pub user: KeyUser,
    /// The highest permission it grants.
    pub permission: Permission,
    /// The modules it may use; `None` allows all.
    pub modules: Option<Vec<String>>,
    /// When it stops working.
    pub expires: Option<OffsetDateTime>,
}

/// A `[[api_keys]]` entry as written in TOML.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyEntry {
    /// The key's name.
    pub id: String,
    /// `sha256:<64 hex digits>`, as `orchestrator hash-key` prints it.
    pub hash: String,
    /// The user the key acts for, or `any`.
    pub user_id: String,
    /// The highest permission: guest, user, admin or owner.
    pub permission: String,
    /// The modules the key may use; absent allows all.
    #[serde(default)]
    pub modules: Option<Vec<String>>,
    /// An RFC 3339 date-time (a TOML date-time or a string) after which the key is refused.
    #[serde(default)]
    pub expires: Option<Expiry>,
}

/// An expiry as TOML allows it: a native date-time or a string.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Expiry {
    /// `expires = 2027-01-01T00:00:00Z`.
    Toml(toml::value::Datetime),
    /// `expires = "2027-01-01T00:00:00Z"`.
    Text(String),
}

impl ApiKeyEntry {
    /// The checked key, or what is wrong with the entry.
    pub fn check(self) -> Result<ApiKey, String> {
        let id = self.id;
        if id.trim().is_empty() {
            return Err("an api key has an empty `id`".into());
        }
        let hash = parse_hash(&self.hash).ok_or_else(|| {
            format!("api key `{id}`: `hash` must be `sha256:` and 64 hex digits, as `orchestrator hash-key` prints")
        })?;
        let user = match self.user_id.trim() {
            "" => return Err(format!("api key `{id}`: `user_id` is empty (name a user, or `any` for a service key)")),
            "any" => KeyUser::Any,
            user => KeyUser::Named(user.to_owned()),
        };
        let permission = parse_permission(&self.permission)
            .ok_or_else(|| format!("api key `{id}`: `permission` must be guest, user, admin or owner"))?;
        let expires = match self.expires {
            None => None,
            Some(expiry) => {
                let text = match expiry {
                    Expiry::Toml(datetime) => datetime.to_string(),
                    Expiry::Text(text) => text,
                };
                let parsed = OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339)
                    .map_err(|_| format!("api key `{id}`: `expires` must be an RFC 3339 date-time, got `{text}`"))?;
                Some(parsed)
            }
        };
        let modules = self.modules.map(|names| names.iter().map(|n| n.trim().to_owned()).collect());
        Ok(ApiKey { id, hash, user, permission, modules, expires })
    }
}

/// A permission name read strictly (a typo in the configuration is an error, not `guest`).
pub fn parse_permission(name: &str) -> Option<Permission> {
    ["guest", "user", "admin", "owner"].contains(&name.trim()).then(|| Permission::for_caller(name.trim()))
}

/// The SHA-256 of `key`.
pub fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The stored form of `key`'s hash: `sha256:<hex>`.
pub fn hash_text(key: &str) -> String {
    let hex: String = digest(key).iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{HASH_PREFIX}{hex}")
}

/// A new random key: `ok_` and 32 random bytes in URL-safe base64.
pub fn generate_key() -> String {
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let hex = text.trim().strip_prefix(HASH_PREFIX)?;
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut hash = [0_u8; 32];
    for (byte, pair) in hash.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(hash)
}

/// The key whose hash is `presented`'s, comparing against every key in
/// constant time (no early exit), so unknown, expired and malformed keys
/// take the same path.
pub fn find<'a>(keys: &'a [ApiKey], presented: &str) -> Option<&'a ApiKey> {
    let hash = digest(presented);
    let mut found = None;
    for key in keys {
        if bool::from(key.hash.ct_eq(&hash)) {
            found = Some(key);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hash: String, expires: Option<&str>) -> ApiKeyEntry {
        ApiKeyEntry {
            id: "k".into(),
            hash,
            user_id: "ada".into(),
            permission: "user".into(),
            modules: None,
            expires: expires.map(|e| Expiry::Text(e.into())),
        }
    }

    #[test]
    fn a_generated_key_is_found_by_its_hash_only() {
        let key = generate_key();
        assert!(key.len() >= MIN_KEY_LENGTH);
        let checked = entry(hash_text(&key), Some("2030-01-01T00:00:00Z")).check().unwrap();
        assert_eq!(checked.user, KeyUser::Named("ada".into()));
        let keys = [checked];
        assert_eq!(find(&keys, &key).map(|k| k.id.as_str()), Some("k"));
        assert!(find(&keys, "ok_other").is_none());
        assert!(find(&keys, "").is_none());
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        assert!(entry("md5:abc".into(), None).check().unwrap_err().contains("hash"));
        let hash = hash_text("x");
        assert!(entry(hash.clone(), Some("tomorrow")).check().unwrap_err().contains("expires"));
        let mut bad = entry(hash, None);
        bad.permission = "root".into();
        assert!(bad.check().unwrap_err().contains("permission"));
    }
}
