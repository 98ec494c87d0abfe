//! Validation at the gateway: a call's arguments are checked against the
//! tool's `input_schema` (built from `parameters` at discovery when a module
//! sends only those) before the call is forwarded, with the SDK's own
//! validator, so every module's callers get the same `invalid_arguments`
//! messages (JSON path, expected vs got) whether or not it uses the SDK.
//!
//! A tool's validator is compiled on its first call, on the blocking pool
//! (a large schema takes a while: the serving threads go on serving), by one
//! task that the first caller starts and that a caller going away neither
//! stops nor starts again; every first caller awaits it until its call's
//! deadline. It is kept until its module's manifest changes.
//! `GATEWAY_VALIDATION=false` turns the check off; `SELF_VALIDATING_MODULES`
//! turns it off for some modules only.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use module_sdk::contract::ModuleManifest;
use module_sdk::service::ArgumentValidator;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::NameMap;
use crate::config::{ConfigError, invalid};
use crate::execute::CallArguments;
use crate::registry::ToolRoute;

/// Whether, and for which modules, arguments are validated at the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayValidationSettings {
    /// `GATEWAY_VALIDATION`: validate at all (default `true`).
    pub enabled: bool,
    /// `SELF_VALIDATING_MODULES`: modules whose calls are forwarded unchecked.
    pub self_validating: Vec<String>,
}

impl Default for GatewayValidationSettings {
    fn default() -> Self {
        Self { enabled: true, self_validating: Vec::new() }
    }
}

/// The gateway validation keys of the TOML configuration, as written.
#[derive(Debug, Default)]
pub struct GatewayValidationFile {
    /// `gateway_validation`.
    pub gateway_validation: Option<bool>,
    /// `self_validating_modules`.
    pub self_validating_modules: Option<Vec<String>>,
}

impl GatewayValidationSettings {
    /// The file's values overlaid by `env` (a comma-separated list for
    /// `SELF_VALIDATING_MODULES`), every named module one of `modules`.
    pub fn read(
        file: GatewayValidationFile,
        env: &dyn Fn(&str) -> Option<String>,
        modules: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let enabled = match env("GATEWAY_VALIDATION") {
            Some(text) => text
                .parse::<bool>()
                .map_err(|_| invalid("GATEWAY_VALIDATION", &text, "expected true or false".into()))?,
            None => file.gateway_validation.unwrap_or(true),
        };
        let self_validating: Vec<String> = match env("SELF_VALIDATING_MODULES") {
            Some(text) => text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
            None => file.self_validating_modules.unwrap_or_default(),
        };
        if let Some(unknown) = self_validating.iter().find(|name| !modules.contains_key(*name)) {
            return Err(invalid(
                "SELF_VALIDATING_MODULES",
                &self_validating.join(","),
                format!("`{unknown}` is not a module of MODULE_SERVICES"),
            ));
        }
        Ok(Self { enabled, self_validating })
    }

    /// Whether calls to `module` are validated here.
    pub fn applies_to(&self, module: &str) -> bool {
        self.enabled && !self.self_validating.iter().any(|name| name == module)
    }
}

/// Why [`GatewayValidators::check`] did not let a call's arguments through.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsRefused {
    /// They do not fit the tool's `input_schema`: the problems
    /// (`arguments.<path>: expected ..., got ...`).
    #[error("{0}")]
    Invalid(String),
    /// The tool's validator, compiled on its first call, was not ready by
    /// the call's deadline.
    #[error("the validator of the tool's input_schema was still being compiled")]
    StillCompiling,
}

/// One tool's validator, compiled once, by a task of its own.
struct ToolValidator {
    /// The validator (`None`: no schema, one that does not compile, or a
    /// compile that panicked, so the module checks alone); set once, by the
    /// compile task, and read with one atomic load.
    compiled: OnceLock<Option<ArgumentValidator>>,
    /// Whether the compile task was started: only by the first caller.
    started: AtomicBool,
    /// `true` once `compiled` is set, for the callers awaiting it.
    done: watch::Sender<bool>,
}

impl ToolValidator {
    fn new() -> Self {
        Self { compiled: OnceLock::new(), started: AtomicBool::new(false), done: watch::Sender::new(false) }
    }
}

/// One manifest's validators, in the order of its tools, each compiled on
/// first use.
struct ManifestValidators {
    manifest: Arc<ModuleManifest>,
    /// Shared with the set of an equal manifest discovered later.
    tools: Arc<[ToolValidator]>,
}

impl ManifestValidators {
    fn new(manifest: Arc<ModuleManifest>) -> Self {
        let tools = manifest.tools.iter().map(|_| ToolValidator::new()).collect();
        Self { manifest, tools }
    }
}

/// The compiled validators of every module's current manifest.
pub struct GatewayValidators {
    settings: GatewayValidationSettings,
    modules: RwLock<NameMap<Arc<ManifestValidators>>>,
}

impl GatewayValidators {
    /// No validator compiled yet; `settings` says which modules are checked.
    pub fn new(settings: GatewayValidationSettings) -> Self {
        Self { settings, modules: RwLock::default() }
    }

    /// Checks `arguments` of a call routed by `route`, a tree or read in
    /// place: [`ArgumentsRefused::Invalid`] with the problems when they do
    /// not fit the tool's `input_schema`. `Ok` when validation is off for the
    /// module or the tool has no usable schema. The first calls of a tool wait
    /// for its validator's compile until `deadline`, the call's own, and are
    /// [`ArgumentsRefused::StillCompiling`] past it.
    pub async fn check(
        &self,
        route: &ToolRoute,
        arguments: &mut CallArguments<'_>,
        deadline: Instant,
    ) -> Result<(), ArgumentsRefused> {
        if !self.settings.applies_to(&route.module) {
            return Ok(());
        }
        let (manifest, index) = route.manifest();
        let validators = self.validators_of(&route.module, manifest);
        let Some(slot) = validators.tools.get(index) else { return Ok(()) };
        // Once compiled, a read without a lock: the routing hot path. The
        // first calls' wait is boxed, so every call's future stays small.
        let compiled = match slot.compiled.get() {
            Some(compiled) => compiled,
            None => Box::pin(first_compile(&validators.tools, index, route, deadline))
                .await
                .ok_or(ArgumentsRefused::StillCompiling)?,
        };
        let Some(validator) = compiled else { return Ok(()) };
        let outcome = match arguments {
            CallArguments::InPlace { value, .. } => validator.check_in_place(value),
            CallArguments::Tree(tree) => {
                // Checked as a JSON object without copying the tree: moved in and back out.
                let value = Value::Object(std::mem::take(tree));
                let outcome = validator.check(&value);
                if let Value::Object(map) = value {
                    *tree = map;
                }
                outcome
            }
        };
        outcome.map_err(ArgumentsRefused::Invalid)
    }

    /// The validators of `manifest`, module `module`'s current one; a new
    /// set when the manifest changed since the last call.
    fn validators_of(&self, module: &str, manifest: &Arc<ModuleManifest>) -> Arc<ManifestValidators> {
        let current = |entry: &ManifestValidators| Arc::ptr_eq(&entry.manifest, manifest);
        if let Some(entry) = self.modules.read().unwrap_or_else(|p| p.into_inner()).get(module)
            && current(entry)
        {
            return Arc::clone(entry);
        }
        let mut modules = self.modules.write().unwrap_or_else(|p| p.into_inner());
        let entry =
            modules.entry(module.to_owned()).or_insert_with(|| Arc::new(ManifestValidators::new(manifest.clone())));
        if !current(entry) {
            // A rediscovered manifest equal to the last one keeps its compiled validators.
            *entry = if entry.manifest == *manifest {
                Arc::new(ManifestValidators { manifest: Arc::clone(manifest), tools: Arc::clone(&entry.tools) })
            } else {
                Arc::new(ManifestValidators::new(Arc::clone(manifest)))
            };
        }
        Arc::clone(entry)
    }
}

/// The validator of tool `index` of `tools` (routed by `route`), compiled
/// by one task that the first caller starts, awaited until `deadline`: `None`
/// past it. The task runs to its end whoever awaits it, so a caller that
/// goes away mid-compile does not make the next one compile again.
async fn first_compile<'a>(
    tools: &'a Arc<[ToolValidator]>,
    index: usize,
    route: &ToolRoute,
    deadline: Instant,
) -> Option<&'a Option<ArgumentValidator>> {
    let slot = &tools[index];
    let mut done = slot.done.subscribe();
    if !slot.started.swap(true, Ordering::AcqRel) {
        let (tools, route) = (Arc::clone(tools), route.clone());
        tokio::spawn(async move {
            let compiled = compile_off_thread(route).await;
            let slot = &tools[index];
            // This task is the only one that sets it.
            let _ = slot.compiled.set(compiled);
            slot.done.send_replace(true);
        });
    }
    // The sender lives in `slot`, so the wait ends only when the compile does, or at the deadline.
    tokio::time::timeout_at(deadline, done.wait_for(|done| *done)).await.ok()?.ok()?;
    slot.compiled.get()
}

/// [`compile`] on the blocking pool, not on the thread serving the call:
/// `None` (logged) when the compile panicked.
async fn compile_off_thread(route: ToolRoute) -> Option<ArgumentValidator> {
    let tool_name = route.tool().name.clone();
    tokio::task::spawn_blocking(move || compile(&route)).await.unwrap_or_else(|error| {
        tracing::warn!(tool = %tool_name, %error, "input_schema compile failed; the module validates alone");
        None
    })
}

/// The validator of the routed tool's `input_schema`, or `None` (logged)
/// when there is no schema or it does not compile.
fn compile(route: &ToolRoute) -> Option<ArgumentValidator> {
    let tool = route.tool();
    #[cfg(test)]
    tests::observe_compile(&tool.name);
    let schema = tool.input_schema.as_ref()?;
    match ArgumentValidator::new(schema) {
        Ok(validator) => Some(validator),
        Err(error) => {
            tracing::warn!(tool = %tool.name, %error, "input_schema does not compile; the module validates alone");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};
    use std::thread::ThreadId;
    use std::time::Duration;

    use module_sdk::Permission;
    use module_sdk::contract::ToolDefinition;
    use serde_json::json;

    use super::*;
    use crate::snapshot::{ModuleSnapshot, ModuleState, Snapshot};

    /// Every compile of a validator in these tests: the tool and the thread it ran on.
    static COMPILES: Mutex<Vec<(String, ThreadId)>> = Mutex::new(Vec::new());
    /// The tools of module `gated` whose compile may finish, and their opening.
    static OPENED: (Mutex<Vec<String>>, Condvar) = (Mutex::new(Vec::new()), Condvar::new());

    /// Called by every compile: recorded; a compile of a tool of module
    /// `gated`, a deliberately slow compile, waits until [`open`] lets it
    /// finish (at most 5 s: one blocking the test's own thread fails the test
    /// instead of hanging it); one of module `panics` panics.
    pub(super) fn observe_compile(tool: &str) {
        COMPILES.lock().unwrap().push((tool.to_owned(), std::thread::current().id()));
        if tool.starts_with("gated.") {
            let (opened, opening) = &OPENED;
            let opened = opened.lock().unwrap();
            let closed = |opened: &mut Vec<String>| !opened.iter().any(|name| name == tool);
            drop(opening.wait_timeout_while(opened, Duration::from_secs(5), closed).unwrap());
        }
        if tool.starts_with("panics.") {
            panic!("the compile of {tool} panics");
        }
    }

    /// Lets the compiles of `tool` finish.
    fn open(tool: &str) {
        OPENED.0.lock().unwrap().push(tool.to_owned());
        OPENED.1.notify_all();
    }

    fn compiles_of(tool: &str) -> Vec<ThreadId> {
        COMPILES.lock().unwrap().iter().filter(|(name, _)| name == tool).map(|(_, thread)| *thread).collect()
    }

    /// Waits until a compile of `tool` started; the thread it runs on.
    async fn compile_started(tool: &str) -> ThreadId {
        loop {
            if let Some(thread) = compiles_of(tool).first() {
                return *thread;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// A deadline no test reaches unless it hangs.
    fn far() -> Instant {
        Instant::now() + Duration::from_secs(20)
    }

    fn refused_for_n(outcome: &Result<(), ArgumentsRefused>) -> bool {
        matches!(outcome, Err(ArgumentsRefused::Invalid(problems)) if problems.contains("arguments.n"))
    }

    /// An object whose `n` is an integer.
    fn schema_n() -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }

    /// The route of `tool`, the only tool of its module, with `schema`.
    fn route_of(tool: &str, schema: Value) -> ToolRoute {
        let module = tool.split_once('.').unwrap().0;
        let mut definition = ToolDefinition::new(tool, "d", Permission::Guest);
        definition.input_schema = Some(schema);
        let manifest = ModuleManifest {
            module_name: module.to_owned(),
            description: String::new(),
            tools: vec![definition],
            version: None,
            contract_version: None,
        };
        let snapshot = ModuleSnapshot {
            name: module.into(),
            url: "http://m".into(),
            execute_url: "http://m/execute".into(),
            state: ModuleState::Up,
            manifest: Some(Arc::new(manifest)),
        };
        Snapshot::new(1, BTreeMap::from([(module.to_owned(), snapshot)])).route(tool).unwrap()
    }

    fn arguments(value: Value) -> CallArguments<'static> {
        CallArguments::Tree(value.as_object().unwrap().clone())
    }

    /// On a single-threaded runtime: if the compile ran on the serving
    /// thread, nothing else could run until it finished.
    #[tokio::test]
    async fn concurrent_first_calls_await_one_compile_run_off_the_serving_thread() {
        const TOOL: &str = "gated.slow";
        let validators = Arc::new(GatewayValidators::new(GatewayValidationSettings::default()));
        let route = route_of(TOOL, schema_n());
        let mut callers = tokio::task::JoinSet::new();
        for n in 0..8 {
            let (validators, route) = (Arc::clone(&validators), route.clone());
            let n = if n == 0 { json!("zero") } else { json!(n) };
            callers.spawn(async move { validators.check(&route, &mut arguments(json!({ "n": n })), far()).await });
        }
        // Every caller starts; the compile waits for the gate while this task goes on.
        let compiled_on = compile_started(TOOL).await;
        assert_ne!(compiled_on, std::thread::current().id(), "compiled on the thread serving the call");
        open(TOOL);
        let outcomes = callers.join_all().await;
        let refused: Vec<_> = outcomes.iter().filter(|outcome| outcome.is_err()).collect();
        assert!(refused.len() == 1 && refused_for_n(refused[0]), "{outcomes:?}");
        let later = validators.check(&route, &mut arguments(json!({"n": "x"})), far()).await;
        assert!(refused_for_n(&later), "{later:?}");
        assert_eq!(compiles_of(TOOL).len(), 1, "one compile for every call");
    }

    /// A client that disconnects drops its call's future: the compile it
    /// started goes on, and the next caller awaits that one.
    #[tokio::test]
    async fn a_first_caller_going_away_mid_compile_starts_no_second_compile() {
        const TOOL: &str = "gated.dropped";
        let validators = Arc::new(GatewayValidators::new(GatewayValidationSettings::default()));
        let route = route_of(TOOL, schema_n());
        let (first_validators, first_route) = (Arc::clone(&validators), route.clone());
        let first =
            tokio::spawn(
                async move { first_validators.check(&first_route, &mut arguments(json!({"n": 1})), far()).await },
            );
        compile_started(TOOL).await;
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        let mut next_arguments = arguments(json!({"n": "x"}));
        let next = validators.check(&route, &mut next_arguments, far());
        let opening = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            open(TOOL);
        };
        let (next, ()) = tokio::join!(next, opening);
        assert!(refused_for_n(&next), "{next:?}");
        assert_eq!(compiles_of(TOOL).len(), 1, "the dropped caller's compile was started again");
    }

    #[tokio::test]
    async fn a_first_call_awaits_the_compile_until_its_own_deadline_only() {
        const TOOL: &str = "gated.deadline";
        let validators = GatewayValidators::new(GatewayValidationSettings::default());
        let route = route_of(TOOL, schema_n());
        let started = Instant::now();
        let deadline = started + Duration::from_millis(100);
        let outcome = validators.check(&route, &mut arguments(json!({"n": "x"})), deadline).await;
        assert_eq!(outcome, Err(ArgumentsRefused::StillCompiling));
        // Not the 5 s the gate would hold it.
        assert!(started.elapsed() < Duration::from_secs(2), "waited {:?}", started.elapsed());
        open(TOOL);
        let later = validators.check(&route, &mut arguments(json!({"n": "x"})), far()).await;
        assert!(refused_for_n(&later), "{later:?}");
        assert_eq!(compiles_of(TOOL).len(), 1, "the compile outlived its first call, once");
    }

    /// A compile that panics is as a schema that does not compile: the
    /// module checks alone until its manifest changes, compiled once a manifest.
    #[tokio::test]
    async fn a_compile_that_panics_leaves_the_tool_to_its_module_until_its_manifest_changes() {
        const TOOL: &str = "panics.tool";
        let validators = GatewayValidators::new(GatewayValidationSettings::default());
        let route = route_of(TOOL, schema_n());
        for _ in 0..3 {
            assert_eq!(validators.check(&route, &mut arguments(json!({"n": "x"})), far()).await, Ok(()));
        }
        // Rediscovered as it was: the same validators, no compile.
        let rediscovered = route_of(TOOL, schema_n());
        assert_eq!(validators.check(&rediscovered, &mut arguments(json!({"n": "x"})), far()).await, Ok(()));
        assert_eq!(compiles_of(TOOL).len(), 1, "compiled once for its manifest");
        let changed = route_of(TOOL, json!({"type": "object"}));
        assert_eq!(validators.check(&changed, &mut arguments(json!({"n": "x"})), far()).await, Ok(()));
        assert_eq!(compiles_of(TOOL).len(), 2, "compiled once for the changed manifest");
    }

    fn read(file: GatewayValidationFile, vars: &[(&str, &str)]) -> Result<GatewayValidationSettings, ConfigError> {
        let modules = BTreeMap::from([("notes".to_owned(), "http://notes".to_owned())]);
        let env = |name: &str| vars.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned());
        GatewayValidationSettings::read(file, &env, &modules)
    }

    #[test]
    fn on_by_default_off_globally_or_per_module_and_unknown_modules_refused() {
        let default = read(GatewayValidationFile::default(), &[]).unwrap();
        assert!(default.applies_to("notes"));
        let off = read(GatewayValidationFile::default(), &[("GATEWAY_VALIDATION", "false")]).unwrap();
        assert!(!off.applies_to("notes"));
        let file =
            GatewayValidationFile { gateway_validation: None, self_validating_modules: Some(vec!["notes".into()]) };
        let per_module = read(file, &[]).unwrap();
        assert!(!per_module.applies_to("notes") && per_module.applies_to("other"));
        let error = read(GatewayValidationFile::default(), &[("SELF_VALIDATING_MODULES", "notes, nope")]).unwrap_err();
        assert!(error.to_string().contains("`nope` is not a module"), "{error}");
        assert!(read(GatewayValidationFile::default(), &[("GATEWAY_VALIDATION", "maybe")]).is_err());
    }
}
