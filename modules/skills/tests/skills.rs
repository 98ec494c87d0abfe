//! Whole-process tests: the real `skills` binary over skills written by
//! the test into a temporary SKILLS_DIR, and the error naming a SKILLS_DIR
//! that is missing.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use test_support::Process;

/// A value the test's secret variable holds; it must never come back.
const SECRET: &str = "tk-9f8e7d6c5b4a-secret";

/// The probe skill: argv echo, a sleeper with a child, a flood, a secret printer.
const PROBE_SKILL: &str = r#"
[skill]
name = "probe"
description = "Tools that show what a script receives."
env = ["SKILLS_TEST_SECRET"]

[[tools]]
name = "echo"
description = "Print the arguments as JSON."
command = "python3 scripts/echo_args.py --value {value}"
[tools.args]
value = "Any text."

[[tools]]
name = "sort"
description = "Sort a file of the skill."
command = "sort {file}"
read_only = true
[tools.args]
file = "The file."

[[tools]]
name = "echo_any"
description = "Print the arguments as JSON; the script takes them by position."
command = "python3 scripts/echo_args.py {first} -- {rest}"
[tools.args]
first = { description = "Any text, dashes too.", allow_leading_dash = true }
rest = "Any text, after `--`."

[[tools]]
name = "sleeper"
description = "Start a child, then sleep past the timeout."
command = "sh scripts/sleeper.sh"
timeout_seconds = 1

[[tools]]
name = "flood"
description = "Print 50 MB."
command = "head -c 52428800 /dev/zero"
max_output_bytes = 1000

[[tools]]
name = "leak"
description = "Print secrets."
command = "python3 -c 'import os; print(\"value\", os.environ[\"SKILLS_TEST_SECRET\"], \"key AKIAIOSFODNN7EXAMPLE\")'"

[[tools]]
name = "escaper"
description = "Leave sleepers behind, out of the process group (one double-forked), then exit."
command = "sh scripts/escaper.sh {seconds}"
[tools.args]
seconds = { type = "integer", description = "How long the sleepers sleep." }

[[tools]]
name = "padded"
description = "Print padding, the secret, then more; cut at 40 bytes."
command = "python3 -c 'import os, sys; print(\".\" * int(sys.argv[1]) + os.environ[\"SKILLS_TEST_SECRET\"] + \"y\" * 50)' {pad}"
max_output_bytes = 40
[tools.args]
pad = { type = "integer", description = "Dots before the secret." }

[[tools]]
name = "digits"
description = "Print a long number; cut at 40 bytes."
command = "python3 -c 'print(\"7\" * 100)'"
max_output_bytes = 40

[[tools]]
name = "missing"
description = "A script that is not there."
command = "scripts/missing.sh"

[[tools]]
name = "instant"
description = "A timeout the contract refuses (it rounds to 0)."
command = "true"
timeout_seconds = 1e-300

[[tools]]
name = "fail"
description = "Fail with a message on stderr."
command = "python3 -c 'import sys; sys.exit(\"went wrong: password=hunter22\")'"
"#;

fn write(dir: &Path, relative: &str, text: &str) {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A SKILLS_DIR with the probe skill, and the module serving it.
fn start() -> (tempfile::TempDir, Process) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "probe/SKILL.toml", PROBE_SKILL);
    write(dir.path(), "probe/scripts/echo_args.py", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n");
    write(dir.path(), "probe/scripts/sleeper.sh", "sleep 30 &\necho $! > child.pid\nwait\n");
    write(
        dir.path(),
        "probe/scripts/escaper.sh",
        "setsid sleep \"$1\" </dev/null >/dev/null 2>&1 &\n\
         sh -c 'setsid sleep \"$1\" </dev/null >/dev/null 2>&1 &' sh \"$1\"\n\
         sleep 0.3\necho left\n",
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.env("SKILLS_DIR", dir.path()).env("SKILLS_TEST_SECRET", SECRET).env("SKILLS_WATCH_DEBOUNCE_MS", "100");
    (dir, Process::start(command))
}

fn tool_names(manifest: &Value) -> Vec<String> {
    manifest["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn hostile_values_arrive_as_one_literal_argument() {
    let (dir, module) = start();
    let client = module.client();
    let marker = dir.path().join("pwned");
    let m = marker.display();
    let values = [
        format!("; touch {m}"),
        format!("$(touch {m})"),
        format!("`touch {m}`"),
        format!("x | touch {m}"),
        format!("x && touch {m} > {m}"),
        format!("line one\nline two; touch {m}"),
        "*".to_owned(),
        "~".to_owned(),
        "~/x".to_owned(),
        "$HOME".to_owned(),
        "${PATH}".to_owned(),
        "{value}".to_owned(),
        "'\"\\".to_owned(),
        String::new(),
        "x".repeat(100 * 1024),
    ];
    for value in values {
        let result = client.call("skills.probe_echo", json!({"value": value}), None).await;
        assert_eq!(result["success"], true, "{result}");
        assert_eq!(result["result"]["stdout"], json!(["--value", value]), "for {:?}", &value[..value.len().min(40)]);
        assert_eq!(result["result"]["exit_code"], 0);
    }
    assert!(!marker.exists(), "a value ran a command");
}

#[tokio::test]
async fn a_value_that_would_be_an_option_is_refused_unless_the_skill_allows_it() {
    let (dir, module) = start();
    let client = module.client();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me\n").unwrap();
    for value in [format!("--output={}", victim.display()), "-".to_owned()] {
        let sort = client.call("skills.probe_sort", json!({"file": value}), None).await;
        assert_eq!(sort["error_kind"], "invalid_arguments", "{sort}");
        assert!(sort["error"].as_str().unwrap().contains("arguments.file: starts with `-`"), "{sort}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
    let flag = client.call("skills.probe_echo", json!({"value": "--flag-injection"}), None).await;
    assert_eq!(flag["error_kind"], "invalid_arguments", "{flag}");
    let allowed = client.call("skills.probe_echo_any", json!({"first": "-x", "rest": "--y"}), None).await;
    assert_eq!(allowed["result"]["stdout"], json!(["-x", "--", "--y"]), "{allowed}");
    let manifest = client.manifest().await;
    let sort = manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "skills.probe_sort").unwrap();
    let description = sort["input_schema"]["properties"]["file"]["description"].as_str().unwrap();
    assert!(description.contains("not starting with `-`"), "{description}");
}

#[tokio::test]
async fn values_no_argument_can_carry_are_refused_saying_why() {
    let (_dir, module) = start();
    let client = module.client();
    let manifest = client.manifest().await;
    let echo = manifest["tools"].as_array().unwrap().iter().find(|t| t["name"] == "skills.probe_echo").unwrap();
    assert_eq!(echo["input_schema"]["properties"]["value"]["maxLength"], 131_071);
    let nul = client.call("skills.probe_echo", json!({"value": "a\u{0}b"}), None).await;
    assert_eq!(nul["error_kind"], "invalid_arguments", "{nul}");
    assert!(nul["error"].as_str().unwrap().contains("NUL"), "{nul}");
    let long = client.call("skills.probe_echo", json!({"value": "x".repeat(131_072)}), None).await;
    assert_eq!(long["error_kind"], "invalid_arguments", "{long}");
    assert!(long["error"].as_str().unwrap().contains("131071"), "{long}");
    // Within maxLength in characters, over the kernel's limit in bytes.
    let wide = client.call("skills.probe_echo", json!({"value": "€".repeat(50_000)}), None).await;
    assert_eq!(wide["error_kind"], "invalid_arguments", "{wide}");
    assert!(wide["error"].as_str().unwrap().contains("150000 bytes"), "{wide}");
    let just_fits = client.call("skills.probe_echo", json!({"value": "x".repeat(131_071)}), None).await;
    assert_eq!(just_fits["success"], true, "{}", &just_fits.to_string()[..200]);
}

#[tokio::test]
async fn a_script_past_its_timeout_is_killed_with_its_children() {
    let (dir, module) = start();
    let started = Instant::now();
    let result = module.client().call("skills.probe_sleeper", json!({}), None).await;
    assert_eq!(result["error_kind"], "timeout", "{result}");
    assert!(result["error"].as_str().unwrap().contains("killed"), "{result}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let child: u32 = std::fs::read_to_string(dir.path().join("probe/child.pid")).unwrap().trim().parse().unwrap();
    assert_ends_within_two_seconds(child, "the script's child");
}

/// Waits up to two seconds for the process `pid` to be gone, or a zombie
/// waiting for its reaper: not running either way.
fn assert_ends_within_two_seconds(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        if stat.as_ref().map_or(true, |s| s.rsplit(") ").next().is_some_and(|rest| rest.starts_with('Z'))) {
            break;
        }
        assert!(Instant::now() < deadline, "{what} {pid} is still running: {stat:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn a_script_dies_with_a_module_killed_mid_call() {
    let dir = tempfile::tempdir().unwrap();
    let skill = "[skill]\nname = \"slow\"\n[[tools]]\nname = \"wait\"\ndescription = \"Sleep a minute.\"\n\
                 command = \"sh -c 'echo $$ > script.pid; exec sleep 60'\"\ntimeout_seconds = 120\n";
    write(dir.path(), "slow/SKILL.toml", skill);
    let mut module = serve(dir.path());
    let client = module.client();
    let call = tokio::spawn(async move { client.try_call("skills.slow_wait", json!({}), None).await.is_ok() });
    let pid_file = dir.path().join("slow/script.pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    let script = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file).ok().and_then(|text| text.trim().parse().ok()) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the script did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    module.kill();
    assert!(!call.await.unwrap(), "the call was answered by a killed module");
    assert_ends_within_two_seconds(script, "the script of a killed module");
}

#[tokio::test]
async fn a_script_cannot_read_the_module_environment() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "probe/SKILL.toml", PROBE_SKILL);
    let skill = r#"[skill]
name = "other"
[[tools]]
name = "environ"
description = "Print the module's environment."
command = "python3 -c 'import os; print(open(\"/proc/%d/environ\" % os.getppid(), \"rb\").read())'"
"#;
    write(dir.path(), "other/SKILL.toml", skill);
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.env("SKILLS_DIR", dir.path()).env("SKILLS_TEST_SECRET", SECRET);
    // Root reads every process's environment: the module and its scripts
    // run as `nobody` then, as a module should run as a user of its own.
    if rustix::process::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::process::CommandExt::uid(&mut command, 65534);
        std::os::unix::process::CommandExt::gid(&mut command, 65534);
    }
    let module = Process::start(command);
    let answer = module.client().call("skills.other_environ", json!({}), None).await;
    assert_eq!(answer["error_kind"], "execution_failed", "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("PermissionError"), "{answer}");
    assert!(!answer.to_string().contains(SECRET), "another skill's secret: {answer}");
}

/// The running processes whose command line is `sleep <seconds>`.
fn sleepers(seconds: &str) -> Vec<u32> {
    let wanted = format!("sleep\0{seconds}\0");
    let running = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z')))
    };
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| line == wanted.as_bytes()))
        .filter(running)
        .collect()
}

#[tokio::test]
async fn background_processes_that_left_the_group_do_not_outlive_a_normal_exit() {
    let (_dir, module) = start();
    // A sleep time no other process on the machine is likely to use.
    let seconds = 300_000 + std::process::id() % 100_000;
    let result = module.client().call("skills.probe_escaper", json!({"seconds": seconds}), None).await;
    assert_eq!(result["result"]["stdout"], "left\n", "{result}");
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut left = sleepers(&seconds.to_string());
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = sleepers(&seconds.to_string());
    }
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(left.is_empty(), "the script's background sleepers {left:?} outlived the call");
}

#[tokio::test]
async fn fifty_megabytes_of_output_are_cut() {
    let (_dir, module) = start();
    let result = module.client().call("skills.probe_flood", json!({}), None).await;
    assert_eq!(result["success"], true, "{}", &result.to_string()[..result.to_string().len().min(300)]);
    assert_eq!(result["result"]["truncated"], true);
    assert!(result["result"]["stdout"].as_str().unwrap().chars().count() <= 1000);
}

#[tokio::test]
async fn a_whole_number_sent_as_a_float_reaches_an_integer_argument_as_an_integer() {
    let (_dir, module) = start();
    let result = module.client().call("skills.probe_padded", json!({"pad": 3.0}), None).await;
    let stdout = result["result"]["stdout"].as_str().unwrap_or_else(|| panic!("{result}"));
    assert!(stdout.starts_with("...[redacted]y"), "{result}");
}

#[tokio::test]
async fn output_cut_short_is_text_even_when_it_parses_as_json() {
    let (_dir, module) = start();
    let result = module.client().call_ok("skills.probe_digits", json!({}), None).await;
    assert_eq!(result["stdout"], "7".repeat(40), "{result}");
    assert_eq!(result["truncated"], true, "{result}");
}

#[tokio::test]
async fn secrets_are_redacted_and_failures_quote_stderr() {
    let (_dir, module) = start();
    let client = module.client();
    let leak = client.call("skills.probe_leak", json!({}), None).await;
    let stdout = leak["result"]["stdout"].as_str().unwrap();
    assert_eq!(stdout, "value [redacted] key [redacted]\n", "{leak}");
    let fail = client.call("skills.probe_fail", json!({}), None).await;
    assert_eq!(fail["success"], false);
    assert_eq!(fail["error_kind"], "execution_failed");
    let error = fail["error"].as_str().unwrap();
    assert!(error.contains("exited with code 1") && error.contains("went wrong: password=[redacted]"), "{error}");
    assert!(!fail.to_string().contains("hunter22") && !leak.to_string().contains(SECRET));
}

/// Polls the manifest until `ready` holds, for at most two seconds.
#[tokio::test]
async fn a_secret_the_output_cap_would_split_never_leaks_its_beginning() {
    let (_dir, module) = start();
    let client = module.client();
    // Every padding puts the cut at another place in (or around) the secret.
    for pad in 0..=44 {
        let answer = client.call("skills.probe_padded", json!({"pad": pad}), None).await;
        let stdout = answer["result"]["stdout"].as_str().unwrap_or_else(|| panic!("{answer}"));
        assert!(stdout.len() <= 40 + "[redacted]".len(), "pad {pad}: {answer}");
        // What is left besides padding is whole markers and a marker the cut split.
        let rest = stdout.replace("[redacted]", "");
        let marker = "[redacted]";
        let rest = (1..marker.len()).rev().find_map(|n| rest.strip_suffix(&marker[..n])).unwrap_or(&rest);
        assert!(rest.chars().all(|c| c == '.' || c == 'y' || c == '\n'), "pad {pad} leaks: {stdout:?}");
        assert_eq!(answer["result"]["truncated"], true, "{answer}");
    }
}

async fn manifest_within_two_seconds(module: &Process, ready: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let manifest = module.client().manifest().await;
        if ready(&manifest) {
            return manifest;
        }
        assert!(started.elapsed() < Duration::from_secs(2), "the manifest did not change in 2 s: {manifest}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn changes_under_skills_dir_reach_the_manifest_without_a_restart() {
    let (dir, module) = start();
    let pid = module.pid();
    let skill = "[skill]\nname = \"later\"\n[[tools]]\nname = \"hello\"\ndescription = \"Say hello.\"\ncommand = \"echo hello\"\n";
    write(dir.path(), "later/SKILL.toml", skill);
    let manifest =
        manifest_within_two_seconds(&module, |m| tool_names(m).contains(&"skills.later_hello".to_owned())).await;
    assert!(tool_names(&manifest).contains(&"skills.probe_echo".to_owned()));
    let result = module.client().call("skills.later_hello", json!({}), None).await;
    assert_eq!(result["result"]["stdout"], "hello\n", "{result}");
    write(dir.path(), "later/SKILL.toml", &skill.replace("Say hello.", "Greet."));
    manifest_within_two_seconds(&module, |m| {
        m["tools"].as_array().unwrap().iter().any(|t| t["name"] == "skills.later_hello" && t["description"] == "Greet.")
    })
    .await;
    std::fs::remove_dir_all(dir.path().join("later")).unwrap();
    manifest_within_two_seconds(&module, |m| !tool_names(m).contains(&"skills.later_hello".to_owned())).await;
    assert_eq!(module.pid(), pid);
}

/// How many times the module has logged loading its skills.
fn loads(module: &Process) -> usize {
    module.logs().iter().filter(|line| line.contains("skills loaded")).count()
}

#[tokio::test]
async fn reading_the_skill_files_does_not_trigger_another_reload() {
    let (dir, module) = start();
    // One change, so at least one reload has read every SKILL.toml again.
    let skill =
        "[skill]\nname = \"later\"\n[[tools]]\nname = \"hello\"\ndescription = \"Hi.\"\ncommand = \"echo hi\"\n";
    write(dir.path(), "later/SKILL.toml", skill);
    manifest_within_two_seconds(&module, |m| tool_names(m).contains(&"skills.later_hello".to_owned())).await;
    // Ten debounce periods (100 ms here) to settle, then as many again to
    // see whether the module's own reading of the files keeps reloading.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = loads(&module);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(loads(&module), settled, "the module reloaded without a change: {:#?}", module.logs());
}

/// How many inotify watches the process `pid` holds.
fn inotify_watches(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == "anon_inode:inotify"))
        .map(|fd| {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().display())).unwrap();
            info.lines().filter(|line| line.starts_with("inotify wd:")).count()
        })
        .sum()
}

#[tokio::test]
async fn directories_inside_a_skill_cost_no_watches() {
    let (dir, module) = start();
    let before = inotify_watches(module.pid());
    assert!(before > 0, "the module watches nothing");
    // A virtualenv, a cache a script fills: a tree of its own.
    for n in 0..200 {
        std::fs::create_dir_all(dir.path().join(format!("probe/cache/{n}/sub"))).unwrap();
    }
    // Time for a recursive watcher to add its watches.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(inotify_watches(module.pid()), before, "a watch per directory of the skill's own tree");
    // Skill directories are still watched, the new ones too.
    let skill =
        "[skill]\nname = \"later\"\n[[tools]]\nname = \"hello\"\ndescription = \"Hi.\"\ncommand = \"echo hi\"\n";
    write(dir.path(), "later/SKILL.toml", skill);
    manifest_within_two_seconds(&module, |m| tool_names(m).contains(&"skills.later_hello".to_owned())).await;
    write(dir.path(), "later/SKILL.toml", &skill.replace("name = \"hello\"", "name = \"bye\""));
    manifest_within_two_seconds(&module, |m| tool_names(m).contains(&"skills.later_bye".to_owned())).await;
}

#[tokio::test]
async fn a_module_out_of_descriptors_says_which_budget_to_change() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "probe/SKILL.toml", PROBE_SKILL);
    write(dir.path(), "probe/scripts/sleeper.sh", "sleep 30 &\necho $! > child.pid\nwait\n");
    // A soft limit that a dozen calls in flight go over (the hard one stays,
    // so the scripts' own SKILL_OPEN_FILES can still be set).
    let mut command = Command::new("sh");
    command
        .args(["-c", "ulimit -Sn 40 && exec \"$0\"", env!("CARGO_BIN_EXE_skills")])
        .env("SKILLS_DIR", dir.path())
        .env("SKILLS_TEST_SECRET", SECRET);
    let module = Process::start(command);
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let client = module.client();
        calls.spawn(async move { client.try_call("skills.probe_sleeper", json!({}), None).await.ok() });
    }
    let answers: Vec<Value> = calls.join_all().await.into_iter().flatten().collect();
    let refused: Vec<&Value> = answers.iter().filter(|a| a["error_kind"] == "unavailable").collect();
    assert!(!refused.is_empty(), "no call ran out of descriptors: {answers:#?}");
    for answer in refused {
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains("MAX_CONNECTIONS") && error.contains("ulimit -n"), "{error}");
    }
    assert!(answers.iter().all(|a| a["error_kind"] != "execution_failed"), "{answers:#?}");
}

#[tokio::test]
async fn a_script_limit_the_module_cannot_give_is_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "probe/SKILL.toml", PROBE_SKILL);
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    // Above any hard limit, and above fs.nr_open, which no privilege passes.
    command.env("SKILLS_DIR", dir.path()).env("SKILL_OPEN_FILES", (1_u64 << 40).to_string());
    let module = Process::start(command);
    let answer = module.client().call("skills.probe_sort", json!({"file": "SKILL.toml"}), None).await;
    assert_eq!(answer["error_kind"], "unavailable", "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(error.contains("SKILL_OPEN_FILES above the module's own hard limit"), "{error}");
}

#[tokio::test]
async fn no_answer_names_the_host_path_of_a_skill() {
    let (dir, module) = start();
    let client = module.client();
    let host = dir.path().display().to_string();
    let missing = client.call("skills.probe_missing", json!({}), None).await;
    assert_eq!(missing["error_kind"], "execution_failed", "{missing}");
    assert!(missing["error"].as_str().unwrap().starts_with("cannot start `scripts/missing.sh`: "), "{missing}");
    let listed = client.call("skills.list_skills", json!({}), None).await;
    let refused = listed["result"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["reason"].as_str().unwrap().contains("skills.probe_instant"));
    assert_eq!(refused.expect("the refused tool is a problem")["file"], "probe/SKILL.toml", "{listed}");
    assert!(!missing.to_string().contains(&host) && !listed.to_string().contains(&host), "{missing} {listed}");
}

#[test]
fn a_missing_skills_directory_is_named_by_its_absolute_path_and_setting() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.current_dir(dir.path()).env_clear().env("SKILLS_DIR", "missing");
    let stderr = Process::start_failing(command, 1);
    let absolute = dir.path().join("missing");
    assert!(
        stderr.contains(&format!("cannot use the skills directory {} (SKILLS_DIR=missing)", absolute.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("set SKILLS_DIR (or --skills-dir) to an absolute path of a directory that exists"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_broken_skill_file_beside_a_good_one_leaves_the_good_one_served() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "good/SKILL.toml",
        "[skill]\nname = \"good\"\n[[tools]]\nname = \"hi\"\ndescription = \"Hi.\"\ncommand = \"echo hi\"\n",
    );
    write(dir.path(), "broken/SKILL.toml", "[skill]\nname = \"broken\"\n[[tools]]\nname = 5\n");
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.env("SKILLS_DIR", dir.path());
    let module = Process::start(command);
    let client = module.client();
    let manifest = client.manifest().await;
    assert_eq!(tool_names(&manifest), ["skills.list_skills", "skills.good_hi"]);
    assert_eq!(client.call("skills.good_hi", json!({}), None).await["result"]["stdout"], "hi\n");
    let listed = client.call("skills.list_skills", json!({}), None).await;
    let problem = &listed["result"]["problems"][0];
    // Paths are relative to SKILLS_DIR: the host's layout is not shown to a model.
    assert_eq!(problem["file"], "broken/SKILL.toml", "{listed}");
    assert_eq!(listed["result"]["skills"][0]["file"], "good/SKILL.toml", "{listed}");
    assert_eq!((problem["line"].as_u64(), problem["column"].as_u64()), (Some(4), Some(8)), "{listed}");
    let logged = module.logs().into_iter().find(|line| line.contains("SKILL.toml problem")).expect("a logged problem");
    assert!(logged.contains("broken/SKILL.toml") && logged.contains("\"line\":4"), "{logged}");
}

/// A SKILL.toml of the skill `name` with one tool `tool` (`echo tool`).
fn one_tool_skill(name: &str, tool: &str) -> String {
    format!(
        "[skill]\nname = \"{name}\"\n[[tools]]\nname = \"{tool}\"\ndescription = \"Say it.\"\ncommand = \"echo {tool}\"\n"
    )
}

/// The module serving `skills_dir`, with a short debounce.
fn serve(skills_dir: &Path) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.env("SKILLS_DIR", skills_dir).env("SKILLS_WATCH_DEBOUNCE_MS", "100");
    Process::start(command)
}

/// Replaces the symlink `link` with one to `target` the way `ln -sfn` and
/// kubelet do: a new link beside it, renamed over it.
fn swap_symlink(link: &Path, target: &str) {
    let temporary = link.with_file_name(format!("{}_tmp", link.file_name().unwrap().to_str().unwrap()));
    std::os::unix::fs::symlink(target, &temporary).unwrap();
    std::fs::rename(&temporary, link).unwrap();
}

/// One kubelet update of a ConfigMap volume at `volume` whose keys are
/// `files` (path in the volume, `(skill, tool)` of its SKILL.toml): the
/// files in a new timestamped directory, `..data` swapped to it, a link
/// into `..data` for each new top-level name, the previous directory removed.
fn kubelet_update(volume: &Path, version: &str, files: &[(&str, (&str, &str))]) {
    let previous = std::fs::read_link(volume.join("..data")).ok();
    let timestamped = format!("..2026_11_27_08_00_00.{version}");
    for (path, (skill, tool)) in files {
        write(volume, &format!("{timestamped}/{path}"), &one_tool_skill(skill, tool));
    }
    swap_symlink(&volume.join("..data"), &timestamped);
    for (path, _) in files {
        let top = path.split('/').next().unwrap();
        if std::fs::symlink_metadata(volume.join(top)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{top}"), volume.join(top)).unwrap();
        }
    }
    if let Some(previous) = previous {
        std::fs::remove_dir_all(volume.join(previous)).unwrap();
    }
}

/// A manifest test: whether it lists `tool`.
fn has(tool: &'static str) -> impl Fn(&Value) -> bool {
    move |manifest| tool_names(manifest).contains(&tool.to_owned())
}

#[tokio::test]
async fn a_kubernetes_config_map_update_reaches_the_manifest_without_a_restart() {
    // SKILLS_DIR is the volume: each skill directory is a link into `..data`.
    let dir = tempfile::tempdir().unwrap();
    let volume = dir.path().join("skills");
    std::fs::create_dir(&volume).unwrap();
    kubelet_update(&volume, "1", &[("weather/SKILL.toml", ("weather", "now"))]);
    let module = serve(&volume);
    manifest_within_two_seconds(&module, has("skills.weather_now")).await;
    kubelet_update(&volume, "2", &[("weather/SKILL.toml", ("weather", "today"))]);
    manifest_within_two_seconds(&module, has("skills.weather_today")).await;
    // Again: the watches follow the second swap too, and a key added.
    let files = [("weather/SKILL.toml", ("weather", "tomorrow")), ("news/SKILL.toml", ("news", "latest"))];
    kubelet_update(&volume, "3", &files);
    let manifest = manifest_within_two_seconds(&module, has("skills.news_latest")).await;
    assert!(has("skills.weather_tomorrow")(&manifest) && !has("skills.weather_today")(&manifest), "{manifest}");
}

#[tokio::test]
async fn a_skills_dir_inside_a_kubernetes_config_map_follows_its_updates() {
    // SKILLS_DIR is a directory of the volume: itself a link into `..data`,
    // to a directory the next update removes.
    let dir = tempfile::tempdir().unwrap();
    let volume = dir.path().join("config");
    std::fs::create_dir(&volume).unwrap();
    kubelet_update(&volume, "1", &[("skills/weather/SKILL.toml", ("weather", "now"))]);
    let module = serve(&volume.join("skills"));
    manifest_within_two_seconds(&module, has("skills.weather_now")).await;
    kubelet_update(&volume, "2", &[("skills/weather/SKILL.toml", ("weather", "today"))]);
    manifest_within_two_seconds(&module, has("skills.weather_today")).await;
    let files =
        [("skills/weather/SKILL.toml", ("weather", "tomorrow")), ("skills/news/SKILL.toml", ("news", "latest"))];
    kubelet_update(&volume, "3", &files);
    let manifest = manifest_within_two_seconds(&module, has("skills.news_latest")).await;
    assert!(has("skills.weather_tomorrow")(&manifest) && !has("skills.weather_today")(&manifest), "{manifest}");
}

#[tokio::test]
async fn a_skills_dir_symlink_swapped_to_another_release_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "releases/1/hello/SKILL.toml", &one_tool_skill("hello", "one"));
    write(dir.path(), "releases/2/hello/SKILL.toml", &one_tool_skill("hello", "two"));
    let link = dir.path().join("skills");
    std::os::unix::fs::symlink("releases/1", &link).unwrap();
    let module = serve(&link);
    manifest_within_two_seconds(&module, has("skills.hello_one")).await;
    swap_symlink(&link, "releases/2");
    manifest_within_two_seconds(&module, has("skills.hello_two")).await;
    // The new release is watched: its changes are seen.
    write(dir.path(), "releases/2/hello/SKILL.toml", &one_tool_skill("hello", "three"));
    manifest_within_two_seconds(&module, has("skills.hello_three")).await;
    write(dir.path(), "releases/2/added/SKILL.toml", &one_tool_skill("added", "new"));
    manifest_within_two_seconds(&module, has("skills.added_new")).await;
}

#[tokio::test]
async fn a_skills_dir_replaced_by_renames_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    write(&skills, "hello/SKILL.toml", &one_tool_skill("hello", "one"));
    let module = serve(&skills);
    manifest_within_two_seconds(&module, has("skills.hello_one")).await;
    // A new copy put in place: the old one moved aside, the new one renamed in.
    write(dir.path(), "next/hello/SKILL.toml", &one_tool_skill("hello", "two"));
    std::fs::rename(&skills, dir.path().join("previous")).unwrap();
    std::fs::rename(dir.path().join("next"), &skills).unwrap();
    manifest_within_two_seconds(&module, has("skills.hello_two")).await;
    write(&skills, "hello/SKILL.toml", &one_tool_skill("hello", "three"));
    manifest_within_two_seconds(&module, has("skills.hello_three")).await;
}

/// Serves three one-tool skills under `setting=value`: only the first two
/// are served, the third is a problem naming the setting. Their manifest.
async fn served_under(dir: &Path, setting: &str, value: &str) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.env("SKILLS_DIR", dir).env(setting, value);
    let module = Process::start(command);
    let client = module.client();
    let manifest = client.manifest().await;
    assert_eq!(tool_names(&manifest), ["skills.list_skills", "skills.a_t", "skills.b_t"], "{setting}");
    let listed = client.call_ok("skills.list_skills", json!({}), None).await;
    let problem = &listed["problems"][0];
    assert_eq!(problem["file"], "c/SKILL.toml", "{listed}");
    assert!(problem["reason"].as_str().unwrap().contains(&format!("over {setting} ({value})")), "{listed}");
    assert!(module.logs().iter().any(|line| line.contains("SKILL.toml problem") && line.contains(setting)));
    manifest
}

#[tokio::test]
async fn skills_past_the_caps_are_problems_naming_the_setting_and_the_rest_is_served() {
    let dir = tempfile::tempdir().unwrap();
    for skill in ["a", "b", "c"] {
        write(dir.path(), &format!("{skill}/SKILL.toml"), &one_tool_skill(skill, "t"));
    }
    let manifest = served_under(dir.path(), "SKILLS_MAX_TOOLS", "2").await;
    // Room for the entries of `a` and `b` (each counted as `[entry]`), not `c`'s.
    let tools = manifest["tools"].as_array().unwrap();
    let budget: usize = tools[1..].iter().map(|tool| serde_json::to_vec(&[tool]).unwrap().len()).sum::<usize>() + 1;
    served_under(dir.path(), "SKILLS_MAX_MANIFEST_BYTES", &budget.to_string()).await;
}

#[tokio::test]
async fn scripts_past_the_concurrent_runs_cap_wait_for_a_slot_within_their_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let skill = "[skill]\nname = \"slow\"\n\
        [[tools]]\nname = \"hold\"\ndescription = \"Sleep.\"\ncommand = \"sleep {duration}\"\n\
        [tools.args]\nduration = \"Seconds.\"\n\
        [[tools]]\nname = \"quick\"\ndescription = \"Say hi, within a second.\"\ncommand = \"echo hi\"\ntimeout_seconds = 1\n\
        [[tools]]\nname = \"patient\"\ndescription = \"Say hi.\"\ncommand = \"echo hi\"\n";
    write(dir.path(), "slow/SKILL.toml", skill);
    let mut command = Command::new(env!("CARGO_BIN_EXE_skills"));
    command.env("SKILLS_DIR", dir.path()).env("SKILLS_MAX_CONCURRENT_RUNS", "1");
    let module = Process::start(command);
    // About four seconds, written as no other process on the machine would.
    let duration = format!("4.{:09}", std::process::id());
    let client = module.client();
    let hold = tokio::spawn(async move { client.call("skills.slow_hold", json!({"duration": duration}), None).await });
    let duration = format!("4.{:09}", std::process::id());
    let deadline = Instant::now() + Duration::from_secs(5);
    while sleepers(&duration).is_empty() {
        assert!(Instant::now() < deadline, "the first script did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The one slot is taken: a call whose timeout passes first runs nothing.
    let client = module.client();
    let patient = tokio::spawn(async move { client.call("skills.slow_patient", json!({}), None).await });
    let refused = module.client().call("skills.slow_quick", json!({}), None).await;
    assert_eq!(refused["error_kind"], "unavailable", "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("(SKILLS_MAX_CONCURRENT_RUNS)"), "{refused}");
    assert_eq!(hold.await.unwrap()["success"], true);
    // One whose timeout is longer waited for the slot and ran.
    assert_eq!(patient.await.unwrap()["result"]["stdout"], "hi\n");
    assert_eq!(module.client().call("skills.slow_quick", json!({}), None).await["result"]["stdout"], "hi\n");
}
