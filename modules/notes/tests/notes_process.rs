//! The notes binary as a process, over HTTP: round trips, isolation
//! between users, hostile search text, ranking, limits (per user and of
//! all users together), a SIGKILL in the middle of many saves, and the
//! error naming a database that cannot be created.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use test_support::{ModuleClient, Process, error_kind};

/// Starts the module on the database `db` with extra `env`.
fn start(db: &Path, env: &[(&str, &str)]) -> Process {
    let mut command = Command::new(env!("CARGO_BIN_EXE_notes"));
    command.env_clear().envs(env.iter().copied()).env("NOTES_DB", db).env("RUST_LOG", "error");
    Process::start(command)
}

#[test]
fn a_database_that_cannot_be_created_is_named_by_its_absolute_path_and_setting() {
    // A relative NOTES_DB under a working directory where `data` is a file
    // (as root, a read-only directory would not stop it).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data"), "").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_notes"));
    command.current_dir(dir.path()).env_clear().env("NOTES_DB", "data/notes.db");
    let stderr = Process::start_failing(command, 1);
    let absolute = dir.path().join("data/notes.db");
    assert!(
        stderr.contains(&format!("cannot use the database {} (NOTES_DB=data/notes.db)", absolute.display())),
        "{stderr}"
    );
    assert!(stderr.contains("set NOTES_DB (or --notes-db) to an absolute path"), "{stderr}");
}

#[test]
fn a_bad_setting_is_named_by_its_environment_variable() {
    // clap alone would name `--store-max-bytes <STORE_MAX_BYTES>`, which
    // reads as file_manager's STORE_MAX_BYTES.
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_notes"));
    command.env_clear().env("NOTES_DB", dir.path().join("notes.db")).env("NOTES_STORE_MAX_BYTES", "0");
    let stderr = Process::start_failing(command, 2);
    assert!(stderr.contains("invalid value '0' for 'NOTES_STORE_MAX_BYTES (--store-max-bytes)'"), "{stderr}");
    assert!(!stderr.contains("<STORE_MAX_BYTES>"), "{stderr}");
    // A note larger than its bound could answer past the orchestrator's 8 MiB.
    let mut command = Command::new(env!("CARGO_BIN_EXE_notes"));
    command.env_clear().env("NOTES_DB", dir.path().join("notes.db")).env("NOTES_NOTE_MAX_BYTES", "1300000");
    let stderr = Process::start_failing(command, 2);
    assert!(stderr.contains("invalid value '1300000' for 'NOTES_NOTE_MAX_BYTES (--note-max-bytes)'"), "{stderr}");
    assert!(stderr.contains("1..=524288"), "{stderr}");
}

/// Calls `notes.<tool>` as `user`.
async fn call(client: &ModuleClient, user: &str, tool: &str, arguments: Value) -> Value {
    client.call(&format!("notes.{tool}"), arguments, Some(user)).await
}

/// The result of a call that must succeed.
async fn ok(client: &ModuleClient, user: &str, tool: &str, arguments: Value) -> Value {
    client.call_ok(&format!("notes.{tool}"), arguments, Some(user)).await
}

/// The contents of a search's results, best first.
async fn search(client: &ModuleClient, user: &str, arguments: Value) -> Vec<String> {
    let result = ok(client, user, "search_notes", arguments).await;
    result["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["note"]["content"].as_str().unwrap().to_owned())
        .collect()
}

/// Every note id of `user`, following the cursor to the end.
async fn all_ids(client: &ModuleClient, user: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut arguments = json!({"limit": 100});
    loop {
        let page = ok(client, user, "list_notes", arguments.clone()).await;
        ids.extend(page["notes"].as_array().unwrap().iter().map(|n| n["note_id"].as_str().unwrap().to_owned()));
        match page["next_cursor"].as_str() {
            Some(cursor) => arguments["cursor"] = json!(cursor),
            None => return ids,
        }
    }
}

#[tokio::test]
async fn notes_are_saved_searched_updated_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let module = start(&dir.path().join("data/notes.db"), &[]);
    let client = module.client();

    let saved = ok(
        &client,
        "alice",
        "save_note",
        json!({"content": "My sister's birthday is May 3", "tags": [" Family ", "BIRTHDAYS", "family"], "source": "chat"}),
    )
    .await;
    assert_eq!(saved["tags"], json!(["family", "birthdays"]));
    let id = saved["note_id"].as_str().unwrap().to_owned();

    let found = ok(&client, "alice", "search_notes", json!({"query": "When is my sister's birthday?"})).await;
    let hit = &found["results"][0];
    assert_eq!(hit["note"]["note_id"], id.as_str());
    assert_eq!(hit["note"]["source"], "chat");
    assert!(hit["snippet"].as_str().unwrap().contains("**birthday**"), "{hit}");
    assert!(hit["score"].as_f64().unwrap() > 0.0);
    assert_eq!(search(&client, "alice", json!({"query": "anniversaire"})).await, Vec::<String>::new());
    assert_eq!(search(&client, "alice", json!({"query": "birthday", "tags": ["FAMILY"]})).await.len(), 1);
    assert_eq!(search(&client, "alice", json!({"query": "birthday", "tags": ["work"]})).await.len(), 0);
    let future = search(&client, "alice", json!({"query": "birthday", "since": "2999-01-01T00:00:00Z"})).await;
    assert!(future.is_empty());

    let updated =
        ok(&client, "alice", "update_note", json!({"note_id": id, "content": "My sister's birthday is May 4"})).await;
    assert_eq!(updated["created_at"], saved["created_at"]);
    assert_eq!(updated["tags"], json!(["family", "birthdays"]));
    assert_eq!(search(&client, "alice", json!({"query": "May 4"})).await[0], "My sister's birthday is May 4");
    let retagged = ok(&client, "alice", "update_note", json!({"note_id": id, "tags": []})).await;
    assert_eq!(retagged["tags"], json!([]));
    let unchanged = ok(&client, "alice", "update_note", json!({"note_id": id})).await;
    assert_eq!(unchanged, retagged, "no change, not even updated_at");

    let listed = ok(&client, "alice", "list_notes", json!({})).await;
    assert_eq!(listed["notes"].as_array().unwrap().len(), 1);
    assert_eq!(listed["next_cursor"], Value::Null);

    let deleted = ok(&client, "alice", "delete_note", json!({"note_id": id})).await;
    assert_eq!(deleted["note"]["content"], "My sister's birthday is May 4");
    assert!(search(&client, "alice", json!({"query": "birthday"})).await.is_empty());
    assert_eq!(error_kind(&call(&client, "alice", "delete_note", json!({"note_id": id})).await), "not_found");
    let update = call(&client, "alice", "update_note", json!({"note_id": id, "content": "x"})).await;
    assert_eq!(error_kind(&update), "not_found");
    let bad_id = call(&client, "alice", "delete_note", json!({"note_id": "../../etc/passwd"})).await;
    assert_eq!(error_kind(&bad_id), "invalid_arguments");
    let anonymous = client.call("notes.save_note", json!({"content": "x"}), None).await;
    assert_eq!(error_kind(&anonymous), "permission_denied");
    assert!(dir.path().join("data/notes.db").exists(), "the database directory is created");
}

#[tokio::test]
async fn another_users_notes_never_appear() {
    let dir = tempfile::tempdir().unwrap();
    let module = start(&dir.path().join("notes.db"), &[]);
    let client = module.client();
    let bobs =
        ok(&client, "bob", "save_note", json!({"content": "bob's secret: the safe code is 4711", "tags": ["secret"]}))
            .await;
    let bob_id = bobs["note_id"].as_str().unwrap();
    ok(&client, "alice", "save_note", json!({"content": "alice's shopping list", "tags": ["secret"]})).await;

    for query in ["secret safe code 4711", "bob", "secret*", "4711"] {
        let found = search(&client, "alice", json!({"query": query})).await;
        assert!(found.iter().all(|c| c.starts_with("alice")), "{query}: {found:?}");
    }
    let listed = ok(&client, "alice", "list_notes", json!({"tags": ["secret"]})).await;
    assert_eq!(listed["notes"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["notes"][0]["content"], "alice's shopping list");
    for (tool, arguments) in
        [("update_note", json!({"note_id": bob_id, "content": "pwned"})), ("delete_note", json!({"note_id": bob_id}))]
    {
        assert_eq!(error_kind(&call(&client, "alice", tool, arguments).await), "not_found", "{tool}");
    }
    // Bob's cursor means nothing to Alice beyond a position in her own notes.
    ok(&client, "bob", "save_note", json!({"content": "bob's second note"})).await;
    let bob_page = ok(&client, "bob", "list_notes", json!({"limit": 1})).await;
    let cursor = bob_page["next_cursor"].as_str().unwrap();
    let alice_page = ok(&client, "alice", "list_notes", json!({"cursor": cursor})).await;
    assert!(
        alice_page["notes"].as_array().unwrap().iter().all(|n| n["content"].as_str().unwrap().starts_with("alice"))
    );
    assert_eq!(search(&client, "bob", json!({"query": "4711"})).await.len(), 1, "bob still has his note");
}

#[tokio::test]
async fn hostile_search_text_answers_results_or_nothing_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let module = start(&dir.path().join("notes.db"), &[]);
    let client = module.client();
    ok(&client, "u", "save_note", json!({"content": "The NEAR field: café AND tea (with \"quotes\") 🎂"})).await;
    let ten_kb = "word AND (NEAR \"x ".repeat(600);
    assert!(ten_kb.len() > 10_000);
    let hostile: Vec<String> = [
        "AND",
        "OR",
        "NOT",
        "NEAR(",
        "NEAR(a b, 3)",
        "\"",
        "\"\"\"",
        "'",
        "*",
        "**",
        "a*b*",
        ":",
        "content:tea",
        "tags:x",
        "{content tags}: tea",
        "(((tea",
        "tea)))",
        "^tea",
        "-tea",
        "+tea",
        "tea AND",
        "AND OR NOT",
        "\0",
        "tea\0café",
        "🎂",
        "🎂🎉 tea",
        "'; DROP TABLE notes; --",
        "\\",
        "%",
        "_",
        "NEAR/3",
        "tea -- x",
        "\u{202E}tea",
        "   ",
        "",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain([ten_kb, "tea ".repeat(2_500), "é".repeat(5_000)])
    .collect();
    let mut found_something = 0;
    for query in &hostile {
        let answer = call(&client, "u", "search_notes", json!({"query": query})).await;
        assert_eq!(answer["success"], true, "{:?}: {answer}", query.chars().take(40).collect::<String>());
        let results = answer["result"]["results"].as_array().unwrap();
        found_something += usize::from(!results.is_empty());
    }
    assert!(found_something >= 10, "ordinary words among the operators still match ({found_something})");
    assert_eq!(search(&client, "u", json!({"query": "CAFE"})).await.len(), 1, "the note is intact");
    let tagged = json!({"content": "x", "tags": ["AND", "NEAR(", "\"", "🎂"]});
    assert_eq!(ok(&client, "u", "save_note", tagged).await["tags"], json!(["and", "near(", "\"", "🎂"]));
    assert_eq!(search(&client, "u", json!({"query": "tea", "tags": ["near("]})).await.len(), 0);
}

#[tokio::test]
async fn an_exact_phrase_ranks_above_a_note_sharing_one_word() {
    let dir = tempfile::tempdir().unwrap();
    let module = start(&dir.path().join("notes.db"), &[]);
    let client = module.client();
    for content in [
        "Grocery list: milk, eggs, bread",
        "The red car is parked at the station; car keys are in the red bag",
        "Remember: the car park code is 1234",
        "red car park",
        "Blue bicycle in the garage",
    ] {
        ok(&client, "u", "save_note", json!({"content": content})).await;
    }
    let found = search(&client, "u", json!({"query": "red car park"})).await;
    assert_eq!(found[0], "red car park", "{found:?}");
    let shares_one_word = found.iter().position(|c| c.starts_with("Remember")).unwrap();
    assert!(shares_one_word > 0, "{found:?}");
    assert_eq!(found.len(), 3, "notes sharing no word are not results: {found:?}");
}

#[tokio::test]
async fn limits_are_enforced_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("NOTES_NOTE_MAX_BYTES", "20"), ("NOTES_USER_MAX_NOTES", "3"), ("NOTES_USER_MAX_BYTES", "30")];
    let module = start(&dir.path().join("notes.db"), &env);
    let client = module.client();
    let big = call(&client, "u", "save_note", json!({"content": "x".repeat(21)})).await;
    assert_eq!(error_kind(&big), "invalid_arguments");
    assert!(big["error"].as_str().unwrap().contains("limit of 20 bytes per note (NOTES_NOTE_MAX_BYTES)"), "{big}");
    ok(&client, "u", "save_note", json!({"content": "x".repeat(20)})).await;
    let quota = call(&client, "u", "save_note", json!({"content": "x".repeat(11)})).await;
    assert!(quota["error"].as_str().unwrap().contains("(20 of 30 bytes used, NOTES_USER_MAX_BYTES)"), "{quota}");
    ok(&client, "u", "save_note", json!({"content": "a"})).await;
    ok(&client, "u", "save_note", json!({"content": "b"})).await;
    let count = call(&client, "u", "save_note", json!({"content": "c"})).await;
    assert!(count["error"].as_str().unwrap().contains("3 notes, the limit per user (NOTES_USER_MAX_NOTES)"), "{count}");
    ok(&client, "someone else", "save_note", json!({"content": "c"})).await;
    // Tags and source count against the quota too, not only the content.
    let sourced = call(&client, "w", "save_note", json!({"content": "x", "source": "s".repeat(30)})).await;
    assert!(sourced["error"].as_str().unwrap().contains("storing 31 more bytes"), "{sourced}");
    let tagged =
        call(&client, "w", "save_note", json!({"content": "x", "tags": ["t".repeat(15), "u".repeat(15)]})).await;
    assert!(tagged["error"].as_str().unwrap().contains("storing 31 more bytes"), "{tagged}");

    let many_tags: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    let tags = call(&client, "v", "save_note", json!({"content": "x", "tags": many_tags})).await;
    assert_eq!(error_kind(&tags), "invalid_arguments");
    let blank_tag = call(&client, "v", "save_note", json!({"content": "x", "tags": ["  "]})).await;
    assert_eq!(error_kind(&blank_tag), "invalid_arguments");
    let query = call(&client, "v", "search_notes", json!({"query": "x".repeat(16 * 1024 + 1)})).await;
    assert_eq!(error_kind(&query), "invalid_arguments");
    let cursor = call(&client, "v", "list_notes", json!({"cursor": "not a cursor"})).await;
    assert_eq!(error_kind(&cursor), "invalid_arguments");
}

#[tokio::test]
async fn all_users_notes_together_are_bounded_by_the_store_setting() {
    let dir = tempfile::tempdir().unwrap();
    // Two 1-byte notes of 1-byte user ids fit, not three.
    let one = notes::store::store_bytes("a", "x", &[], None);
    let setting = (2 * one + one / 2).to_string();
    let module = start(&dir.path().join("notes.db"), &[("NOTES_STORE_MAX_BYTES", &setting)]);
    let client = module.client();
    let kept = ok(&client, "a", "save_note", json!({"content": "x"})).await;
    ok(&client, "b", "save_note", json!({"content": "x"})).await;
    let full = call(&client, "c", "save_note", json!({"content": "x"})).await;
    assert_eq!(error_kind(&full), "execution_failed");
    let message = full["error"].as_str().unwrap();
    assert!(message.contains(&format!("storing it counts {one} more bytes")), "{full}");
    assert!(message.contains(&format!("past NOTES_STORE_MAX_BYTES ({} of {setting} bytes used)", 2 * one)), "{full}");
    ok(&client, "a", "delete_note", json!({"note_id": kept["note_id"]})).await;
    ok(&client, "c", "save_note", json!({"content": "x"})).await;
}

#[tokio::test]
async fn a_search_past_its_time_budget_is_stopped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    // Another user's many notes, each with its own words, written straight
    // into the database: a prefix of those words walks all of them.
    let roomy = notes::store::Limits {
        note_max_bytes: 1 << 20,
        user_max_notes: 1 << 20,
        user_max_bytes: 1 << 40,
        store_max_bytes: 1 << 40,
    };
    let store = notes::store::Store::open(&db, roomy, Duration::from_secs(5)).unwrap();
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    let many = (0..20_000).map(|i| notes::store::NewNote {
        content: words.iter().map(|word| format!("{word}{i} ")).collect(),
        tags: Vec::new(),
        source: None,
    });
    store.import("other", many).unwrap();
    let mine = notes::store::NewNote { content: "alpha bravo".into(), tags: Vec::new(), source: None };
    store.save("me", mine, || false).unwrap();
    drop(store);
    let pathological = json!({"query": "alph* brav* char* delt* echo* foxt* golf* hote*"});

    let hurried = start(&db, &[("NOTES_SEARCH_MAX_MS", "1")]);
    let stopped = call(&hurried.client(), "me", "search_notes", pathological.clone()).await;
    assert_eq!(error_kind(&stopped), "timeout", "{stopped}");
    assert!(stopped["error"].as_str().unwrap().contains("1 ms (NOTES_SEARCH_MAX_MS)"), "{stopped}");
    drop(hurried);

    let module = start(&db, &[]);
    let client = module.client();
    assert_eq!(search(&client, "me", json!({"query": "bravo"})).await, ["alpha bravo"]);
    // One letter is not an indexed prefix: searched as a word, it finds nothing here.
    let letters: String = ('a'..='z').map(|letter| format!("{letter}* ")).collect();
    assert!(search(&client, "me", json!({"query": letters})).await.is_empty());
    let nine = call(&client, "me", "search_notes", json!({"query": "al* br* ch* de* ec* fo* go* ho* in*"})).await;
    assert_eq!(error_kind(&nine), "invalid_arguments", "{nine}");
    assert!(nine["error"].as_str().unwrap().contains("at most 8 prefix searches"), "{nine}");
}

#[tokio::test]
async fn a_save_answered_timeout_while_the_database_was_locked_is_not_written_later() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    // Statements wait for a lock longer than the tool's 30 s timeout.
    let module = start(&db, &[("NOTES_BUSY_TIMEOUT_MS", "60000")]);
    let client = module.client();
    ok(&client, "u", "save_note", json!({"content": "before the lock"})).await;
    // Another process holds the write lock until the save is answered.
    let other = rusqlite::Connection::open(&db).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let late = call(&client, "u", "save_note", json!({"content": "answered timeout"})).await;
    assert_eq!(error_kind(&late), "timeout", "{late}");
    other.execute_batch("ROLLBACK").unwrap();
    // Writes run one at a time: this one starts after the given-up save ended.
    ok(&client, "u", "save_note", json!({"content": "after the lock"})).await;
    let listed = ok(&client, "u", "list_notes", json!({})).await;
    let contents: Vec<&str> =
        listed["notes"].as_array().unwrap().iter().map(|n| n["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["after the lock", "before the lock"], "a save answered timeout was not stored");
}

#[tokio::test]
async fn a_sigkill_during_a_thousand_saves_loses_no_acknowledged_note() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.db");
    let mut module = start(&db, &[]);
    let client = module.client();
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let answered = Arc::new(AtomicUsize::new(0));
    let saves = {
        let (acknowledged, answered) = (Arc::clone(&acknowledged), Arc::clone(&answered));
        tokio::spawn(async move {
            futures::stream::iter(0..1000)
                .for_each_concurrent(16, |i| {
                    let (client, acknowledged, answered) =
                        (client.clone(), Arc::clone(&acknowledged), Arc::clone(&answered));
                    async move {
                        let arguments =
                            json!({"content": format!("note number {i} about crash safety"), "tags": ["crash"]});
                        if let Ok(answer) = client.try_call("notes.save_note", arguments, Some("u")).await
                            && answer["success"] == true
                        {
                            acknowledged.lock().unwrap().push(answer["result"]["note_id"].as_str().unwrap().to_owned());
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
                .await;
        })
    };
    while answered.load(Ordering::SeqCst) < 300 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    module.kill();
    saves.await.unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() >= 300 && acknowledged.len() < 1000, "killed mid-way: {}", acknowledged.len());

    let restarted = start(&db, &[]);
    let client = restarted.client();
    let stored = all_ids(&client, "u").await;
    let missing: Vec<&String> = acknowledged.iter().filter(|id| !stored.contains(id)).collect();
    assert!(missing.is_empty(), "{} acknowledged notes lost: {missing:?}", missing.len());
    let found =
        ok(&client, "u", "search_notes", json!({"query": "crash safety", "tags": ["crash"], "limit": 50})).await;
    assert_eq!(found["results"].as_array().unwrap().len(), 50);
    ok(&client, "u", "save_note", json!({"content": "after the crash"})).await;
}
