//! The module a catalog makes: one SDK tool per skill tool, plus
//! `list_skills`; a tool the SDK refuses is left out with a reason.

use std::sync::Arc;

use module_sdk::{Context, Module, Tool, ToolError, tool};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::arguments::input_schema;
use crate::catalog::{Catalog, SkillSummary, SkillTool, over_the_cap};
use crate::runner::{SkillOutput, run};
use crate::skill_file::Problem;
use crate::slots::RunSlots;

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
    let handler = move |ctx: Context, arguments: Map<String, Value>| {
        let tool = tool.clone();
        async move { run(&tool, arguments, &*ctx.state::<RunSlots>()?).await }
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
/// taking the others down. Skills are taken whole, in the catalog's order,
/// while their tools' manifest entries fit in `max_manifest_bytes`
/// (`SKILLS_MAX_MANIFEST_BYTES`) together; the first that does not, and
/// every later one, are problems instead. Scripts run in `slots`.
pub fn module(catalog: Catalog, max_manifest_bytes: u64, slots: RunSlots) -> Module {
    let Catalog { tools, mut skills, mut problems } = catalog;
    // The catalog's own problems are logged by its discovery.
    let logged = problems.len();
    let mut accepted = Vec::new();
    let mut manifest_bytes = 0_u64;
    let mut full = false;
    // A skill's tools are next to each other in the catalog.
    for skill_tools in tools.chunk_by(|a, b| a.file == b.file) {
        let file = skill_tools[0].file.clone();
        if full {
            problems.push(Problem {
                file,
                line: 0,
                column: 0,
                reason: over_the_cap("SKILLS_MAX_MANIFEST_BYTES", max_manifest_bytes),
            });
            skills.retain(|skill| skill.file != skill_tools[0].file);
            continue;
        }
        let mut checked = Vec::new();
        let mut bytes = 0_u64;
        for tool in skill_tools {
            let sdk_tool = sdk_tool(tool.clone());
            match Module::new(MODULE_NAME, MODULE_DESCRIPTION).tool(sdk_tool.clone()).build() {
                Ok(alone) => {
                    // Its entry in the manifest, as served.
                    let entry = serde_json::to_vec(&alone.manifest().tools).map_or(0, |json| json.len());
                    bytes += u64::try_from(entry).unwrap_or(u64::MAX);
                    checked.push(sdk_tool);
                }
                Err(error) => {
                    let full_name = format!("{MODULE_NAME}.{}", tool.name);
                    for skill in &mut skills {
                        skill.tools.retain(|t| *t != full_name);
                    }
                    let reason = format!("tool `{full_name}` refused by the contract check: {error}");
                    problems.push(Problem { file: tool.file.clone(), line: 0, column: 0, reason });
                }
            }
        }
        if manifest_bytes + bytes > max_manifest_bytes {
            let reason = format!(
                "not loaded: its tools' manifest entries ({bytes} bytes) would make {}, over \
                 SKILLS_MAX_MANIFEST_BYTES ({max_manifest_bytes}); raise it (below the orchestrator's \
                 MAX_MANIFEST_BYTES), shorten the descriptions, or move skills out of SKILLS_DIR",
                manifest_bytes + bytes
            );
            problems.push(Problem { file, line: 0, column: 0, reason });
            skills.retain(|skill| skill.file != skill_tools[0].file);
            full = true;
            continue;
        }
        manifest_bytes += bytes;
        accepted.extend(checked);
    }
    for problem in &problems[logged..] {
        problem.log();
    }
    let list = SkillList { skills, problems };
    let mut module = Module::new(MODULE_NAME, MODULE_DESCRIPTION)
        .version(env!("CARGO_PKG_VERSION"))
        .tool(list_skills)
        .state(list)
        .state(slots);
    for tool in accepted {
        module = module.tool(tool);
    }
    module
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use serde_json::json;

    use super::*;
    use crate::settings::Settings;

    #[tokio::test]
    async fn skills_past_the_manifest_budget_are_reported_and_the_earlier_ones_served() {
        let root = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c", "d"] {
            let description = if name == "c" { "Long. ".repeat(200) } else { "Short.".to_owned() };
            let text = format!(
                "[skill]\nname = \"{name}\"\n[[tools]]\nname = \"t\"\ndescription = \"{description}\"\ncommand = \"true\"\n"
            );
            std::fs::create_dir(root.path().join(name)).unwrap();
            std::fs::write(root.path().join(name).join("SKILL.toml"), text).unwrap();
        }
        let settings = Settings::try_parse_from(["skills", "--skills-dir", root.path().to_str().unwrap()]).unwrap();
        let catalog = Catalog::discover(&settings);
        // What the module counts for a tool: its manifest entry, as served.
        let measure = |tool: &SkillTool| {
            let client =
                module(Catalog { tools: vec![tool.clone()], ..Catalog::default() }, u64::MAX, RunSlots::new(1));
            let client = client.test_client().unwrap();
            u64::try_from(serde_json::to_vec(&client.manifest().tools[1..]).unwrap().len()).unwrap()
        };
        // Room for `a` and `b`, not for `c` (nor for `d`, were `c` left out).
        let budget = measure(&catalog.tools[0]) + measure(&catalog.tools[1]) + 1;
        let client = module(catalog, budget, RunSlots::new(1)).test_client().unwrap();
        let names: Vec<&str> = client.manifest().tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["skills.list_skills", "skills.a_t", "skills.b_t"]);
        let listed = client.call("list_skills", json!({})).await.result;
        let skills: Vec<&str> =
            listed["skills"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
        assert_eq!(skills, ["a", "b"]);
        let problems = listed["problems"].as_array().unwrap();
        assert_eq!(problems.len(), 2, "{listed}");
        assert_eq!(problems[0]["file"], "c/SKILL.toml");
        assert!(
            problems[0]["reason"].as_str().unwrap().contains(&format!("over SKILLS_MAX_MANIFEST_BYTES ({budget})"))
        );
        assert_eq!(problems[1]["file"], "d/SKILL.toml");
        assert!(problems[1]["reason"].as_str().unwrap().contains("did not fit under SKILLS_MAX_MANIFEST_BYTES"));
    }
}
