//! How a module server is set up: address, token, limits, log format,
//! read from the environment with defaults that suit development.

use std::net::IpAddr;

use crate::error::ServeError;

/// The default largest request body, 2 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per event (`LOG_FORMAT=json`).
    Json,
}

/// The settings of a module server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// `HOST`, default `0.0.0.0`.
    pub host: IpAddr,
    /// `PORT`, default 8000; 0 picks a free port.
    pub port: u16,
    /// `SERVICE_AUTH_TOKEN`; `None` (unset or empty) is development mode, no auth.
    pub auth_token: Option<String>,
    /// `MAX_BODY_BYTES`, default 2 MiB; larger bodies get `413`.
    pub max_body_bytes: usize,
    /// `LOG_FORMAT` (`text` or `json`).
    pub log_format: LogFormat,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            host: IpAddr::from([0, 0, 0, 0]),
            port: 8000,
            auth_token: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            log_format: LogFormat::Text,
        }
    }
}

impl ServeConfig {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, ServeError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ServeError> {
        let defaults = Self::default();
        let get = |name: &'static str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let invalid = |name: &'static str, value: String, reason: &str| ServeError::Config {
            name,
            value,
            reason: reason.to_owned(),
        };
        let host = match get("HOST") {
            Some(v) => {
                v.parse().map_err(|_| invalid("HOST", v, "expected an IP address such as 0.0.0.0 or 127.0.0.1"))?
            }
            None => defaults.host,
        };
        let port = match get("PORT") {
            Some(v) => v.parse().map_err(|_| invalid("PORT", v, "expected a port number from 0 to 65535"))?,
            None => defaults.port,
        };
        let max_body_bytes = match get("MAX_BODY_BYTES") {
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => return Err(invalid("MAX_BODY_BYTES", v, "expected a positive number of bytes")),
            },
            None => defaults.max_body_bytes,
        };
        let log_format = match get("LOG_FORMAT").as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(invalid("LOG_FORMAT", other.to_owned(), "expected `text` or `json`")),
        };
        Ok(Self { host, port, auth_token: get("SERVICE_AUTH_TOKEN"), max_body_bytes, log_format })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)]) -> Result<ServeConfig, ServeError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        ServeConfig::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_are_development_mode() {
        let config = read(&[("SERVICE_AUTH_TOKEN", "")]).unwrap();
        assert_eq!(config, ServeConfig::default());
    }

    #[test]
    fn values_are_read_and_bad_ones_named() {
        let config =
            read(&[("PORT", "9001"), ("HOST", "127.0.0.1"), ("SERVICE_AUTH_TOKEN", "s3cret"), ("LOG_FORMAT", "json")])
                .unwrap();
        assert_eq!(config.port, 9001);
        assert_eq!(config.auth_token.as_deref(), Some("s3cret"));
        assert_eq!(config.log_format, LogFormat::Json);
        let error = read(&[("PORT", "eighty")]).unwrap_err().to_string();
        assert!(error.contains("PORT") && error.contains("eighty"), "{error}");
        assert!(read(&[("MAX_BODY_BYTES", "0")]).is_err());
        assert!(read(&[("LOG_FORMAT", "xml")]).is_err());
    }
}
