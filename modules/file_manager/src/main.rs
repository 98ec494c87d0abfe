//! The file_manager module: each user's documents and uploads, stored
//! atomically under `FILES_ROOT` and safe against hostile arguments.
//!
//! Its own settings come from the command line or the environment (see
//! `file_manager --help`); the HTTP server's come from `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES` and `LOG_FORMAT`.

mod areas;
mod atomic;
mod content;
mod dirs;
mod names;
mod record;
mod settings;
mod store;
mod tools;
mod total;

use std::process::ExitCode;

use module_sdk::{Module, PathSettingError};

use crate::settings::{FILES_ROOT, Settings};
use crate::store::Store;

/// The module over the store at `settings.files_root` (opened by its
/// absolute path, which an error names).
fn module(settings: &Settings) -> Result<Module, PathSettingError> {
    let root = FILES_ROOT.absolute(&settings.files_root)?;
    let store =
        Store::open(&root, settings.limits()).map_err(|e| FILES_ROOT.unusable(&settings.files_root, &root, e))?;
    Ok(Module::new(
        "file_manager",
        "Keep the user's own files: create text documents, upload files, read, list and delete them.",
    )
    .version(env!("CARGO_PKG_VERSION"))
    .sdk_flags(settings.sdk)
    .state(store)
    .tool(tools::create_document)
    .tool(tools::upload_file)
    .tool(tools::read_document)
    .tool(tools::list_files)
    .tool(tools::delete_file))
}

#[tokio::main]
async fn main() -> ExitCode {
    module_sdk::run_main("file_manager", async {
        let settings = module_sdk::parse_settings::<Settings>();
        let module = module(&settings).map_err(|e| e.to_string())?;
        module.serve().await.map_err(|e| e.to_string())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use module_sdk::contract::ToolResult;
    use module_sdk::{ErrorKind, Permission, TestClient};
    use serde_json::{Value, json};

    /// A client over a fresh store; keep the directory alive as long as the client.
    fn client(extra: &[&str]) -> (tempfile::TempDir, TestClient) {
        let root = tempfile::tempdir().unwrap();
        let root_arg = root.path().to_str().unwrap().to_owned();
        let args = ["file_manager", "--files-root", root_arg.as_str()].into_iter().chain(extra.iter().copied());
        let client = module(&Settings::try_parse_from(args).unwrap()).unwrap().test_client().unwrap();
        (root, client)
    }

    fn failure(result: &ToolResult) -> (ErrorKind, &str) {
        assert!(!result.success, "{result:?}");
        (result.error_kind.unwrap(), result.error.as_deref().unwrap())
    }

    async fn create(client: &TestClient, user: &str, arguments: Value) -> String {
        let result = client.call_as(user, "create_document", arguments).await;
        assert!(result.success, "{result:?}");
        result.result["file_id"].as_str().unwrap().to_owned()
    }

    #[test]
    fn the_manifest_marks_delete_as_a_destructive_user_tool() {
        let (_root, client) = client(&[]);
        let tools = &client.manifest().tools;
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let expected = [
            "file_manager.create_document",
            "file_manager.upload_file",
            "file_manager.read_document",
            "file_manager.list_files",
            "file_manager.delete_file",
        ];
        assert_eq!(names, expected);
        let delete = &tools[4];
        assert_eq!(delete.required_permission, Permission::User);
        assert!(delete.annotations.as_ref().unwrap().destructive);
        let format = tools[0].parameters.iter().find(|p| p.name == "format").unwrap();
        assert_eq!(format.allowed.as_deref(), Some(&["md", "txt", "json", "csv", "html"].map(String::from)[..]));
        for tool in tools {
            assert!(
                tool.parameters.iter().all(|p| !p.description.starts_with("The `")),
                "{}: every argument documented",
                tool.name
            );
        }
    }

    #[tokio::test]
    async fn documents_are_created_read_listed_and_deleted() {
        let (_root, client) = client(&[]);
        let id = create(&client, "alice", json!({"title": "Plan", "content": "# Plan\n", "format": "md"})).await;
        let read = client.call_as("alice", "read_document", json!({"file_id": id})).await;
        assert_eq!(read.result["content"], "# Plan\n");
        assert_eq!(read.result["encoding"], "utf8");
        assert_eq!(read.result["file"]["name"], "Plan.md");
        assert_eq!(read.result["file"]["media_type"], "text/markdown");
        let list = client.call_as("alice", "list_files", json!({})).await;
        assert_eq!(list.result["files"].as_array().unwrap().len(), 1);
        assert_eq!(list.result["used_bytes"], 7);
        let deleted = client.call_as("alice", "delete_file", json!({"file_id": id})).await;
        assert_eq!(deleted.result["file"]["file_id"], id.as_str());
        let again = client.call_as("alice", "delete_file", json!({"file_id": id})).await;
        assert_eq!(failure(&again).0, ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn uploads_round_trip_binary_content() {
        let (_root, client) = client(&[]);
        let upload =
            client.call_as("u", "upload_file", json!({"filename": "pixel.png", "data_base64": "iVBORw0K\nGgo="})).await;
        assert!(upload.success, "{upload:?}");
        assert_eq!(upload.result["media_type"], "application/octet-stream");
        assert_eq!(upload.result["size_bytes"], 8);
        let id = upload.result["file_id"].as_str().unwrap();
        let read = client.call_as("u", "read_document", json!({"file_id": id})).await;
        assert_eq!(
            (read.result["encoding"].as_str(), read.result["content"].as_str()),
            (Some("base64"), Some("iVBORw0KGgo="))
        );
        let bad = client.call_as("u", "upload_file", json!({"filename": "x.bin", "data_base64": "not base64!"})).await;
        assert_eq!(failure(&bad).0, ErrorKind::InvalidArguments);
        let bad_json =
            client.call_as("u", "upload_file", json!({"filename": "x.json", "data_base64": "eyJhIjo="})).await;
        assert!(failure(&bad_json).1.contains("not valid JSON"), "{bad_json:?}");
    }

    #[tokio::test]
    async fn json_and_csv_are_validated_before_storing() {
        let (_root, client) = client(&[]);
        let bad_json = client
            .call_as("u", "create_document", json!({"title": "t", "content": "{\"a\": }", "format": "json"}))
            .await;
        let (kind, message) = failure(&bad_json);
        assert_eq!(kind, ErrorKind::InvalidArguments);
        assert!(message.starts_with("arguments.content: the content is not valid JSON"), "{message}");
        let bad_csv =
            client.call_as("u", "create_document", json!({"title": "t", "content": "a,b\n1\n", "format": "csv"})).await;
        assert!(failure(&bad_csv).1.contains("not valid CSV"), "{bad_csv:?}");
        let list = client.call_as("u", "list_files", json!({})).await;
        assert_eq!(list.result["files"], json!([]), "nothing was stored");
        create(&client, "u", json!({"title": "t", "content": "a,b\n1,2\n", "format": "csv"})).await;
    }

    #[tokio::test]
    async fn calls_without_a_user_id_fail_clearly() {
        let (_root, client) = client(&[]);
        for (tool, arguments) in [
            ("create_document", json!({"title": "t", "content": "c"})),
            ("upload_file", json!({"filename": "a.txt", "data_base64": "YQ=="})),
            ("read_document", json!({"file_id": uuid::Uuid::new_v4().to_string()})),
            ("list_files", json!({})),
            ("delete_file", json!({"file_id": uuid::Uuid::new_v4().to_string()})),
        ] {
            let result = client.call(tool, arguments).await;
            let (kind, message) = failure(&result);
            assert_eq!(kind, ErrorKind::PermissionDenied, "{tool}");
            assert!(message.contains("user_id"), "{tool}: {message}");
        }
    }

    #[tokio::test]
    async fn limits_give_clear_errors() {
        let (_root, client) = client(&["--file-max-bytes", "10", "--user-quota-bytes", "15"]);
        let big = client.call_as("u", "create_document", json!({"title": "t", "content": "12345678901"})).await;
        let (kind, message) = failure(&big);
        assert_eq!(kind, ErrorKind::InvalidArguments);
        assert_eq!(message, "the file is 11 bytes, more than the limit of 10 bytes per file (FILE_MAX_BYTES)");
        let big_json = client
            .call_as("u", "create_document", json!({"title": "t", "content": "x".repeat(11), "format": "json"}))
            .await;
        let (kind, message) = failure(&big_json);
        assert_eq!(kind, ErrorKind::InvalidArguments);
        assert!(message.contains("(FILE_MAX_BYTES)"), "refused for its size before it is parsed: {message}");
        let big_upload =
            client.call_as("u", "upload_file", json!({"filename": "a", "data_base64": "A".repeat(4000)})).await;
        assert!(failure(&big_upload).1.contains("more than the limit of 10 bytes"), "{big_upload:?}");
        create(&client, "u", json!({"title": "t", "content": "1234567890"})).await;
        let full = client.call_as("u", "create_document", json!({"title": "t", "content": "123456"})).await;
        assert!(
            failure(&full).1.contains("exceed your storage quota (10 of 15 bytes used, USER_QUOTA_BYTES)"),
            "{full:?}"
        );
        create(&client, "other user", json!({"title": "t", "content": "1234567890"})).await;
    }

    #[tokio::test]
    async fn file_ids_are_never_paths() {
        let (_root, client) = client(&[]);
        for file_id in
            ["../../etc/passwd", "/etc/passwd", "..", "a\0b", "%2e%2e%2f", "0b7e8f5a-3c1d-4a2b-9e6f-1a2b3c4d5e6f/../x"]
        {
            for tool in ["read_document", "delete_file"] {
                let result = client.call_as("u", tool, json!({"file_id": file_id})).await;
                let (kind, message) = failure(&result);
                assert_eq!(kind, ErrorKind::InvalidArguments, "{tool} {file_id:?}");
                assert!(message.contains("is not a file id"), "{message}");
            }
        }
    }
}
