//! The file_manager binary as a process, over HTTP: hostile arguments,
//! planted links, isolation between users, a crash in the middle of many
//! writes, concurrent writers, and the error naming a FILES_ROOT that
//! cannot be created.

mod support;

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::process::ModuleProcess;
use test_support::{Process, error_kind};

fn file_id(result: &Value) -> String {
    assert_eq!(result["success"], true, "{result}");
    result["result"]["file_id"].as_str().unwrap().to_owned()
}

/// Every path under `dir`, without following links.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if fs::symlink_metadata(&path).unwrap().is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

/// True when `path` is `<root>/users`, a user area, or a record in one.
fn is_store_path(root: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(root) else { return false };
    let parts: Vec<&str> = relative.iter().map(|p| p.to_str().unwrap()).collect();
    let is_area = |name: &str| name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit());
    let is_record = |name: &str| name.strip_suffix(".rec").is_some_and(|id| uuid::Uuid::try_parse(id).is_ok());
    match parts.as_slice() {
        ["users"] => true,
        ["users", area] => is_area(area),
        ["users", area, record] => is_area(area) && is_record(record),
        _ => false,
    }
}

#[test]
fn a_root_that_cannot_be_created_is_named_by_its_absolute_path_and_setting() {
    // A relative FILES_ROOT under a working directory where `data` is a
    // file (as root, a read-only directory would not stop it).
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("data"), "").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_file_manager"));
    command.current_dir(dir.path()).env_clear().env("FILES_ROOT", "data/files");
    let stderr = Process::start_failing(command, 1);
    let absolute = dir.path().join("data/files");
    let named = format!("cannot use the files directory {} (FILES_ROOT=data/files)", absolute.display());
    assert!(stderr.contains(&named), "{stderr}");
    assert!(stderr.contains("set FILES_ROOT (or --files-root) to an absolute path"), "{stderr}");
}

#[tokio::test]
async fn traversal_attempts_stay_inside_the_callers_area() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    let sentinel = work.path().join("outside.txt");
    fs::write(&sentinel, "do not touch").unwrap();
    let module = ModuleProcess::start(&root, &[]);

    let sentinel_path = sentinel.to_str().unwrap().to_owned();
    let hostile_ids = [
        "../outside.txt",
        "../../outside.txt",
        sentinel_path.as_str(),
        "/etc/passwd",
        "..",
        ".",
        "a\0b",
        "\u{FF0E}\u{FF0E}/outside.txt",
        "%2e%2e%2foutside.txt",
        "0b7e8f5a-3c1d-4a2b-9e6f-1a2b3c4d5e6\u{0430}",
        "0b7e8f5a-3c1d-4a2b-9e6f-1a2b3c4d5e6f/../../outside.txt",
    ];
    for id in hostile_ids {
        for tool in ["read_document", "delete_file"] {
            let result = module.call("mallory", tool, json!({"file_id": id})).await;
            assert_eq!(error_kind(&result), "invalid_arguments", "{tool} {id:?}: {result}");
        }
    }

    let refused_names = ["../outside.txt", "/tmp/x.txt", "..\\x.txt", "a\0.txt", "..", "sub/dir.txt"];
    for name in refused_names {
        let result = module.call("mallory", "upload_file", json!({"filename": name, "data_base64": "YQ=="})).await;
        assert_eq!(error_kind(&result), "invalid_arguments", "{name:?}: {result}");
    }
    let disguised =
        module.call("mallory", "upload_file", json!({"filename": "photo\u{202E}gpj.exe", "data_base64": "YQ=="})).await;
    assert_eq!(disguised["result"]["name"], "photo_gpj.exe", "{disguised}");
    let titled = module
        .call("mallory", "create_document", json!({"title": "../../outside", "content": "x", "format": "txt"}))
        .await;
    assert_eq!(titled["result"]["name"], "outside.txt", "{titled}");

    for user in ["../..", "/", "a\0b", "\u{202E}"] {
        let result = module.call(user, "create_document", json!({"title": "t", "content": user})).await;
        let id = file_id(&result);
        let read = module.call(user, "read_document", json!({"file_id": id})).await;
        assert_eq!(read["result"]["content"], user);
    }
    let anonymous = module.client().try_call(Some(""), "list_files", json!({})).await.unwrap();
    assert_eq!(error_kind(&anonymous), "permission_denied");

    assert_eq!(fs::read_to_string(&sentinel).unwrap(), "do not touch");
    let outside: HashSet<PathBuf> = walk(work.path()).into_iter().filter(|p| !p.starts_with(&root)).collect();
    assert_eq!(outside, HashSet::from([sentinel]), "nothing was created outside the root");
    for path in walk(&root) {
        assert!(is_store_path(&root, &path), "unexpected path in the store: {}", path.display());
    }
}

#[tokio::test]
async fn links_planted_in_the_root_are_refused_not_followed() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("root");
    let secret = work.path().join("secret.txt");
    fs::write(&secret, "secret").unwrap();
    let module = ModuleProcess::start(&root, &[]);
    let victim_file =
        file_id(&module.call("victim", "create_document", json!({"title": "v", "content": "victim's"})).await);
    let own = file_id(&module.call("mallory", "create_document", json!({"title": "m", "content": "mine"})).await);
    let areas: Vec<PathBuf> = fs::read_dir(root.join("users")).unwrap().map(|e| e.unwrap().path()).collect();
    let mallory_area = areas.iter().find(|a| a.join(format!("{own}.rec")).exists()).unwrap().clone();
    let victim_area = areas.iter().find(|a| **a != mallory_area).unwrap().clone();

    // A record name that links to a file outside the root.
    let planted = uuid::Uuid::new_v4().to_string();
    std::os::unix::fs::symlink(&secret, mallory_area.join(format!("{planted}.rec"))).unwrap();
    let read = module.call("mallory", "read_document", json!({"file_id": planted})).await;
    assert_eq!(error_kind(&read), "execution_failed");
    assert!(!read.to_string().contains("secret\""), "{read}");
    assert!(read["error"].as_str().unwrap().contains("planted link"), "{read}");
    let deleted = module.call("mallory", "delete_file", json!({"file_id": planted})).await;
    assert_eq!(error_kind(&deleted), "execution_failed");
    let listed = module.call("mallory", "list_files", json!({})).await;
    assert_eq!(listed["result"]["files"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(fs::read_to_string(&secret).unwrap(), "secret");

    // A record name that links to another user's record.
    let linked = uuid::Uuid::new_v4().to_string();
    std::os::unix::fs::symlink(
        victim_area.join(format!("{victim_file}.rec")),
        mallory_area.join(format!("{linked}.rec")),
    )
    .unwrap();
    let read = module.call("mallory", "read_document", json!({"file_id": linked})).await;
    assert_eq!(error_kind(&read), "execution_failed", "{read}");

    // The whole area replaced by a link to the victim's area.
    fs::remove_dir_all(&mallory_area).unwrap();
    std::os::unix::fs::symlink(&victim_area, &mallory_area).unwrap();
    for (tool, arguments) in [
        ("list_files", json!({})),
        ("read_document", json!({"file_id": victim_file})),
        ("delete_file", json!({"file_id": victim_file})),
        ("create_document", json!({"title": "t", "content": "c"})),
    ] {
        let result = module.call("mallory", tool, arguments).await;
        assert_eq!(error_kind(&result), "execution_failed", "{tool}: {result}");
    }
    let still_there = module.call("victim", "read_document", json!({"file_id": victim_file})).await;
    assert_eq!(still_there["result"]["content"], "victim's");
}

#[tokio::test]
async fn two_users_never_see_each_others_files() {
    let work = tempfile::tempdir().unwrap();
    let module = ModuleProcess::start(work.path(), &[]);
    let alice_file =
        file_id(&module.call("alice", "create_document", json!({"title": "diary", "content": "dear diary"})).await);
    let bob_file =
        file_id(&module.call("bob", "upload_file", json!({"filename": "b.txt", "data_base64": "Ym9i"})).await);
    for (user, other_file) in [("bob", &alice_file), ("alice", &bob_file)] {
        for tool in ["read_document", "delete_file"] {
            let result = module.call(user, tool, json!({"file_id": other_file})).await;
            assert_eq!(error_kind(&result), "not_found", "{user} {tool}: {result}");
        }
    }
    for (user, own) in [("alice", &alice_file), ("bob", &bob_file)] {
        let listed = module.call(user, "list_files", json!({})).await;
        let ids: Vec<&str> =
            listed["result"]["files"].as_array().unwrap().iter().map(|f| f["file_id"].as_str().unwrap()).collect();
        assert_eq!(ids, [own.as_str()], "{user}");
    }
    let read = module.call("alice", "read_document", json!({"file_id": alice_file})).await;
    assert_eq!(read["result"]["content"], "dear diary");
}

/// The content a crash-test document must have, derived from its title.
fn expected_content(title: &str) -> String {
    let seq: usize = title.rsplit('-').next().unwrap().parse().unwrap();
    let length = 1_000 + (seq * 7_919) % 60_000;
    title.chars().cycle().take(length).collect()
}

#[tokio::test]
async fn a_crash_in_the_middle_of_many_writes_leaves_every_file_whole_or_absent() {
    let work = tempfile::tempdir().unwrap();
    let acknowledged = Arc::new(Mutex::new(HashSet::<String>::new()));
    for round in 0..3 {
        let mut module = ModuleProcess::start(work.path(), &[]);
        let so_far = acknowledged.lock().unwrap().clone();
        let before = check_whole_after_restart(&module, work.path(), &so_far).await;
        let writers: Vec<_> = (0..4)
            .map(|writer| {
                let client = module.client();
                let acknowledged = acknowledged.clone();
                tokio::spawn(async move {
                    for seq in 0.. {
                        let title = format!("w{round}.{writer}-{seq}");
                        let arguments = json!({"title": title, "content": expected_content(&title), "format": "txt"});
                        match client.try_call(Some("crash"), "create_document", arguments).await {
                            Ok(result) => acknowledged.lock().unwrap().insert(file_id(&result)),
                            // The process is gone.
                            Err(_) => return,
                        };
                    }
                })
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while acknowledged.lock().unwrap().len() < before + 40 {
            assert!(Instant::now() < deadline, "the writers made no progress");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        module.kill();
        for writer in writers {
            writer.await.unwrap();
        }
        let temporaries = walk(work.path()).iter().filter(|p| p.to_str().unwrap().contains("/.tmp-")).count();
        eprintln!("round {round}: killed with {temporaries} temporary file(s) on disk");
    }
    let module = ModuleProcess::start(work.path(), &[]);
    let all = acknowledged.lock().unwrap().clone();
    check_whole_after_restart(&module, work.path(), &all).await;
}

/// Checks a restarted store: every acknowledged file is there, every file
/// is whole, nothing else is on disk; returns how many files there are.
async fn check_whole_after_restart(module: &ModuleProcess, root: &Path, acknowledged: &HashSet<String>) -> usize {
    let listed = module.call("crash", "list_files", json!({})).await;
    let files = listed["result"]["files"].as_array().unwrap();
    let listed_ids: HashSet<String> = files.iter().map(|f| f["file_id"].as_str().unwrap().to_owned()).collect();
    assert!(acknowledged.is_subset(&listed_ids), "every acknowledged write survived the crash");
    for file in files {
        let read = module.call("crash", "read_document", json!({"file_id": file["file_id"]})).await;
        assert_eq!(read["success"], true, "{read}");
        let title = file["name"].as_str().unwrap().strip_suffix(".txt").unwrap();
        assert!(read["result"]["content"] == expected_content(title), "{title} is whole");
    }
    let on_disk = walk(root);
    for path in &on_disk {
        assert!(is_store_path(root, path), "leftover after the restart: {}", path.display());
    }
    let records = on_disk.iter().filter(|p| p.extension().is_some_and(|e| e == "rec")).count();
    assert_eq!(records, files.len(), "every record on disk is listed, none skipped as damaged");
    files.len()
}

/// The short content of a concurrency-test document.
fn short_content(title: &str) -> String {
    title.chars().cycle().take(100).collect()
}

#[tokio::test]
async fn concurrent_writers_all_land_and_the_quota_holds() {
    let work = tempfile::tempdir().unwrap();
    let module = ModuleProcess::start(work.path(), &[("USER_QUOTA_BYTES", "10000"), ("FILE_MAX_BYTES", "1000")]);
    let writers: Vec<_> = (0..8)
        .map(|writer| {
            let client = module.client();
            tokio::spawn(async move {
                for seq in 0..10 {
                    let title = format!("c{writer}-{seq}");
                    let arguments = json!({"title": title, "content": short_content(&title), "format": "txt"});
                    file_id(&client.call("busy", "create_document", arguments).await);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let listed = module.call("busy", "list_files", json!({})).await;
    let files = listed["result"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 80);
    for file in files {
        let read = module.call("busy", "read_document", json!({"file_id": file["file_id"]})).await;
        let title = file["name"].as_str().unwrap().strip_suffix(".txt").unwrap();
        assert_eq!(read["result"]["content"], short_content(title));
    }

    // 2000 bytes of quota are left; ten writers race for them.
    let racers: Vec<_> = (0..10)
        .map(|racer| {
            let client = module.client();
            tokio::spawn(async move {
                let arguments = json!({"title": format!("r{racer}"), "content": "x".repeat(1000)});
                client.call("busy", "create_document", arguments).await
            })
        })
        .collect();
    let mut stored = 0;
    for racer in racers {
        let result = racer.await.unwrap();
        if result["success"] == true {
            stored += 1;
        } else {
            assert!(result["error"].as_str().unwrap().contains("exceed your storage quota"), "{result}");
        }
    }
    assert_eq!(stored, 2, "exactly what fits was stored");
    let listed = module.call("busy", "list_files", json!({})).await;
    assert_eq!(listed["result"]["used_bytes"], 10000);
}
