//! The module a catalog makes: one SDK tool per skill tool, plus
//! `list_skills`; a tool the SDK refuses is left out with a reason.

use std::sync::Arc;

use module_sdk::{Context, Module, Tool, ToolError, tool};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::arguments::input_schema;
use crate::catalog::{Catalog, SkillSummary, SkillTool};
use crate::runner::{SkillOutput, run};
use crate::skill_file::Problem;

/// The module's name, the prefix of every tool.
pub const MODULE_NAME: &str = "skills";

const MODULE_DESCRIPTION: &str =
    "Run the team's command-line scripts, described by SKILL.toml files, as typed and contained tools.";

/// What `list_skills` answers.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkillList {
    /// The skills loaded, with their tools.
    pub skills: Vec<SkillSummary>,
    /// Files and tools skipped, and warnings, each with file, line and reason.
    pub problems: Vec<Problem>,
}

/// No arguments.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArguments {}

/// List the skills loaded from SKILLS_DIR, their tools, and the problems
/// found in SKILL.toml files (skipped files, undocumented placeholders).
#[tool(read_only, idempotent)]
async fn list_skills(ctx: Context, _args: NoArguments) -> Result<SkillList, ToolError> {
    Ok(ctx.state::<SkillList>()?.as_ref().clone())
}

/// The SDK tool running `tool`.
fn sdk_tool(tool: SkillTool) -> Tool {
    let schema = input_schema(&tool.arguments);
    let name = tool.name.clone();
    let description = tool.description.clone();
    let (timeout, permission) = (tool.timeout, tool.permission);
    let flags = (tool.read_only, tool.destructive, tool.requires_approval);
    let tool = Arc::new(tool);
    let handler = move |_ctx: Context, arguments: Map<String, Value>| {
        let tool = tool.clone();
        async move { run(&tool, arguments).await }
    };
    let mut sdk_tool = Tool::new::<_, Map<String, Value>, SkillOutput>(name, description, handler)
        .input_schema(schema)
        .timeout(timeout)
        .permission(permission);
    if flags.0 {
        sdk_tool = sdk_tool.read_only();
    }
    if flags.1 {
        sdk_tool = sdk_tool.destructive();
    }
    if flags.2 {
        sdk_tool = sdk_tool.requires_approval();
    }
    sdk_tool
}

/// The module serving `catalog`. Each tool is checked alone first, so one
/// the contract refuses is skipped (and listed as a problem) without
/// taking the others down.
pub fn module(catalog: Catalog) -> Module {
    let Catalog { tools, mut skills, mut problems } = catalog;
    let mut accepted = Vec::new();
    for tool in tools {
        let name = tool.name.clone();
        let file = tool.file.clone();
        let sdk_tool = sdk_tool(tool);
        match Module::new(MODULE_NAME, MODULE_DESCRIPTION).tool(sdk_tool.clone()).build() {
            Ok(_) => accepted.push(sdk_tool),
            Err(error) => {
                let full = format!("{MODULE_NAME}.{name}");
                for skill in &mut skills {
                    skill.tools.retain(|t| *t != full);
                }
                let reason = format!("tool `{full}` refused by the contract check: {error}");
                problems.push(Problem { file, line: 0, column: 0, reason });
            }
        }
    }
    let list = SkillList { skills, problems };
    let mut module =
        Module::new(MODULE_NAME, MODULE_DESCRIPTION).version(env!("CARGO_PKG_VERSION")).tool(list_skills).state(list);
    for tool in accepted {
        module = module.tool(tool);
    }
    module
}
