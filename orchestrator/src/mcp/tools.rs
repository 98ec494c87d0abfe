//! One caller's tools as MCP lists them: the tools the caller may use,
//! each named in the provider-safe form `module__tool` ([`NameMap`]), so the
//! module is the prefix, as the MCP specification advises aggregators, and
//! listed in the order of those names. A `tools/list` cursor is the name the
//! next page starts at, so paging goes on correctly across a change of the
//! fleet: no tool present before and after is repeated or skipped (a new
//! one named before the cursor is left for the re-listing that
//! `notifications/tools/list_changed` asks for).
//!
//! Definitions stay in the registry's snapshot: listing or calling clones
//! none but the ones it answers with.

use std::sync::Arc;

use module_sdk::mcp::{McpTool, shown};
use rmcp::ErrorData;
use rmcp::model::Tool;

use crate::caller::Caller;
use crate::providers::names::NameMap;
use crate::snapshot::Snapshot;

/// The longest cursor read; this paging gives out tool names, which are shorter.
const MAX_CURSOR_BYTES: usize = 256;

/// Whether `cursor` can be a name this paging gave out: `module__tool` in the
/// provider-safe characters, within [`MAX_CURSOR_BYTES`].
fn is_tool_name(cursor: &str) -> bool {
    cursor.len() <= MAX_CURSOR_BYTES
        && cursor.contains("__")
        && cursor.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// The MCP view of one caller's tools in one snapshot of the fleet.
pub struct CallerTools {
    snapshot: Arc<Snapshot>,
    /// The MCP names of the caller's tools, both ways.
    names: NameMap,
}

impl CallerTools {
    /// The tools `caller` may use in `snapshot`.
    pub fn new(snapshot: Arc<Snapshot>, caller: &Caller) -> Self {
        let names = NameMap::of_names(snapshot.tools_for(caller).map(|found| found.tool.name.as_str()));
        Self { snapshot, names }
    }

    /// The page of at most `page_size` tools that starts at `cursor` (`None`:
    /// the first), and the cursor of the next page, if any.
    pub fn page(&self, cursor: Option<&str>, page_size: usize) -> Result<(Vec<Tool>, Option<String>), ErrorData> {
        // (MCP name, full name) of each tool, in the order of MCP names.
        let mut listed: Vec<(&str, &str)> = self.names.pairs().collect();
        listed.sort_unstable();
        let start = match cursor {
            None => 0,
            Some(cursor) if is_tool_name(cursor) => listed.partition_point(|(name, _)| *name < cursor),
            Some(cursor) => {
                let message =
                    format!("the cursor `{}` is not one this server gave out (a `module__tool` name)", shown(cursor));
                return Err(ErrorData::invalid_params(message, None));
            }
        };
        let end = start.saturating_add(page_size.max(1)).min(listed.len());
        let tools = listed[start..end]
            .iter()
            .filter_map(|(name, full_name)| {
                Some(McpTool::named((*name).to_owned(), self.snapshot.tool(full_name)?).listing)
            })
            .collect();
        Ok((tools, listed.get(end).map(|(name, _)| (*name).to_owned())))
    }

    /// The tool MCP calls `name` (`module__tool`), if the caller has it:
    /// its MCP name only, not its `module.tool` name.
    pub fn get(&self, name: &str) -> Option<McpTool> {
        let full_name = self.names.tool_for(name)?;
        (self.names.provider_name(full_name) == name).then_some(())?;
        Some(McpTool::named(name.to_owned(), self.snapshot.tool(full_name)?))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use module_sdk::Permission;
    use module_sdk::contract::{ModuleManifest, ToolDefinition};

    use super::*;
    use crate::snapshot::{ModuleSnapshot, ModuleState};

    /// A snapshot of modules `(name, tools)`, each tool guest-level but `wipe` (admin).
    fn snapshot(modules: &[(&str, &[&str])]) -> Arc<Snapshot> {
        let modules = modules.iter().map(|(module, tools)| {
            let tools = tools
                .iter()
                .map(|tool| {
                    let permission = if *tool == "wipe" { Permission::Admin } else { Permission::Guest };
                    ToolDefinition::new(format!("{module}.{tool}"), "Do it.", permission)
                })
                .collect();
            let manifest = ModuleManifest {
                module_name: (*module).to_owned(),
                description: "A module.".to_owned(),
                tools,
                version: None,
                contract_version: None,
            };
            let snapshot = ModuleSnapshot {
                name: (*module).into(),
                url: "http://127.0.0.1:1".into(),
                execute_url: "http://127.0.0.1:1/execute".into(),
                state: ModuleState::Up,
                manifest: Some(Arc::new(manifest)),
            };
            ((*module).to_owned(), snapshot)
        });
        Arc::new(Snapshot::new(1, BTreeMap::from_iter(modules)))
    }

    fn names(tools: &[Tool]) -> Vec<&str> {
        tools.iter().map(|tool| tool.name.as_ref()).collect()
    }

    #[test]
    fn tools_are_named_module_then_tool_listed_by_name_and_found_by_that_name_only() {
        let guest = Caller::new(Some("guest"), None);
        let tools = CallerTools::new(snapshot(&[("beta", &["plan_trip", "wipe"]), ("alpha", &["echo"])]), &guest);
        let (page, next) = tools.page(None, 10).unwrap();
        assert_eq!(names(&page), ["alpha__echo", "beta__plan_trip"], "the admin tool is not the guest's");
        assert_eq!(next, None);
        assert_eq!(page[1].title.as_deref(), Some("Plan trip"));
        assert_eq!(tools.get("beta__plan_trip").map(|tool| tool.full_name), Some("beta.plan_trip".to_owned()));
        assert!(tools.get("beta__wipe").is_none() && tools.get("gamma__echo").is_none());
        assert!(tools.get("beta.plan_trip").is_none(), "only the MCP name is a name here");
    }

    #[test]
    fn a_cursor_names_where_the_next_page_starts_even_after_the_fleet_changed() {
        let caller = Caller::new(Some("admin"), None);
        let before = CallerTools::new(snapshot(&[("alpha", &["a", "b"]), ("gamma", &["c", "d"])]), &caller);
        let (first, cursor) = before.page(None, 2).unwrap();
        assert_eq!((names(&first), cursor.as_deref()), (vec!["alpha__a", "alpha__b"], Some("gamma__c")));

        // A module joins before the cursor and another tool after it: the
        // second page neither repeats nor skips a tool the first did not list.
        let after = CallerTools::new(
            snapshot(&[("alpha", &["a", "b"]), ("beta", &["x"]), ("gamma", &["c", "d", "e"])]),
            &caller,
        );
        let (second, cursor) = after.page(cursor.as_deref(), 2).unwrap();
        assert_eq!((names(&second), cursor.as_deref()), (vec!["gamma__c", "gamma__d"], Some("gamma__e")));
        // The tool the cursor names is gone: the page starts at the one after it.
        let gone = CallerTools::new(snapshot(&[("alpha", &["a", "b"]), ("gamma", &["d", "e"])]), &caller);
        assert_eq!(names(&gone.page(Some("gamma__c"), 5).unwrap().0), ["gamma__d", "gamma__e"]);
        assert!(gone.page(Some("zzz__z"), 5).unwrap().0.is_empty());

        for refused in ["", "nope", "gamma.c", "gamma__c\"}", &format!("a__{}", "x".repeat(MAX_CURSOR_BYTES))] {
            assert!(gone.page(Some(refused), 5).is_err(), "{refused}");
        }
    }
}
