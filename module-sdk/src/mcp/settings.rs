//! The MCP settings of a module server, read from the environment with the
//! other [`ServeConfig`](crate::ServeConfig) settings.

use crate::error::ServeError;

/// The default number of tools in one `tools/list` page.
pub const DEFAULT_MCP_PAGE_SIZE: usize = 100;

/// How a module answers MCP clients at `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSettings {
    /// `MCP_ALLOWED_ORIGINS`, comma-separated (`https://app.example.com`,
    /// `http://localhost:*`). A request that carries an `Origin` header
    /// (one a web page made a browser send) is refused with `403` unless its
    /// origin is listed; by default none is, so no web page can drive a
    /// module. Requests without `Origin` (MCP clients, the orchestrator) pass.
    pub allowed_origins: Vec<String>,
    /// `MCP_ALLOWED_HOSTS`, comma-separated host names (or `host:port`) the
    /// `Host` header may name, against DNS rebinding of a module bound to
    /// loopback without a token; empty (the default) accepts any `Host`, as
    /// a module is reached by its service name.
    pub allowed_hosts: Vec<String>,
    /// `MCP_PAGE_SIZE`: tools per `tools/list` page (default 100).
    pub page_size: usize,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self { allowed_origins: Vec::new(), allowed_hosts: Vec::new(), page_size: DEFAULT_MCP_PAGE_SIZE }
    }
}

impl McpSettings {
    /// Reads the settings through `lookup` (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ServeError> {
        let list = |name: &str| -> Vec<String> {
            lookup(name)
                .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let page_size = match lookup("MCP_PAGE_SIZE").map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()) {
            None => DEFAULT_MCP_PAGE_SIZE,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    return Err(ServeError::Config {
                        name: "MCP_PAGE_SIZE",
                        value: v,
                        reason: "expected a positive number of tools per tools/list page".to_owned(),
                    });
                }
            },
        };
        Ok(Self { allowed_origins: list("MCP_ALLOWED_ORIGINS"), allowed_hosts: list("MCP_ALLOWED_HOSTS"), page_size })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<McpSettings, ServeError> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        McpSettings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn lists_and_the_page_size_are_read_and_bad_sizes_named() {
        assert_eq!(read(&[]).unwrap(), McpSettings::default());
        let settings = read(&[
            ("MCP_ALLOWED_ORIGINS", " https://app.example.com, http://localhost:* ,"),
            ("MCP_ALLOWED_HOSTS", "localhost"),
            ("MCP_PAGE_SIZE", "2"),
        ])
        .unwrap();
        assert_eq!(settings.allowed_origins, ["https://app.example.com", "http://localhost:*"]);
        assert_eq!(settings.allowed_hosts, ["localhost"]);
        assert_eq!(settings.page_size, 2);
        for bad in ["0", "many", "-1"] {
            let error = read(&[("MCP_PAGE_SIZE", bad)]).unwrap_err().to_string();
            assert!(error.contains("MCP_PAGE_SIZE") && error.contains(bad), "{error}");
        }
    }
}
