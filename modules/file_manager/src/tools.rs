//! The module's tools: create, upload, read, list and delete files of the
//! calling user (the `user_id` the orchestrator injects).

use base64::Engine;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, general_purpose};
use module_sdk::{Context, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::content::Format;
use crate::names::{document_name, upload_name};
use crate::record::{FileInfo, FileKind};
use crate::store::{NewFile, Store, StoreError};

/// The media type of uploads whose extension names no known format.
const BINARY_MEDIA_TYPE: &str = "application/octet-stream";

/// Standard base64, with or without padding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Arguments of `create_document`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CreateDocument {
    /// The document's title; it becomes the file name (characters other than ASCII letters, digits, space, `.`, `-` and `_` are replaced).
    #[schemars(length(min = 1, max = 200))]
    pub title: String,
    /// The document's full text. JSON must parse; CSV rows must all have the same number of fields.
    pub content: String,
    /// The document's format (default `md`).
    #[serde(default)]
    pub format: Format,
}

/// Arguments of `upload_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct UploadFile {
    /// The file's name, without any directory, e.g. `report.pdf`. A `.json` or `.csv` file is checked like a document.
    #[schemars(length(min = 1, max = 255))]
    pub filename: String,
    /// The file's bytes, base64-encoded (standard alphabet; padding and line breaks are optional).
    pub data_base64: String,
}

/// Arguments of `read_document` and `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct FileId {
    /// The file's id, as returned by `create_document`, `upload_file` or `list_files`.
    #[schemars(length(min = 1, max = 64))]
    pub file_id: String,
}

/// Arguments of `list_files` (none).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFiles {}

/// A file's content.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DocumentContent {
    /// What the file is.
    pub file: FileInfo,
    /// How `content` is written.
    pub encoding: ContentEncoding,
    /// The file's content: its text, or base64 when it is not UTF-8 text.
    pub content: String,
}

/// How a file's content is written in a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContentEncoding {
    /// The content is UTF-8 text, as it is.
    Utf8,
    /// The content is binary, base64-encoded (standard alphabet, padded).
    Base64,
}

/// The caller's files.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileList {
    /// The files, oldest first.
    pub files: Vec<FileInfo>,
    /// Bytes stored in all.
    pub used_bytes: u64,
    /// The most bytes that can be stored.
    pub quota_bytes: u64,
    /// The most files that can be kept.
    pub max_files: u64,
}

/// What a deletion removed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    /// The deleted file.
    pub file: FileInfo,
}

/// Create a text document (Markdown, plain text, JSON, CSV or HTML) in the
/// caller's files and return its id.
#[tool(timeout_seconds = 30)]
pub async fn create_document(ctx: Context, args: CreateDocument) -> Result<FileInfo, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let name = document_name(&args.title, args.format.extension()).map_err(|e| invalid("title", e))?;
    let content = args.content.into_bytes();
    // Refuse an oversized document before parsing it (JSON, CSV).
    let limit = ctx.state::<Store>()?.limits().file_max_bytes;
    if content.len() as u64 > limit {
        return Err(StoreError::TooLarge { size: content.len() as u64, limit }.into());
    }
    args.format.validate(&content).map_err(|e| invalid("content", e))?;
    let file = NewFile { name, kind: FileKind::Document, media_type: args.format.media_type().to_owned(), content };
    let abandoned = ctx.given_up();
    with_store(&ctx, move |store| store.create(&user_id, file, abandoned)).await
}

/// Upload a file (any type, base64-encoded) to the caller's files and return its id.
#[tool(timeout_seconds = 30)]
pub async fn upload_file(ctx: Context, args: UploadFile) -> Result<FileInfo, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let name = upload_name(&args.filename).map_err(|e| invalid("filename", e))?;
    let limit = ctx.state::<Store>()?.limits().file_max_bytes;
    let encoded: Vec<u8> = args.data_base64.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    // Refuse an oversized upload before decoding it (base64 is 4 bytes per 3).
    let smallest_size = (encoded.len() as u64 / 4 * 3).saturating_sub(2);
    if smallest_size > limit {
        return Err(StoreError::TooLarge { size: smallest_size, limit }.into());
    }
    let content = BASE64
        .decode(&encoded)
        .map_err(|e| ToolError::invalid_arguments(format!("arguments.data_base64 is not valid base64: {e}")))?;
    let format = Format::of_file_name(&name);
    if let Some(format) = format {
        format.validate(&content).map_err(|e| invalid("data_base64", e))?;
    }
    let media_type = format.map_or(BINARY_MEDIA_TYPE, Format::media_type).to_owned();
    let file = NewFile { name, kind: FileKind::Upload, media_type, content };
    let abandoned = ctx.given_up();
    with_store(&ctx, move |store| store.create(&user_id, file, abandoned)).await
}

/// Read one of the caller's files: its details and content.
#[tool(read_only, idempotent)]
pub async fn read_document(ctx: Context, args: FileId) -> Result<DocumentContent, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let id = parse_file_id(&args.file_id)?;
    let (file, content) = with_store(&ctx, move |store| store.read(&user_id, id)).await?;
    Ok(match String::from_utf8(content) {
        Ok(text) => DocumentContent { file, encoding: ContentEncoding::Utf8, content: text },
        Err(binary) => DocumentContent {
            file,
            encoding: ContentEncoding::Base64,
            content: general_purpose::STANDARD.encode(binary.as_bytes()),
        },
    })
}

/// List the caller's files with their ids, names, sizes and dates, and the storage used.
#[tool(read_only, idempotent)]
pub async fn list_files(ctx: Context, _args: ListFiles) -> Result<FileList, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let (files, limits) = with_store(&ctx, move |store| Ok((store.list(&user_id)?, store.limits()))).await?;
    Ok(FileList {
        used_bytes: files.iter().map(|f| f.size_bytes).sum(),
        files,
        quota_bytes: limits.user_quota_bytes,
        max_files: limits.user_max_files,
    })
}

/// Delete one of the caller's files for good.
#[tool(permission = "user", destructive, idempotent)]
pub async fn delete_file(ctx: Context, args: FileId) -> Result<Deleted, ToolError> {
    let user_id = ctx.require_user_id()?.to_owned();
    let id = parse_file_id(&args.file_id)?;
    let abandoned = ctx.given_up();
    let file = with_store(&ctx, move |store| store.delete(&user_id, id, abandoned)).await?;
    Ok(Deleted { file })
}

/// Runs blocking storage work off the async workers, within the SDK's
/// `MAX_BLOCKING_CALLS`; logs an integrity problem for the operator.
async fn with_store<T: Send + 'static>(
    ctx: &Context,
    work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ToolError> {
    ctx.blocking(move |store: &Store| {
        work(store).inspect_err(|error| {
            if error.is_integrity_problem() {
                tracing::error!(%error, "storage integrity problem");
            }
        })
    })
    .await
}

/// A file id: a UUID, never a path.
fn parse_file_id(text: &str) -> Result<Uuid, ToolError> {
    Uuid::try_parse(text.trim()).map_err(|_| {
        let shown: String = text.chars().take(60).collect();
        ToolError::invalid_arguments(format!(
            "arguments.file_id {shown:?} is not a file id; ids look like 0b7e8f5a-3c1d-4a2b-9e6f-1a2b3c4d5e6f and come from list_files"
        ))
    })
}

fn invalid(argument: &str, error: impl std::fmt::Display) -> ToolError {
    ToolError::invalid_arguments(format!("arguments.{argument}: {error}"))
}
