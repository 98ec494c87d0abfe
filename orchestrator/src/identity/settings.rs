//! Reading the identity settings: `[[api_keys]]` (in the configuration or in
//! `API_KEYS_FILE`), `REVOCATION_REFRESH_SECONDS` and `JWT_*`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;

use super::jwt::{JwksSource, JwtSettings};
use super::keys::{ApiKey, ApiKeyEntry};
use super::revocations::DEFAULT_REVOCATION_REFRESH_SECONDS;
use crate::config::{AtLeast, ConfigError, MAX_SETTING_SECONDS, invalid, positive_count, seconds_setting};

/// The default of `JWT_ALGORITHMS`.
pub const DEFAULT_JWT_ALGORITHMS: &str = "RS256,ES256";
/// The default of `JWT_JWKS_REFRESH_SECONDS`.
pub const DEFAULT_JWKS_REFRESH_SECONDS: f64 = 300.0;
/// The default of `JWT_UNKNOWN_KID_REFETCH_SECONDS`.
pub const DEFAULT_UNKNOWN_KID_REFETCH_SECONDS: f64 = 30.0;
/// The default of `JWT_JWKS_MAX_STALE_SECONDS`: this many refresh
/// intervals (an hour at the default interval), at most 30 days.
pub const DEFAULT_MAX_STALE_REFRESHES: f64 = 12.0;
/// The default of `JWT_JWKS_MAX_BYTES`, 1 MiB: hundreds of keys with their
/// certificates (a real key set is a few KiB, a large tenant's tens).
pub const DEFAULT_JWKS_MAX_BYTES: usize = 1024 * 1024;
/// The least `JWT_JWKS_MAX_BYTES`, 4 KiB: one RSA key with its certificate
/// chain (`x5c`) takes about 3 KiB, so less would refuse a real key set.
pub const MIN_JWKS_MAX_BYTES: usize = 4 * 1024;
/// The most `JWT_JWKS_MAX_BYTES`, 64 MiB: each fetch holds the whole answer
/// and its parsed keys in memory.
pub const MAX_JWKS_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The checked identity settings.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentitySettings {
    /// `[[api_keys]]` of the configuration and of `API_KEYS_FILE`.
    pub api_keys: Vec<ApiKey>,
    /// `REVOCATION_REFRESH_SECONDS`: how often the revoked keys are read from Redis.
    pub revocation_refresh: Duration,
    /// `JWT_JWKS` and the other `JWT_*` settings; `None` accepts no JWT.
    pub jwt: Option<JwtSettings>,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        Self {
            api_keys: Vec::new(),
            revocation_refresh: Duration::from_secs_f64(DEFAULT_REVOCATION_REFRESH_SECONDS),
            jwt: None,
        }
    }
}

/// The identity keys of the TOML configuration, as written.
#[derive(Debug, Default)]
pub struct IdentityFile {
    /// `[[api_keys]]`.
    pub api_keys: Option<Vec<ApiKeyEntry>>,
    /// `api_keys_file`.
    pub api_keys_file: Option<PathBuf>,
    /// `revocation_refresh_seconds`.
    pub revocation_refresh_seconds: Option<f64>,
    /// `jwt_jwks`.
    pub jwt_jwks: Option<String>,
    /// `jwt_issuer`.
    pub jwt_issuer: Option<String>,
    /// `jwt_audience`.
    pub jwt_audience: Option<String>,
    /// `jwt_algorithms`, comma-separated.
    pub jwt_algorithms: Option<String>,
    /// `jwt_user_claim`.
    pub jwt_user_claim: Option<String>,
    /// `jwt_permission_claim`.
    pub jwt_permission_claim: Option<String>,
    /// `jwt_modules_claim`.
    pub jwt_modules_claim: Option<String>,
    /// `jwt_jwks_refresh_seconds`.
    pub jwt_jwks_refresh_seconds: Option<f64>,
    /// `jwt_unknown_kid_refetch_seconds`.
    pub jwt_unknown_kid_refetch_seconds: Option<f64>,
    /// `jwt_jwks_max_stale_seconds`.
    pub jwt_jwks_max_stale_seconds: Option<f64>,
    /// `jwt_jwks_max_bytes`.
    pub jwt_jwks_max_bytes: Option<usize>,
}

/// An `API_KEYS_FILE`: only `[[api_keys]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    api_keys: Vec<ApiKeyEntry>,
}

impl IdentitySettings {
    /// The file's values overlaid by `env` (the environment, already trimmed
    /// with empty values unset), checked.
    pub fn read(file: IdentityFile, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // Each entry with where it is written, for its error.
        let mut sources = vec![("the config file".to_owned(), file.api_keys.unwrap_or_default())];
        if let Some(path) = env("API_KEYS_FILE").map(PathBuf::from).or(file.api_keys_file) {
            sources.push((format!("API_KEYS_FILE ({})", path.display()), read_keys_file(&path)?));
        }
        let mut api_keys: Vec<ApiKey> = Vec::new();
        for (place, entries) in sources {
            for entry in entries {
                let refused = |reason| ConfigError::ApiKey { place: place.clone(), reason };
                let key = entry.check().map_err(refused)?;
                if api_keys.iter().any(|k| k.id == key.id || k.hash == key.hash) {
                    return Err(refused(format!("api key `{}`: another api key has the same id or hash", key.id)));
                }
                api_keys.push(key);
            }
        }
        let text = |name: &str, from_file: Option<String>| env(name).or(from_file.filter(|s| !s.trim().is_empty()));
        let jwt = match text("JWT_JWKS", file.jwt_jwks) {
            None => None,
            Some(jwks) => {
                let source = if jwks.starts_with("http://") || jwks.starts_with("https://") {
                    let url =
                        url::Url::parse(&jwks).map_err(|e| invalid("JWT_JWKS", &jwks, format!("not a URL ({e})")))?;
                    if url.scheme() == "http" && !is_loopback(&url) {
                        return Err(invalid(
                            "JWT_JWKS",
                            &jwks,
                            "an http:// JWKS URL is accepted only on a loopback host (127.0.0.0/8, ::1, \
                             localhost): anyone on the path could serve their own keys; use https://"
                                .into(),
                        ));
                    }
                    JwksSource::Url(jwks)
                } else {
                    JwksSource::File(PathBuf::from(jwks))
                };
                let algorithms_text =
                    text("JWT_ALGORITHMS", file.jwt_algorithms).unwrap_or_else(|| DEFAULT_JWT_ALGORITHMS.to_owned());
                let algorithms = parse_algorithms(&algorithms_text)?;
                let refresh = at_least_one_second(
                    env,
                    "JWT_JWKS_REFRESH_SECONDS",
                    file.jwt_jwks_refresh_seconds,
                    DEFAULT_JWKS_REFRESH_SECONDS,
                )?;
                let unknown_kid_refetch = at_least_one_second(
                    env,
                    "JWT_UNKNOWN_KID_REFETCH_SECONDS",
                    file.jwt_unknown_kid_refetch_seconds,
                    DEFAULT_UNKNOWN_KID_REFETCH_SECONDS,
                )?;
                let max_stale = at_least_one_second(
                    env,
                    "JWT_JWKS_MAX_STALE_SECONDS",
                    file.jwt_jwks_max_stale_seconds,
                    // Never past the cap every setting has, whatever the refresh.
                    (DEFAULT_MAX_STALE_REFRESHES * refresh.as_secs_f64()).min(MAX_SETTING_SECONDS.as_secs_f64()),
                )?;
                // A JWKS file is never stale; equal is allowed so that a
                // refresh at the cap still has a maximum staleness.
                if matches!(source, JwksSource::Url(_)) && max_stale < refresh {
                    return Err(invalid(
                        "JWT_JWKS_MAX_STALE_SECONDS",
                        &max_stale.as_secs_f64().to_string(),
                        format!(
                            "it must be at least JWT_JWKS_REFRESH_SECONDS ({} s), or every JWT would be refused \
                             between two refreshes; make it several refresh intervals",
                            refresh.as_secs_f64()
                        ),
                    ));
                }
                let max_bytes = jwks_max_bytes(env, file.jwt_jwks_max_bytes)?;
                let audience = text("JWT_AUDIENCE", file.jwt_audience).ok_or_else(|| {
                    invalid(
                        "JWT_AUDIENCE",
                        "",
                        "required with JWT_JWKS: without it a token the issuer signed for any other \
                         application (an ID token of another app on the same Google, Keycloak or Auth0) \
                         would be accepted; set it to this orchestrator's client id or audience"
                            .into(),
                    )
                })?;
                Some(JwtSettings {
                    jwks: source,
                    issuer: text("JWT_ISSUER", file.jwt_issuer),
                    audience,
                    algorithms,
                    user_claim: text("JWT_USER_CLAIM", file.jwt_user_claim).unwrap_or_else(|| "sub".into()),
                    permission_claim: text("JWT_PERMISSION_CLAIM", file.jwt_permission_claim)
                        .unwrap_or_else(|| "permission".into()),
                    modules_claim: text("JWT_MODULES_CLAIM", file.jwt_modules_claim)
                        .unwrap_or_else(|| "modules".into()),
                    refresh,
                    unknown_kid_refetch,
                    max_stale,
                    max_bytes,
                })
            }
        };
        let revocation_refresh = at_least_one_second(
            env,
            "REVOCATION_REFRESH_SECONDS",
            file.revocation_refresh_seconds,
            DEFAULT_REVOCATION_REFRESH_SECONDS,
        )?;
        Ok(Self { api_keys, revocation_refresh, jwt })
    }
}

/// Whether `url`'s host is this machine: `localhost`, 127.0.0.0/8 or `::1`.
fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// A refresh interval of at least one second: `name` from `env`, else the
/// file's value, else `default`.
fn at_least_one_second(
    env: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    from_file: Option<f64>,
    default: f64,
) -> Result<Duration, ConfigError> {
    let (text, seconds) = match env(name) {
        Some(value) => (value.clone(), value.parse::<f64>().ok()),
        None => (String::new(), from_file.or(Some(default))),
    };
    seconds_setting(name, &text, seconds, AtLeast::Seconds(1.0))
}

/// `JWT_JWKS_MAX_BYTES` from `env`, else the file's value, else the
/// default: within [`MIN_JWKS_MAX_BYTES`]..=[`MAX_JWKS_MAX_BYTES`].
fn jwks_max_bytes(env: &dyn Fn(&str) -> Option<String>, from_file: Option<usize>) -> Result<usize, ConfigError> {
    let expected = format!("a number of bytes from {MIN_JWKS_MAX_BYTES} to {MAX_JWKS_MAX_BYTES}");
    let bytes = positive_count(env, "JWT_JWKS_MAX_BYTES", from_file, DEFAULT_JWKS_MAX_BYTES, &expected)?;
    if !(MIN_JWKS_MAX_BYTES..=MAX_JWKS_MAX_BYTES).contains(&bytes) {
        return Err(invalid("JWT_JWKS_MAX_BYTES", &bytes.to_string(), format!("expected {expected}")));
    }
    Ok(bytes)
}

fn read_keys_file(path: &Path) -> Result<Vec<ApiKeyEntry>, ConfigError> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| invalid("API_KEYS_FILE", &shown, format!("cannot read it ({e})")))?;
    let file: KeysFile =
        toml::from_str(&text).map_err(|e| invalid("API_KEYS_FILE", &shown, format!("not [[api_keys]] TOML: {e}")))?;
    Ok(file.api_keys)
}

/// `RS256,ES256`: names `jsonwebtoken` knows; `none` is never one.
fn parse_algorithms(text: &str) -> Result<Vec<Algorithm>, ConfigError> {
    let algorithms = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| name.parse::<Algorithm>().map_err(|_| name))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|name| invalid("JWT_ALGORITHMS", text, format!("`{name}` is not a JWT algorithm such as RS256")))?;
    if algorithms.is_empty() {
        return Err(invalid("JWT_ALGORITHMS", text, "name at least one algorithm".into()));
    }
    Ok(algorithms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<IdentitySettings, ConfigError> {
        let env: HashMap<&str, &str> = pairs.iter().copied().collect();
        IdentitySettings::read(IdentityFile::default(), &|name| env.get(name).map(|v| (*v).to_owned()))
    }

    #[test]
    fn jwt_settings_have_defaults_and_refuse_none() {
        let settings = read(&[("JWT_JWKS", "https://id.example/jwks.json"), ("JWT_AUDIENCE", "orch")]).unwrap();
        let jwt = settings.jwt.unwrap();
        assert_eq!(jwt.algorithms, [Algorithm::RS256, Algorithm::ES256]);
        assert_eq!((jwt.user_claim.as_str(), jwt.refresh), ("sub", Duration::from_secs(300)));
        let error = read(&[("JWT_JWKS", "/k.json"), ("JWT_AUDIENCE", "orch"), ("JWT_ALGORITHMS", "none")])
            .unwrap_err()
            .to_string();
        assert!(error.contains("JWT_ALGORITHMS"), "{error}");
        assert!(read(&[]).unwrap().jwt.is_none());
    }

    #[test]
    fn the_jwks_refetch_and_staleness_have_defaults_and_staleness_outlasts_a_refresh() {
        let url = ("JWT_JWKS", "https://id.example/jwks.json");
        let jwt = read(&[url, ("JWT_AUDIENCE", "orch")]).unwrap().jwt.unwrap();
        assert_eq!((jwt.unknown_kid_refetch, jwt.max_stale), (Duration::from_secs(30), Duration::from_secs(3600)));
        let jwt = read(&[url, ("JWT_AUDIENCE", "orch"), ("JWT_JWKS_REFRESH_SECONDS", "600")]).unwrap().jwt.unwrap();
        assert_eq!(jwt.max_stale, Duration::from_secs(7200), "12 refresh intervals");
        let error = read(&[url, ("JWT_AUDIENCE", "orch"), ("JWT_JWKS_MAX_STALE_SECONDS", "299")]).unwrap_err();
        let error = error.to_string();
        assert!(error.contains("JWT_JWKS_MAX_STALE_SECONDS") && error.contains("JWT_JWKS_REFRESH_SECONDS"), "{error}");
        let error = read(&[url, ("JWT_AUDIENCE", "orch"), ("JWT_UNKNOWN_KID_REFETCH_SECONDS", "0")]).unwrap_err();
        assert!(error.to_string().contains("JWT_UNKNOWN_KID_REFETCH_SECONDS"), "{error}");
        // A weekly refresh, or one at the cap, starts: the default is held to the cap.
        for weekly in ["604800", "2592000"] {
            let jwt =
                read(&[url, ("JWT_AUDIENCE", "orch"), ("JWT_JWKS_REFRESH_SECONDS", weekly)]).unwrap().jwt.unwrap();
            assert_eq!(jwt.max_stale, MAX_SETTING_SECONDS, "{weekly}");
        }
        // A file is never stale: its refresh and staleness are not weighed.
        let file = [("JWT_JWKS", "/etc/orchestrator/jwks.json"), ("JWT_AUDIENCE", "orch")];
        assert!(read(&[file[0], file[1], ("JWT_JWKS_MAX_STALE_SECONDS", "60")]).is_ok());
    }

    #[test]
    fn the_jwks_size_limit_defaults_to_one_mib_and_is_held_to_its_range() {
        let url = ("JWT_JWKS", "https://id.example/jwks.json");
        let jwt = read(&[url, ("JWT_AUDIENCE", "orch")]).unwrap().jwt.unwrap();
        assert_eq!(jwt.max_bytes, 1024 * 1024);
        let jwt = read(&[url, ("JWT_AUDIENCE", "orch"), ("JWT_JWKS_MAX_BYTES", "8388608")]).unwrap().jwt.unwrap();
        assert_eq!(jwt.max_bytes, 8 * 1024 * 1024);
        for refused in ["0", "4095", "67108865", "-1", "1MiB"] {
            let error = read(&[url, ("JWT_AUDIENCE", "orch"), ("JWT_JWKS_MAX_BYTES", refused)]).unwrap_err();
            let error = error.to_string();
            assert!(error.contains("JWT_JWKS_MAX_BYTES") && error.contains("from 4096 to 67108864"), "{error}");
        }
    }

    #[test]
    fn a_jwks_without_an_audience_is_refused() {
        let error = read(&[("JWT_JWKS", "https://id.example/jwks.json")]).unwrap_err().to_string();
        assert!(error.contains("JWT_AUDIENCE") && error.contains("required with JWT_JWKS"), "{error}");
    }

    #[test]
    fn an_http_jwks_url_is_accepted_on_a_loopback_host_only() {
        for url in
            ["http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]:9/jwks", "https://id.example/j"]
        {
            assert!(read(&[("JWT_JWKS", url), ("JWT_AUDIENCE", "orch")]).is_ok(), "{url}");
        }
        for url in ["http://id.example/jwks", "http://10.0.0.1/jwks", "http://127.0.0.1.example/jwks"] {
            let error = read(&[("JWT_JWKS", url), ("JWT_AUDIENCE", "orch")]).unwrap_err().to_string();
            assert!(error.contains("JWT_JWKS") && error.contains("loopback"), "{url}: {error}");
        }
    }

    #[test]
    fn the_revocation_refresh_defaults_to_two_seconds_and_is_at_least_one() {
        assert_eq!(read(&[]).unwrap().revocation_refresh, Duration::from_secs(2));
        assert_eq!(read(&[("REVOCATION_REFRESH_SECONDS", "5")]).unwrap().revocation_refresh, Duration::from_secs(5));
        let error = read(&[("REVOCATION_REFRESH_SECONDS", "0.1")]).unwrap_err().to_string();
        assert!(error.contains("REVOCATION_REFRESH_SECONDS"), "{error}");
    }

    #[test]
    fn a_bad_api_key_entry_names_where_it_is_written() {
        let hash = format!("sha256:{}", "0".repeat(64));
        let entry = |id: &str, permission: &str| ApiKeyEntry {
            id: id.to_owned(),
            hash: hash.clone(),
            user_id: "any".to_owned(),
            permission: permission.to_owned(),
            modules: None,
            expires: None,
        };
        let read_file = |entries: Vec<ApiKeyEntry>| {
            let file = IdentityFile { api_keys: Some(entries), ..IdentityFile::default() };
            IdentitySettings::read(file, &|_| None).unwrap_err().to_string()
        };
        let error = read_file(vec![entry("k1", "root")]);
        assert!(error.starts_with("invalid [[api_keys]] entry in the config file: api key `k1`"), "{error}");
        assert!(!error.contains("API_KEYS "), "{error}");
        let error = read_file(vec![entry("k1", "user"), entry("k1", "user")]);
        assert!(error.contains("the config file: api key `k1`: another api key has the same id"), "{error}");

        let mut keys = tempfile::NamedTempFile::new().unwrap();
        let text = format!("[[api_keys]]\nid = \"k2\"\nhash = \"{hash}\"\nuser_id = \"any\"\npermission = \"root\"\n");
        std::io::Write::write_all(&mut keys, text.as_bytes()).unwrap();
        let path = keys.path().to_str().unwrap();
        let error = read(&[("API_KEYS_FILE", path)]).unwrap_err().to_string();
        let expected = format!("invalid [[api_keys]] entry in API_KEYS_FILE ({path}): api key `k2`");
        assert!(error.starts_with(&expected), "{error}");
    }

    #[test]
    fn a_missing_keys_file_names_its_setting() {
        let error = read(&[("API_KEYS_FILE", "/nonexistent/keys.toml")]).unwrap_err().to_string();
        assert!(error.contains("API_KEYS_FILE"), "{error}");
    }
}
