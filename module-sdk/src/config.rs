//! How a module server is set up: address, token, limits, log format,
//! read from the environment with defaults that suit development.

use std::net::IpAddr;
use std::time::Duration;

use crate::blocking_limit::{DEFAULT_MAX_BLOCKING_CALLS, MAX_BLOCKING_CALLS_CEILING};
use crate::error::ServeError;
use crate::listener::{HEADER_BYTES_RANGE, ServerLimits};
use crate::mcp::McpSettings;
use crate::tool::MAX_TIMEOUT;

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
    /// `MAX_BODY_BYTES`, `HEADER_READ_TIMEOUT_SECONDS`,
    /// `BODY_READ_TIMEOUT_SECONDS`, `MAX_CONNECTIONS` and `MAX_HEADER_BYTES`.
    pub limits: ServerLimits,
    /// `LOG_FORMAT` (`text` or `json`).
    pub log_format: LogFormat,
    /// `MCP_ALLOWED_ORIGINS`, `MCP_ALLOWED_HOSTS`, `MCP_PAGE_SIZE`: how `/mcp` answers.
    pub mcp: McpSettings,
    /// `MAX_BLOCKING_CALLS`: how many pieces of `Context::blocking` work
    /// run at once, default [`DEFAULT_MAX_BLOCKING_CALLS`].
    pub max_blocking_calls: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            host: IpAddr::from([0, 0, 0, 0]),
            port: 8000,
            auth_token: None,
            limits: ServerLimits::default(),
            log_format: LogFormat::Text,
            mcp: McpSettings::default(),
            max_blocking_calls: DEFAULT_MAX_BLOCKING_CALLS,
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
        let count = |name: &'static str, what: &str, default: usize| match get(name) {
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(invalid(name, v, &format!("expected a positive number of {what}"))),
            },
            None => Ok(default),
        };
        let seconds = |name: &'static str, default: Duration| match get(name) {
            Some(v) => {
                let duration =
                    v.parse::<f64>().ok().filter(|s| *s > 0.0).and_then(|s| Duration::try_from_secs_f64(s).ok());
                match duration.filter(|d| *d <= MAX_TIMEOUT) {
                    Some(duration) => Ok(duration),
                    None => Err(invalid(
                        name,
                        v,
                        &format!("expected a positive number of seconds, at most {}", MAX_TIMEOUT.as_secs()),
                    )),
                }
            }
            None => Ok(default),
        };
        let limits = ServerLimits {
            max_body_bytes: count("MAX_BODY_BYTES", "bytes", defaults.limits.max_body_bytes)?,
            header_read_timeout: seconds("HEADER_READ_TIMEOUT_SECONDS", defaults.limits.header_read_timeout)?,
            body_read_timeout: seconds("BODY_READ_TIMEOUT_SECONDS", defaults.limits.body_read_timeout)?,
            max_connections: count("MAX_CONNECTIONS", "connections", defaults.limits.max_connections)?,
            max_header_bytes: match get("MAX_HEADER_BYTES") {
                Some(v) => match v.parse::<usize>() {
                    Ok(n) if HEADER_BYTES_RANGE.contains(&n) => n,
                    _ => {
                        let (least, most) = HEADER_BYTES_RANGE.into_inner();
                        return Err(invalid(
                            "MAX_HEADER_BYTES",
                            v,
                            &format!("expected a number of bytes from {least} to {most}"),
                        ));
                    }
                },
                None => defaults.limits.max_header_bytes,
            },
        };
        let log_format = match get("LOG_FORMAT").as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(invalid("LOG_FORMAT", other.to_owned(), "expected `text` or `json`")),
        };
        let mcp = McpSettings::from_lookup(&lookup)?;
        let max_blocking_calls = match count("MAX_BLOCKING_CALLS", "calls", defaults.max_blocking_calls)? {
            n if n > MAX_BLOCKING_CALLS_CEILING => {
                let why = format!(
                    "expected at most {MAX_BLOCKING_CALLS_CEILING} calls: tokio runs at most 512 blocking threads, \
                     and its own file, name lookup and stdio work needs the rest"
                );
                return Err(invalid("MAX_BLOCKING_CALLS", n.to_string(), &why));
            }
            n => n,
        };
        Ok(Self { host, port, auth_token: get("SERVICE_AUTH_TOKEN"), limits, log_format, mcp, max_blocking_calls })
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
        for (name, bad) in [
            ("HEADER_READ_TIMEOUT_SECONDS", "0"),
            ("BODY_READ_TIMEOUT_SECONDS", "-1"),
            ("BODY_READ_TIMEOUT_SECONDS", "soon"),
            ("HEADER_READ_TIMEOUT_SECONDS", "1e300"),
            ("HEADER_READ_TIMEOUT_SECONDS", "1e19"),
            ("BODY_READ_TIMEOUT_SECONDS", "86400.5"),
            ("MAX_CONNECTIONS", "0"),
            ("MAX_CONNECTIONS", "many"),
            ("MAX_BLOCKING_CALLS", "0"),
            ("MAX_BLOCKING_CALLS", "449"),
            ("MAX_HEADER_BYTES", "4095"),
            ("MAX_HEADER_BYTES", "262145"),
            ("MAX_HEADER_BYTES", "64k"),
        ] {
            let error = read(&[(name, bad)]).unwrap_err().to_string();
            assert!(error.contains(name) && error.contains(bad), "{error}");
        }
    }

    #[test]
    fn read_timeouts_may_be_as_long_as_a_day_and_no_longer() {
        let config = read(&[("HEADER_READ_TIMEOUT_SECONDS", "86400"), ("BODY_READ_TIMEOUT_SECONDS", "86400")]).unwrap();
        assert_eq!(config.limits.body_read_timeout, MAX_TIMEOUT);
        let error = read(&[("BODY_READ_TIMEOUT_SECONDS", "1e19")]).unwrap_err().to_string();
        assert!(error.contains("at most 86400"), "{error}");
    }

    #[test]
    fn limits_are_read() {
        let config = read(&[
            ("MAX_BODY_BYTES", "1000"),
            ("HEADER_READ_TIMEOUT_SECONDS", "0.5"),
            ("BODY_READ_TIMEOUT_SECONDS", "2"),
            ("MAX_CONNECTIONS", "7"),
            ("MAX_HEADER_BYTES", "4096"),
        ])
        .unwrap();
        let expected = ServerLimits {
            max_body_bytes: 1000,
            header_read_timeout: Duration::from_millis(500),
            body_read_timeout: Duration::from_secs(2),
            max_connections: 7,
            max_header_bytes: 4096,
        };
        assert_eq!(config.limits, expected);
        assert_eq!(read(&[("MAX_BLOCKING_CALLS", "3")]).unwrap().max_blocking_calls, 3);
        assert_eq!(read(&[("MAX_BLOCKING_CALLS", "448")]).unwrap().max_blocking_calls, 448);
        assert!(read(&[("LOG_FORMAT", "xml")]).is_err());
    }
}
