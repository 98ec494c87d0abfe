//! How an MCP server is configured as a module: an entry of `MODULE_SERVICES`
//! (or the TOML `[module_services]` table) that is either a plain string
//! (`http://…` for a contract module, `mcp+http://…`/`mcp+https://…` for an
//! MCP server over streamable HTTP) or a table naming the server (`url` or a
//! stdio `command`), its headers or bearer token, and the permission,
//! approval and per-tool overrides its tools get (README "Adding an MCP
//! server to the fleet").

use std::collections::BTreeMap;
use std::fmt;

use module_sdk::Permission;
use module_sdk::contract::{RiskLevel, is_valid_name};
use reqwest::header::{HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;

use crate::config::{ConfigError, check_module, check_module_name, invalid};

/// The scheme prefix that marks an MCP server in a module's URL.
pub const MCP_SCHEME_PREFIX: &str = "mcp+";
/// The permission an MCP server's tools require unless its entry says otherwise.
pub const DEFAULT_MCP_PERMISSION: Permission = Permission::User;

/// How the orchestrator reaches one MCP server, and what its tools get.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerSettings {
    /// Streamable HTTP or a child process on stdio.
    pub transport: McpTransport,
    /// The module's description; the server's own instructions or name otherwise.
    pub description: Option<String>,
    /// `permission`: what every tool requires (default `user`).
    pub permission: Permission,
    /// `requires_approval`: whether every tool waits for the user's approval.
    pub requires_approval: Option<bool>,
    /// `risk_level`: every tool's risk level.
    pub risk_level: Option<RiskLevel>,
    /// `timeout_seconds`: every tool's timeout (capped by `MAX_TOOL_TIMEOUT`).
    pub timeout_seconds: Option<f64>,
    /// `[tools.<server's tool name>]`: what one tool gets instead.
    pub tools: BTreeMap<String, ToolOverride>,
}

/// Where an MCP server is.
#[derive(Clone, PartialEq)]
pub enum McpTransport {
    /// Streamable HTTP at `url` (without the `mcp+` prefix).
    Http {
        /// The endpoint, e.g. `http://127.0.0.1:8001/mcp`.
        url: String,
        /// `headers`: sent with every request (checked as HTTP headers).
        headers: BTreeMap<String, String>,
        /// `bearer_token`: sent as `Authorization: Bearer`.
        bearer_token: Option<String>,
    },
    /// A child process speaking MCP on its stdin and stdout, started by the
    /// orchestrator and killed with it.
    Stdio {
        /// `command`: the program and its arguments.
        command: Vec<String>,
        /// `env`: variables added to the child's environment.
        env: BTreeMap<String, String>,
    },
}

/// Secrets (headers, the token, the environment) are never printed.
impl fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Http { url, headers, bearer_token } => f
                .debug_struct("Http")
                .field("url", &display_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .field("bearer_token", &bearer_token.as_ref().map(|_| "<redacted>"))
                .finish(),
            Self::Stdio { command, env } => f
                .debug_struct("Stdio")
                .field("program", &command.first())
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// What one tool of an MCP server gets instead of the server's settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The tool's name in the fleet (after `module.`), for a server name that
    /// is not `^[a-z][a-z0-9_]{0,39}$`.
    pub name: Option<String>,
    /// The permission it requires.
    pub permission: Option<Permission>,
    /// Whether it waits for the user's approval.
    pub requires_approval: Option<bool>,
    /// Its risk level.
    pub risk_level: Option<RiskLevel>,
    /// Its timeout in seconds.
    pub timeout_seconds: Option<f64>,
}

impl McpServerSettings {
    /// The fleet's name (after `module.`) of the server's tool `tool`.
    pub fn exposed_name<'a>(&'a self, tool: &'a str) -> &'a str {
        self.tools.get(tool).and_then(|o| o.name.as_deref()).unwrap_or(tool)
    }

    /// The server's name of each of `tools` (the server's names) by its
    /// name in the fleet; an error naming both when two have one name
    /// (`[tools.<tool>] name` giving one tool another's name), as the fleet
    /// could not tell which one a call of it is for.
    pub fn listed_names<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut names = BTreeMap::new();
        for tool in tools {
            let exposed = self.exposed_name(tool);
            if let Some(other) = names.insert(exposed.to_owned(), tool.to_owned()) {
                return Err(format!("its tools {other:?} and {tool:?} both have the name `{exposed}` in the fleet"));
            }
        }
        Ok(names)
    }

    /// Each secret of the settings that an error message could repeat
    /// (the endpoint with its credentials, as given and as URL libraries
    /// print it; the bearer token; header values), with what to show instead.
    pub fn redactions(&self) -> Vec<(String, String)> {
        let McpTransport::Http { url, headers, bearer_token } = &self.transport else { return Vec::new() };
        let shown = display_url(url);
        let endpoint = shown.strip_prefix(MCP_SCHEME_PREFIX).unwrap_or(&shown).to_owned();
        let mut pairs = vec![(url.clone(), endpoint.clone())];
        if let Ok(parsed) = url::Url::parse(url) {
            pairs.push((parsed.to_string(), endpoint));
            // Clients print the URL in their own ways (reqwest: without the user, with the query).
            pairs.extend(parsed.query().map(|query| (format!("?{query}"), String::new())));
            pairs.extend(parsed.password().map(|password| (password.to_owned(), "<password>".to_owned())));
        }
        pairs.extend(bearer_token.iter().map(|token| (token.clone(), "<bearer token>".to_owned())));
        pairs.extend(headers.iter().map(|(name, value)| (value.clone(), format!("<{name}>"))));
        // Longest first, so a secret inside another is not half replaced.
        pairs.retain(|(secret, shown)| !secret.is_empty() && secret != shown);
        pairs.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
        pairs
    }

    /// `text` with every secret of [`Self::redactions`] replaced.
    pub fn redact(&self, text: &str) -> String {
        self.redactions().iter().fold(text.to_owned(), |text, (secret, shown)| text.replace(secret, shown))
    }
}

/// The table form of an MCP server entry, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpTable {
    url: Option<String>,
    command: Option<Vec<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    bearer_token: Option<String>,
    description: Option<String>,
    permission: Option<Permission>,
    requires_approval: Option<bool>,
    risk_level: Option<RiskLevel>,
    timeout_seconds: Option<f64>,
    #[serde(default)]
    tools: BTreeMap<String, ToolOverride>,
}

/// The modules of `MODULE_SERVICES`: every module's URL as `GET /modules`
/// shows it (for an MCP server, without credentials), and the MCP servers' settings.
pub type ModuleEntries = (BTreeMap<String, String>, BTreeMap<String, McpServerSettings>);

/// Reads every entry of `MODULE_SERVICES` (name -> URL string or MCP table).
pub fn read_modules(entries: BTreeMap<String, Value>) -> Result<ModuleEntries, ConfigError> {
    let mut urls = BTreeMap::new();
    let mut servers = BTreeMap::new();
    for (name, value) in entries {
        let (url, server) = read_module(&name, value)?;
        urls.insert(name.clone(), url);
        if let Some(server) = server {
            servers.insert(name, server);
        }
    }
    Ok((urls, servers))
}

/// One entry: its shown URL and, for an MCP server, its settings.
fn read_module(name: &str, value: Value) -> Result<(String, Option<McpServerSettings>), ConfigError> {
    // Never the table itself, nor an MCP URL's credentials, in an error message.
    let entry = match &value {
        Value::String(url) if url.starts_with(MCP_SCHEME_PREFIX) => format!("{name}={}", display_url(url)),
        Value::String(url) => format!("{name}={url}"),
        _ => format!("{name}=<table>"),
    };
    let error = |reason: String| invalid("MODULE_SERVICES", &entry, reason);
    let table = match value {
        Value::String(url) if url.starts_with(MCP_SCHEME_PREFIX) => McpTable { url: Some(url), ..McpTable::default() },
        Value::String(url) => return check_module(name, &url).map(|url| (url, None)),
        Value::Object(_) => serde_json::from_value(value)
            .map_err(|e| error(format!("the MCP server table of `{name}` is not valid: {e}")))?,
        _ => return Err(error(format!("`{name}` must be a base URL or an MCP server table"))),
    };
    check_module_name(name, &entry)?;
    let transport = match (table.url, table.command) {
        (Some(url), None) => {
            let url = http_url(name, &url).map_err(error)?;
            for (header, value) in &table.headers {
                if HeaderName::from_bytes(header.as_bytes()).is_err() || HeaderValue::from_str(value).is_err() {
                    return Err(error(format!("header `{header}` of `{name}` is not a valid HTTP header")));
                }
            }
            McpTransport::Http { url, headers: table.headers, bearer_token: table.bearer_token }
        }
        (None, Some(command)) if command.first().is_some_and(|program| !program.is_empty()) => {
            McpTransport::Stdio { command, env: table.env }
        }
        (None, Some(_)) => return Err(error(format!("the `command` of `{name}` must name a program"))),
        _ => return Err(error(format!("the MCP server `{name}` needs exactly one of `url` and `command`"))),
    };
    let timeouts = std::iter::once(table.timeout_seconds).chain(table.tools.values().map(|o| o.timeout_seconds));
    if timeouts.flatten().any(|seconds| !(seconds.is_finite() && seconds > 0.0)) {
        return Err(error(format!("the timeout_seconds of `{name}` must be positive numbers")));
    }
    if let Some(bad) = table.tools.values().filter_map(|o| o.name.as_deref()).find(|n| !is_valid_name(n)) {
        return Err(error(format!("tool name `{bad}` of `{name}` must match ^[a-z][a-z0-9_]{{0,39}}$")));
    }
    let settings = McpServerSettings {
        transport,
        description: table.description,
        permission: table.permission.unwrap_or(DEFAULT_MCP_PERMISSION),
        requires_approval: table.requires_approval,
        risk_level: table.risk_level,
        timeout_seconds: table.timeout_seconds,
        tools: table.tools,
    };
    let shown = match &settings.transport {
        McpTransport::Http { url, .. } => display_url(url),
        McpTransport::Stdio { command, .. } => format!("{MCP_SCHEME_PREFIX}stdio:{}", command[0]),
    };
    Ok((shown, Some(settings)))
}

/// The http(s) endpoint of an MCP server's `url` (`mcp+http://…`, or in
/// the table form also `http://…`).
fn http_url(name: &str, url: &str) -> Result<String, String> {
    let endpoint = url.strip_prefix(MCP_SCHEME_PREFIX).unwrap_or(url);
    match url::Url::parse(endpoint) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => Ok(endpoint.to_owned()),
        _ => Err(format!(
            "the URL of the MCP server `{name}` must be mcp+http:// or mcp+https:// such as mcp+http://127.0.0.1:8001/mcp"
        )),
    }
}

/// `url` as shown in `GET /modules`: `mcp+` then the endpoint without user,
/// password or query (where credentials may hide).
fn display_url(url: &str) -> String {
    match url::Url::parse(url.strip_prefix(MCP_SCHEME_PREFIX).unwrap_or(url)) {
        Ok(mut parsed) => {
            // Both only fail for URLs that cannot have credentials at all.
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            format!("{MCP_SCHEME_PREFIX}{parsed}")
        }
        Err(_) => format!("{MCP_SCHEME_PREFIX}<invalid URL>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(entries: Value) -> Result<ModuleEntries, ConfigError> {
        read_modules(serde_json::from_value(entries).unwrap())
    }

    #[test]
    fn strings_and_tables_make_http_modules_and_mcp_servers() {
        let (urls, servers) = read(json!({
            "notes": "http://127.0.0.1:8001/",
            "github": "mcp+https://user:secret@example.com/mcp?key=abc",
            "files": {
                "command": ["npx", "-y", "server-filesystem", "/data"],
                "permission": "admin",
                "tools": {"delete-file": {"name": "delete_file", "requires_approval": true}}
            }
        }))
        .unwrap();
        assert_eq!(urls["notes"], "http://127.0.0.1:8001");
        assert_eq!(urls["github"], "mcp+https://example.com/mcp", "no credentials shown");
        assert_eq!(urls["files"], "mcp+stdio:npx");
        assert!(!servers.contains_key("notes"));
        let github = &servers["github"];
        assert_eq!(github.permission, Permission::User);
        assert!(
            matches!(&github.transport, McpTransport::Http { url, .. } if url == "https://user:secret@example.com/mcp?key=abc")
        );
        let files = &servers["files"];
        assert_eq!(files.permission, Permission::Admin);
        assert_eq!(files.exposed_name("delete-file"), "delete_file");
        assert_eq!(files.exposed_name("read_file"), "read_file");
    }

    #[test]
    fn two_tools_given_one_name_in_the_fleet_are_refused() {
        let (_, servers) = read(json!({"gh": {
            "url": "mcp+http://127.0.0.1:1/mcp",
            "tools": {"delete-repository": {"name": "delete_repository", "permission": "admin"}}
        }}))
        .unwrap();
        let gh = &servers["gh"];
        let names = gh.listed_names(["delete-repository", "list"]).unwrap();
        assert_eq!(names["delete_repository"], "delete-repository");
        let error = gh.listed_names(["delete_repository", "delete-repository"]).unwrap_err();
        assert!(error.contains(r#""delete_repository" and "delete-repository""#), "{error}");
    }

    #[test]
    fn the_toml_file_takes_both_forms_and_the_environment_takes_tables_too() {
        use std::io::Write;
        let toml = r#"
            [module_services]
            notes = "http://127.0.0.1:8001"
            github = "mcp+http://127.0.0.1:8002/mcp"
            [module_services.files]
            command = ["server-files", "--root", "/data"]
            env = { LOG = "warn" }
            requires_approval = true
            [module_services.files.tools.rm]
            permission = "owner"
        "#;
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(toml.as_bytes()).unwrap();
        let config = crate::Config::from_sources(Some(file.path()), |_| None).unwrap();
        assert_eq!(config.module_services.keys().collect::<Vec<_>>(), ["files", "github", "notes"]);
        assert_eq!(config.mcp_servers.keys().collect::<Vec<_>>(), ["files", "github"]);
        let files = &config.mcp_servers["files"];
        assert_eq!((files.requires_approval, files.tools["rm"].permission), (Some(true), Some(Permission::Owner)));
        assert!(
            matches!(&files.transport, McpTransport::Stdio { command, env } if command[2] == "/data" && env["LOG"] == "warn")
        );

        let env = r#"{"gh": {"url": "mcp+http://127.0.0.1:8002/mcp", "bearer_token": "t"}}"#;
        let config =
            crate::Config::from_sources(None, |name| (name == "MODULE_SERVICES").then(|| env.to_owned())).unwrap();
        assert!(
            matches!(&config.mcp_servers["gh"].transport, McpTransport::Http { bearer_token: Some(t), .. } if t == "t")
        );
        let error = crate::Config::from_sources(Some(file.path()), |name| {
            (name == "MODULE_SERVICES")
                .then(|| r#"{"gh": {"url": "mcp+http://x/mcp", "bearer_token": "t0ken", "extra": 1}}"#.to_owned())
        })
        .unwrap_err()
        .to_string();
        assert!(error.contains("extra") && !error.contains("t0ken"), "the table is not echoed: {error}");
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let (_, servers) = read(
            json!({"gh": {"url": "mcp+https://example.com/mcp", "bearer_token": "tok3n", "headers": {"x-key": "k3y"}}}),
        )
        .unwrap();
        let printed = format!("{:?}", servers["gh"]);
        assert!(!printed.contains("tok3n") && !printed.contains("k3y") && printed.contains("x-key"), "{printed}");
    }

    #[test]
    fn error_messages_lose_the_credentials() {
        let (_, servers) = read(json!({"gh": {
            "url": "mcp+https://user:pa55@example.com/mcp?key=k3y",
            "bearer_token": "tok3n",
            "headers": {"x-api-key": "h3ader"}
        }}))
        .unwrap();
        let message = "for url (https://user:pa55@example.com/mcp?key=k3y): tok3n h3ader; for url (https://example.com/mcp?key=k3y) pa55";
        let redacted = servers["gh"].redact(message);
        assert_eq!(
            redacted,
            "for url (https://example.com/mcp): <bearer token> <x-api-key>; for url (https://example.com/mcp) <password>"
        );
    }

    #[test]
    fn bad_entries_say_what_to_fix() {
        let cases = [
            (json!({"gh": "mcp+ftp://example.com"}), "mcp+http://"),
            (json!({"Gh": "mcp+http://example.com/mcp"}), "must match"),
            (json!({"gh": {"url": "http://x/mcp", "command": ["x"]}}), "exactly one of `url` and `command`"),
            (json!({"gh": {}}), "exactly one of `url` and `command`"),
            (json!({"gh": {"command": []}}), "must name a program"),
            (json!({"gh": {"url": "http://x/mcp", "permision": "admin"}}), "permision"),
            (json!({"gh": {"url": "http://x/mcp", "permission": "root"}}), "root"),
            (json!({"gh": {"url": "http://x/mcp", "headers": {"bad header": "x"}}}), "bad header"),
            (json!({"gh": {"url": "http://x/mcp", "timeout_seconds": -1}}), "timeout_seconds"),
            (json!({"gh": {"url": "http://x/mcp", "tools": {"a-b": {"name": "A-B"}}}}), "A-B"),
            (json!({"gh": 3}), "MCP server table"),
        ];
        for (entries, expected) in cases {
            let error = read(entries.clone()).unwrap_err().to_string();
            assert!(error.contains("MODULE_SERVICES") && error.contains(expected), "{entries}: {error}");
        }
    }
}
