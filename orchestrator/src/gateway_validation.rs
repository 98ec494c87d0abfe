//! Validation at the gateway: a call's arguments are checked against the
//! tool's `input_schema` (built from `parameters` at discovery when a module
//! sends only those) before the call is forwarded, with the SDK's own
//! validator, so every module's callers get the same `invalid_arguments`
//! messages (JSON path, expected vs got) whether or not it uses the SDK.
//!
//! A tool's validator is compiled on its first call, on the blocking pool
//! (a large schema takes a while: the serving threads go on serving) with
//! every concurrent first caller awaiting that one compile, and kept until
//! its module's manifest changes. `GATEWAY_VALIDATION=false` turns the check
//! off; `SELF_VALIDATING_MODULES` turns it off for some modules only.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use module_sdk::contract::ModuleManifest;
use module_sdk::service::ArgumentValidator;
use serde_json::Value;
use tokio::sync::OnceCell;

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

/// One manifest's validators, in the order of its tools, each compiled on
/// first use (`None`: the schema does not compile, so the module checks alone).
struct ManifestValidators {
    manifest: Arc<ModuleManifest>,
    /// Shared with the set of an equal manifest discovered later.
    tools: Arc<[OnceCell<Option<ArgumentValidator>>]>,
}

impl ManifestValidators {
    fn new(manifest: Arc<ModuleManifest>) -> Self {
        let tools = manifest.tools.iter().map(|_| OnceCell::new()).collect();
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
    /// place: `Err` with the problems (`arguments.<path>: expected ..., got
    /// ...`) when they do not fit the tool's `input_schema`. `Ok` when
    /// validation is off for the module or the tool has no usable schema.
    /// The first call of a tool waits for its validator's compile.
    pub async fn check(&self, route: &ToolRoute, arguments: &mut CallArguments<'_>) -> Result<(), String> {
        if !self.settings.applies_to(&route.module) {
            return Ok(());
        }
        let (manifest, index) = route.manifest();
        let validators = self.validators_of(&route.module, manifest);
        let Some(slot) = validators.tools.get(index) else { return Ok(()) };
        // Once compiled, a read without a lock: the routing hot path. The
        // first call's wait is boxed, so every call's future stays small.
        let compiled = match slot.get() {
            Some(compiled) => compiled,
            None => Box::pin(slot.get_or_init(|| compile_off_thread(route.clone()))).await,
        };
        let Some(validator) = compiled else { return Ok(()) };
        match arguments {
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
        }
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
    /// Whether a compile of [`GATED`] may finish.
    static GATE: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());
    /// A tool whose compile waits for [`GATE`]: a deliberately slow compile.
    const GATED: &str = "gated.slow";

    /// Called by every compile: recorded; a compile of [`GATED`] waits for
    /// the gate (at most 5 s: one blocking the test's own thread fails the
    /// test instead of hanging it).
    pub(super) fn observe_compile(tool: &str) {
        COMPILES.lock().unwrap().push((tool.to_owned(), std::thread::current().id()));
        if tool == GATED {
            let (open, opened) = &GATE;
            let open = open.lock().unwrap();
            drop(opened.wait_timeout_while(open, Duration::from_secs(5), |open| !*open).unwrap());
        }
    }

    fn compiles_of(tool: &str) -> Vec<ThreadId> {
        COMPILES.lock().unwrap().iter().filter(|(name, _)| name == tool).map(|(_, thread)| *thread).collect()
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
        let validators = Arc::new(GatewayValidators::new(GatewayValidationSettings::default()));
        let route = route_of(GATED, json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let mut callers = tokio::task::JoinSet::new();
        for n in 0..8 {
            let (validators, route) = (Arc::clone(&validators), route.clone());
            let n = if n == 0 { json!("zero") } else { json!(n) };
            callers.spawn(async move { validators.check(&route, &mut arguments(json!({ "n": n }))).await });
        }
        // Every caller starts; the compile waits for the gate while this task goes on.
        let compiled_on = loop {
            if let Some(thread) = compiles_of(GATED).first() {
                break *thread;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        assert_ne!(compiled_on, std::thread::current().id(), "compiled on the thread serving the call");
        *GATE.0.lock().unwrap() = true;
        GATE.1.notify_all();
        let outcomes = callers.join_all().await;
        let refused: Vec<&String> = outcomes.iter().filter_map(|outcome| outcome.as_ref().err()).collect();
        assert!(refused.len() == 1 && refused[0].contains("arguments.n"), "{outcomes:?}");
        let later = validators.check(&route, &mut arguments(json!({"n": "x"}))).await;
        assert!(later.is_err_and(|problems| problems.contains("arguments.n")));
        assert_eq!(compiles_of(GATED).len(), 1, "one compile for every call");
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
