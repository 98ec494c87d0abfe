//! Per-user file storage under one root directory.
//!
//! Layout: `<root>/users/<sha256 of user_id>/<file id>.rec`. The user's
//! directory name is a digest, so no user id (they are untrusted text too)
//! can name a path; the file name is a UUID the module generated, so no
//! argument can either. Each `.rec` file holds metadata and content
//! together (see [`crate::record`]) and is created atomically (see
//! [`crate::atomic`]): after a crash at any point every file is whole or
//! absent, and the only leftovers, temporary files, are removed when the
//! store opens. One module process owns a root at a time.
//!
//! Nothing under the root is trusted to be what the module made: a
//! symbolic link or special file planted in place of the users directory,
//! a user directory or a record is refused, never followed. The users
//! directory is opened once, each call opens its user's directory inside
//! it, and every record is reached relative to that open directory (see
//! [`crate::dirs`]), all with `O_NOFOLLOW`; so a name swapped for a link
//! after it was checked redirects nothing. Records are also opened with
//! `O_NONBLOCK` and checked to be regular files.
//!
//! Writes of one user are serialized by a per-user lock (see
//! [`crate::areas`]) so that the size and count limits hold under
//! concurrent calls, and so that no write lands in a user's directory
//! while it is removed with the user's last record; reads need no lock.

use std::fs::{self, File};
use std::io::{self, BufReader};
use std::os::fd::OwnedFd;
use std::path::Path;

use module_sdk::{ErrorKind, ToolErrorKind};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::areas::{AreaLocks, Usage};
use crate::atomic::{self, ChangeError};
use crate::dirs;
use crate::record::{self, FileInfo, FileKind, RecordError};
use crate::total::{self, Full, StoredBytes};

/// The directory under the root that holds the users' areas.
const USERS_DIR: &str = "users";
/// The extension of record files.
const RECORD_EXTENSION: &str = "rec";

/// How much a user may store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest file, in bytes.
    pub file_max_bytes: u64,
    /// Most bytes per user.
    pub user_quota_bytes: u64,
    /// Most files per user.
    pub user_max_files: u64,
    /// Most bytes of all users' records and directories together, on
    /// disk, counted in whole blocks.
    pub store_max_bytes: u64,
}

/// A file to store.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// Its sanitized name.
    pub name: String,
    /// How it was made.
    pub kind: FileKind,
    /// Its media type.
    pub media_type: String,
    /// Its content.
    pub content: Vec<u8>,
}

/// Why a storage operation failed; messages are meant for the model.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such file in the caller's area.
    #[error("there is no file with id {0} among your files; list_files shows the ids you have")]
    NotFound(Uuid),
    /// The file is larger than the per-file limit.
    #[error("the file is {size} bytes, more than the limit of {limit} bytes per file (FILE_MAX_BYTES)")]
    TooLarge {
        /// The file's size.
        size: u64,
        /// The per-file limit.
        limit: u64,
    },
    /// A stored file is larger than the per-file limit (lowered since).
    #[error(
        "file {id} is {size} bytes, more than FILE_MAX_BYTES ({limit} bytes), which was lowered after it was stored: it can be listed and deleted, and read once an operator raises FILE_MAX_BYTES"
    )]
    StoredOverLimit {
        /// The file's id.
        id: Uuid,
        /// The file's size.
        size: u64,
        /// The per-file limit.
        limit: u64,
    },
    /// The user's quota would be exceeded.
    #[error(
        "storing {size} more bytes would exceed your storage quota ({used} of {quota} bytes used, USER_QUOTA_BYTES); delete files to make room"
    )]
    QuotaExceeded {
        /// The new file's size.
        size: u64,
        /// Bytes stored already.
        used: u64,
        /// The per-user quota.
        quota: u64,
    },
    /// All users' files together take as many bytes as allowed.
    #[error(
        "the file store is full: all users' files take {used} of the {limit} bytes STORE_MAX_BYTES allows; an operator must raise STORE_MAX_BYTES or make room"
    )]
    StoreFull {
        /// Bytes the records take.
        used: u64,
        /// `STORE_MAX_BYTES`.
        limit: u64,
    },
    /// The user has as many files as allowed.
    #[error("you already have {0} files, the most allowed (USER_MAX_FILES); delete files to make room")]
    TooManyFiles(u64),
    /// Something under the root is a link or special file the module did not make.
    #[error(
        "refused: {0} is not a regular file or directory of this module (possibly a planted link); an operator must check the storage"
    )]
    Unsafe(&'static str),
    /// A record failed its checks.
    #[error("file {id} is damaged and cannot be read ({source}); an operator must check the storage")]
    Damaged {
        /// The damaged file's id.
        id: Uuid,
        /// What is wrong with it.
        source: RecordError,
    },
    /// The call was given up (its timeout passed, or its caller left)
    /// before its change was made.
    #[error(
        "the call was given up before its change was made (other calls of yours were being served); nothing was changed"
    )]
    GivenUp,
    /// The file system failed.
    #[error("storage error: {0}")]
    Io(#[from] io::Error),
}

impl ToolErrorKind for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            StoreError::NotFound(_) => ErrorKind::NotFound,
            StoreError::TooLarge { .. } => ErrorKind::InvalidArguments,
            StoreError::GivenUp => ErrorKind::Timeout,
            StoreError::QuotaExceeded { .. }
            | StoreError::TooManyFiles(_)
            | StoreError::StoreFull { .. }
            | StoreError::StoredOverLimit { .. }
            | StoreError::Unsafe(_)
            | StoreError::Damaged { .. }
            | StoreError::Io(_) => ErrorKind::ExecutionFailed,
        }
    }
}

impl From<Full> for StoreError {
    fn from(full: Full) -> Self {
        StoreError::StoreFull { used: full.used, limit: full.limit }
    }
}

impl StoreError {
    /// Whether the storage itself is not as this module left it (a planted
    /// link, a damaged record): something an operator must look at.
    pub fn is_integrity_problem(&self) -> bool {
        matches!(self, StoreError::Unsafe(_) | StoreError::Damaged { .. })
    }
}

/// The storage of all users' files.
#[derive(Debug)]
pub struct Store {
    /// The users directory, held open.
    users: OwnedFd,
    limits: Limits,
    areas: AreaLocks,
    /// Bytes of all users' records.
    stored: StoredBytes,
}

impl Store {
    /// Opens (creating when missing) the store at `root`, removes the
    /// temporary files an earlier crash left and counts the bytes stored.
    pub fn open(root: &Path, limits: Limits) -> Result<Self, StoreError> {
        fs::create_dir_all(root)?;
        let root = root.canonicalize()?;
        let root_dir = dirs::open(&root)?;
        let users = match dirs::open_child(&root_dir, USERS_DIR) {
            Ok(Some(users)) => users,
            Ok(None) => {
                dirs::create_child(&root_dir, USERS_DIR)?;
                atomic::sync_dir(&root_dir)?;
                dirs::open_child(&root_dir, USERS_DIR)?.ok_or(StoreError::Unsafe("the users directory"))?
            }
            Err(e) if dirs::is_not_a_directory(&e) => return Err(StoreError::Unsafe("the users directory")),
            Err(e) => return Err(e.into()),
        };
        let used = sweep_and_measure(&users)?;
        Ok(Self { users, limits, areas: AreaLocks::default(), stored: StoredBytes::new(used, limits.store_max_bytes) })
    }

    /// The limits this store enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Stores `file` for `user_id` under a new id, within the limits.
    /// Nothing is stored once `abandoned` says the call was given up
    /// (checked with the user's lock taken, see [`StoreError::GivenUp`]).
    pub fn create(&self, user_id: &str, file: NewFile, abandoned: impl Fn() -> bool) -> Result<FileInfo, StoreError> {
        let size = file.content.len() as u64;
        if size > self.limits.file_max_bytes {
            return Err(StoreError::TooLarge { size, limit: self.limits.file_max_bytes });
        }
        self.areas.with_area(&area_name(user_id), |usage| {
            unless_given_up(&abandoned)?;
            self.create_locked(user_id, file, size, usage)
        })
    }

    /// [`Store::create`] once the user's lock is held: every limit is
    /// checked, and the record's space (with the directory's, for a user's
    /// first file) reserved, before anything is created.
    fn create_locked(
        &self,
        user_id: &str,
        file: NewFile,
        size: u64,
        usage: &mut Option<Usage>,
    ) -> Result<FileInfo, StoreError> {
        let area = self.existing_area(user_id)?;
        let current = match (*usage, &area) {
            (Some(current), _) => current,
            (None, Some(dir)) => self.usage_of(dir)?,
            (None, None) => Usage::default(),
        };
        if current.files >= self.limits.user_max_files {
            return Err(StoreError::TooManyFiles(self.limits.user_max_files));
        }
        if current.bytes + size > self.limits.user_quota_bytes {
            return Err(StoreError::QuotaExceeded { size, used: current.bytes, quota: self.limits.user_quota_bytes });
        }
        let id = Uuid::new_v4();
        let info = FileInfo {
            file_id: id.to_string(),
            name: file.name,
            kind: file.kind,
            media_type: file.media_type,
            size_bytes: size,
            sha256: record::sha256_hex(&file.content),
            created_at: OffsetDateTime::now_utc().format(&Rfc3339).expect("the current time always formats"),
        };
        let record = record::encode(&info, &file.content);
        let record_charge = total::charge(record.len() as u64);
        match area {
            Some(dir) => {
                let reserved = self.stored.reserve(record_charge)?;
                made(atomic::create_file(&dir, &record_name(id), &record), id)?;
                reserved.keep();
            }
            None => {
                let reserved = self.stored.reserve(total::BLOCK + record_charge)?;
                if let Err(FirstRecordFailed { error, area_stays }) = self.create_first_record(user_id, id, &record) {
                    // The directory, if it could not be removed again, stays counted.
                    if area_stays {
                        reserved.keep();
                        self.stored.release(record_charge);
                    }
                    return Err(error);
                }
                reserved.keep();
            }
        }
        *usage = Some(Usage { bytes: current.bytes + size, files: current.files + 1 });
        Ok(info)
    }

    /// Creates the user's directory (durably) and the record `id` in it;
    /// on failure removes the directory again when it is empty, and tells
    /// whether it stayed.
    fn create_first_record(&self, user_id: &str, id: Uuid, record: &[u8]) -> Result<(), FirstRecordFailed> {
        let name = area_name(user_id);
        if let Err(error) = dirs::create_child(&self.users, &name) {
            return Err(FirstRecordFailed { error: error.into(), area_stays: false });
        }
        let written = atomic::sync_dir(&self.users).map_err(StoreError::from).and_then(|()| {
            let dir = self.existing_area(user_id)?.ok_or(StoreError::Unsafe("your storage area"))?;
            Ok(made(atomic::create_file(&dir, &record_name(id), record), id)?)
        });
        written.map_err(|error| FirstRecordFailed { error, area_stays: !self.remove_area_if_empty(&name) })
    }

    /// The file `id` of `user_id`, with its content verified.
    pub fn read(&self, user_id: &str, id: Uuid) -> Result<(FileInfo, Vec<u8>), StoreError> {
        let dir = self.existing_area(user_id)?.ok_or(StoreError::NotFound(id))?;
        let mut reader = BufReader::new(self.open_record(&dir, id)?);
        let info = record::read_header(&mut reader).map_err(|source| StoreError::Damaged { id, source })?;
        check_id(&info, id)?;
        // The content is read into memory: no more than the per-file limit.
        if info.size_bytes > self.limits.file_max_bytes {
            return Err(StoreError::StoredOverLimit { id, size: info.size_bytes, limit: self.limits.file_max_bytes });
        }
        let content = record::read_content(&mut reader, &info).map_err(|source| StoreError::Damaged { id, source })?;
        Ok((info, content))
    }

    /// Every readable file of `user_id`, oldest first.
    pub fn list(&self, user_id: &str) -> Result<Vec<FileInfo>, StoreError> {
        let Some(dir) = self.existing_area(user_id)? else { return Ok(Vec::new()) };
        let mut files = Vec::new();
        for name in dirs::names(&dir)? {
            let Some(id) = record_id(&name) else { continue };
            match self.open_record(&dir, id).and_then(|file| header_of(file, id)) {
                Ok(info) => files.push(info),
                Err(error) => tracing::warn!(file_id = %id, %error, "skipping an unreadable record"),
            }
        }
        files.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.file_id.cmp(&b.file_id)));
        Ok(files)
    }

    /// Deletes the file `id` of `user_id`; returns what it was. The user's
    /// directory goes with the last file, so users who no longer store
    /// anything take no space. Nothing is deleted once `abandoned` says the
    /// call was given up (checked with the user's lock taken).
    pub fn delete(&self, user_id: &str, id: Uuid, abandoned: impl Fn() -> bool) -> Result<FileInfo, StoreError> {
        let name = area_name(user_id);
        self.areas.with_area(&name, |usage| {
            unless_given_up(&abandoned)?;
            let dir = self.existing_area(user_id)?.ok_or(StoreError::NotFound(id))?;
            // Opening first proves it is a regular record of this user, not a link.
            let file = self.open_record(&dir, id)?;
            let on_disk = file.metadata()?.len();
            let info = header_of(file, id)?;
            made(atomic::remove_file(&dir, &record_name(id)), id)?;
            self.stored.release(total::charge(on_disk));
            if let Some(current) = usage.as_mut() {
                current.bytes = current.bytes.saturating_sub(info.size_bytes);
                current.files = current.files.saturating_sub(1);
            }
            // The user's lock, held here, keeps creates out of the directory.
            if self.remove_area_if_empty(&name) {
                self.stored.release(total::BLOCK);
            }
            Ok(info)
        })
    }

    /// The user's directory when it exists, checked to be a real directory.
    fn existing_area(&self, user_id: &str) -> Result<Option<OwnedFd>, StoreError> {
        match dirs::open_child(&self.users, &area_name(user_id)) {
            Err(e) if dirs::is_not_a_directory(&e) => Err(StoreError::Unsafe("your storage area")),
            opened => Ok(opened?),
        }
    }

    /// Removes the user's directory `name` (durably) when it holds nothing;
    /// whether it is gone (removed, or found gone already). One that stays
    /// (holding entries, or on an error, logged) stays counted. Called with
    /// the user's lock held.
    fn remove_area_if_empty(&self, name: &str) -> bool {
        match dirs::remove_empty_child(&self.users, name) {
            Ok(removed) => {
                if removed && let Err(error) = atomic::sync_dir(&self.users) {
                    tracing::warn!(%error, "removed a user directory but could not flush the users directory to disk");
                }
                removed
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            Err(error) => {
                tracing::warn!(%error, "could not remove an empty user directory");
                false
            }
        }
    }

    /// Opens a record without following links or blocking on special files,
    /// refusing anything but a regular file. Its size is not checked here:
    /// one stored before `FILE_MAX_BYTES` was lowered can still be listed
    /// and deleted (only its header is read), just not read whole.
    fn open_record(&self, dir: &OwnedFd, id: Uuid) -> Result<File, StoreError> {
        let file = match dirs::open_file(dir, &record_name(id)) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(StoreError::NotFound(id)),
            Err(e) if dirs::is_link(&e) => return Err(StoreError::Unsafe("the file's storage entry")),
            Err(e) => return Err(e.into()),
        };
        if !file.metadata()?.is_file() {
            return Err(StoreError::Unsafe("the file's storage entry"));
        }
        Ok(file)
    }

    /// A user's usage, counted from the records on disk.
    fn usage_of(&self, dir: &OwnedFd) -> Result<Usage, StoreError> {
        let mut usage = Usage::default();
        for name in dirs::names(dir)? {
            let Some(id) = record_id(&name) else { continue };
            // An unreadable record still takes space; count it at its size on disk.
            let size = match self.open_record(dir, id).and_then(|file| header_of(file, id)) {
                Ok(info) => info.size_bytes,
                Err(_) => dirs::entry_of(dir, &name)?.1,
            };
            usage.bytes += size;
            usage.files += 1;
        }
        Ok(usage)
    }
}

/// Removes the temporary files an earlier crash left in every user's area,
/// and the areas left empty; the bytes the other areas and their records
/// take, as [`total`] counts them.
fn sweep_and_measure(users: &OwnedFd) -> Result<u64, StoreError> {
    let (mut removed, mut emptied, mut used) = (0, 0, 0);
    for name in dirs::names(users)? {
        match dirs::open_child(users, &name) {
            Ok(Some(area)) => {
                removed += atomic::remove_temporaries(&area)?;
                let entries = dirs::names(&area)?;
                if entries.is_empty() && dirs::remove_empty_child(users, &name)? {
                    emptied += 1;
                    continue;
                }
                used += total::BLOCK;
                for record in entries.iter().filter(|name| record_id(name).is_some()) {
                    used += total::charge(dirs::entry_of(&area, record)?.1);
                }
            }
            Ok(None) => {}
            Err(e) if dirs::is_not_a_directory(&e) => {
                tracing::warn!(entry = name, "skipping a non-directory in the users directory");
            }
            Err(e) => return Err(e.into()),
        }
    }
    if removed > 0 {
        tracing::info!(removed, "removed temporary files left by an interrupted write");
    }
    if emptied > 0 {
        atomic::sync_dir(users)?;
        tracing::info!(emptied, "removed empty user directories");
    }
    Ok(used)
}

/// A user's first record not made: why, and whether the directory made
/// for it stayed (it could not be removed again), taking its block.
struct FirstRecordFailed {
    error: StoreError,
    area_stays: bool,
}

/// Whether a change was made. One made but not flushed to disk is logged
/// and treated as made: every later call sees it and counts it (a crash
/// may still undo it; the count made at the next start follows the disk).
fn made(result: Result<(), ChangeError>, id: Uuid) -> io::Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(ChangeError::NotFlushed(error)) => {
            tracing::warn!(file_id = %id, %error, "a file's change could not be flushed to disk; a crash may undo it");
            Ok(())
        }
        Err(ChangeError::NotMade(error)) => Err(error),
    }
}

/// The directory name of a user's area: the hex SHA-256 of the user id.
fn area_name(user_id: &str) -> String {
    record::sha256_hex(user_id.as_bytes())
}

fn record_name(id: Uuid) -> String {
    format!("{}.{RECORD_EXTENSION}", id.hyphenated())
}

/// The id of a record file name, only when it is exactly the name this
/// store gives (so temporary and foreign files are ignored).
fn record_id(file_name: &str) -> Option<Uuid> {
    let id = Uuid::try_parse(file_name.strip_suffix(&format!(".{RECORD_EXTENSION}"))?).ok()?;
    (record_name(id) == file_name).then_some(id)
}

/// [`StoreError::GivenUp`] once `abandoned` says the call was given up: a
/// change waits for the user's lock (behind the user's other calls), and one
/// whose call was answered `timeout` meanwhile must not be made after all.
fn unless_given_up(abandoned: impl Fn() -> bool) -> Result<(), StoreError> {
    if abandoned() { Err(StoreError::GivenUp) } else { Ok(()) }
}

fn header_of(file: File, id: Uuid) -> Result<FileInfo, StoreError> {
    let info = record::read_header(&mut BufReader::new(file)).map_err(|source| StoreError::Damaged { id, source })?;
    check_id(&info, id)?;
    Ok(info)
}

/// A record copied to another file's name is damaged, not that file.
fn check_id(info: &FileInfo, id: Uuid) -> Result<(), StoreError> {
    if info.file_id == id.to_string() {
        Ok(())
    } else {
        let source = RecordError::BadHeader(format!("it holds file {}", info.file_id));
        Err(StoreError::Damaged { id, source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;
    use std::time::Duration;

    const LIMITS: Limits =
        Limits { file_max_bytes: 100, user_quota_bytes: 250, user_max_files: 4, store_max_bytes: 100_000 };

    fn text(name: &str, content: &str) -> NewFile {
        NewFile {
            name: name.into(),
            kind: FileKind::Document,
            media_type: "text/plain".into(),
            content: content.as_bytes().to_vec(),
        }
    }

    fn only_area(root: &Path) -> PathBuf {
        let mut areas: Vec<PathBuf> = fs::read_dir(root.join(USERS_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(areas.len(), 1);
        areas.pop().unwrap()
    }

    #[test]
    fn files_round_trip_per_user() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        let info = store.create("alice", text("a.txt", "hello"), || false).unwrap();
        let id = Uuid::parse_str(&info.file_id).unwrap();
        assert_eq!(store.read("alice", id).unwrap(), (info.clone(), b"hello".to_vec()));
        assert_eq!(store.list("alice").unwrap(), std::slice::from_ref(&info));
        assert!(store.list("bob").unwrap().is_empty());
        assert!(matches!(store.read("bob", id), Err(StoreError::NotFound(_))));
        assert!(matches!(store.delete("bob", id, || false), Err(StoreError::NotFound(_))));
        assert_eq!(store.delete("alice", id, || false).unwrap(), info);
        assert!(matches!(store.read("alice", id), Err(StoreError::NotFound(_))));
        assert!(matches!(store.delete("alice", id, || false), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn limits_are_enforced_and_freed_by_deletes() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        let too_big = store.create("u", text("big", &"x".repeat(101)), || false).unwrap_err();
        assert_eq!(
            too_big.to_string(),
            "the file is 101 bytes, more than the limit of 100 bytes per file (FILE_MAX_BYTES)"
        );
        let first = store.create("u", text("1", &"x".repeat(100)), || false).unwrap();
        store.create("u", text("2", &"x".repeat(100)), || false).unwrap();
        let full = store.create("u", text("3", &"x".repeat(51)), || false).unwrap_err();
        assert!(matches!(full, StoreError::QuotaExceeded { size: 51, used: 200, quota: 250 }), "{full}");
        assert!(full.to_string().contains("(200 of 250 bytes used, USER_QUOTA_BYTES)"), "{full}");
        store.delete("u", Uuid::parse_str(&first.file_id).unwrap(), || false).unwrap();
        store.create("u", text("3", &"x".repeat(51)), || false).unwrap();
        store.create("u", text("4", ""), || false).unwrap();
        store.create("u", text("5", ""), || false).unwrap();
        let many = store.create("u", text("6", ""), || false).unwrap_err();
        assert!(matches!(many, StoreError::TooManyFiles(4)), "{many}");
        assert!(many.to_string().contains("4 files, the most allowed (USER_MAX_FILES)"), "{many}");
        // A new process counts the usage from disk.
        let reopened = Store::open(root.path(), LIMITS).unwrap();
        assert!(matches!(reopened.create("u", text("6", ""), || false), Err(StoreError::TooManyFiles(4))));
    }

    #[test]
    fn files_stored_under_a_larger_limit_stay_listed_and_deletable() {
        let root = tempfile::tempdir().unwrap();
        let roomy = Limits { file_max_bytes: 20_000, user_quota_bytes: 100_000, ..LIMITS };
        let big =
            Store::open(root.path(), roomy).unwrap().create("u", text("big", &"x".repeat(20_000)), || false).unwrap();
        let id = Uuid::parse_str(&big.file_id).unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        assert_eq!(store.list("u").unwrap(), std::slice::from_ref(&big), "listed, so its bytes are shown as used");
        let error = store.read("u", id).unwrap_err();
        assert!(matches!(error, StoreError::StoredOverLimit { size: 20_000, limit: 100, .. }), "{error}");
        assert!(!error.is_integrity_problem(), "a lowered setting is not damage");
        assert!(error.to_string().contains("FILE_MAX_BYTES"), "{error}");
        assert_eq!(store.delete("u", id, || false).unwrap(), big, "the user can free the space");
        store.create("u", text("small", &"x".repeat(100)), || false).unwrap();
    }

    #[test]
    fn all_users_together_stay_within_the_store_limit() {
        let root = tempfile::tempdir().unwrap();
        // Each user takes a block for the directory and one for the record.
        let limits = Limits { store_max_bytes: 8 * total::BLOCK + 100, ..LIMITS };
        let store = Store::open(root.path(), limits).unwrap();
        let mut stored = Vec::new();
        let mut refused = None;
        for user in 0..10 {
            match store.create(&format!("user-{user}"), text("f", &"x".repeat(100)), || false) {
                Ok(info) if refused.is_none() => stored.push(info),
                Ok(info) => panic!("stored after a refusal: {info:?}"),
                Err(error) => refused = Some(error),
            }
        }
        let full = refused.expect("the store filled up");
        assert!(matches!(full, StoreError::StoreFull { used: 32_768, limit: 32_868 }), "{full}");
        assert!(full.to_string().contains("STORE_MAX_BYTES"), "{full}");
        assert_eq!(stored.len(), 4, "small files are counted as the blocks they take");
        let areas: Vec<_> = fs::read_dir(root.path().join(USERS_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(areas.len(), stored.len(), "a refused user gets no directory");

        // A new process counts the stored bytes from disk; a deletion makes room.
        let reopened = Store::open(root.path(), limits).unwrap();
        assert!(matches!(
            reopened.create("newcomer", text("f", &"x".repeat(100)), || false),
            Err(StoreError::StoreFull { .. })
        ));
        reopened.delete("user-0", Uuid::parse_str(&stored[0].file_id).unwrap(), || false).unwrap();
        reopened.create("user-0", text("f", &"x".repeat(100)), || false).unwrap();
    }

    #[test]
    fn directories_of_users_without_files_take_no_space() {
        let root = tempfile::tempdir().unwrap();
        let users_dir = root.path().join(USERS_DIR);
        let limits = Limits { store_max_bytes: 8 * total::BLOCK + 100, ..LIMITS };
        let store = Store::open(root.path(), limits).unwrap();
        // Many more users than directories fit in the limit, each gone again.
        for user in 0..100 {
            let user = format!("passing-{user}");
            let info = store.create(&user, text("f", "x"), || false).unwrap();
            store.delete(&user, Uuid::parse_str(&info.file_id).unwrap(), || false).unwrap();
        }
        assert_eq!(fs::read_dir(&users_dir).unwrap().count(), 0, "no directory is left behind");

        // The whole limit is still there: 4 + 3 blocks, each user's directory and records.
        let a: Vec<_> = (0..3).map(|_| store.create("a", text("f", "x"), || false).unwrap()).collect();
        for _ in 0..2 {
            store.create("b", text("f", "x"), || false).unwrap();
        }
        // One block left: a record fits, a new user's directory and record do not.
        let full = store.create("newcomer", text("f", "x"), || false).unwrap_err();
        assert!(matches!(full, StoreError::StoreFull { used: 28_672, .. }), "{full}");
        assert_eq!(fs::read_dir(&users_dir).unwrap().count(), 2, "a refused user gets no directory");
        let refused = Limits { user_quota_bytes: 0, ..limits };
        let error =
            Store::open(root.path(), refused).unwrap().create("newcomer", text("f", "x"), || false).unwrap_err();
        assert!(matches!(error, StoreError::QuotaExceeded { .. }), "{error}");
        assert_eq!(fs::read_dir(&users_dir).unwrap().count(), 2, "nor does a user over the quota");
        store.create("b", text("f", "x"), || false).unwrap();

        // An empty directory left behind is removed at start, not counted.
        fs::create_dir(users_dir.join(area_name("ghost"))).unwrap();
        let reopened = Store::open(root.path(), limits).unwrap();
        assert_eq!(fs::read_dir(&users_dir).unwrap().count(), 2);
        let full = reopened.create("newcomer", text("f", "x"), || false).unwrap_err();
        assert!(matches!(full, StoreError::StoreFull { used: 32_768, .. }), "{full}");
        // A user's last deletion frees the directory's block with the records'.
        for info in &a {
            reopened.delete("a", Uuid::parse_str(&info.file_id).unwrap(), || false).unwrap();
        }
        for _ in 0..3 {
            reopened.create("newcomer", text("f", "x"), || false).unwrap();
        }
    }

    #[test]
    fn a_users_directory_is_never_removed_under_a_concurrent_write() {
        let root = tempfile::tempdir().unwrap();
        let limits = Limits { store_max_bytes: 4 * total::BLOCK, ..LIMITS };
        let store = Store::open(root.path(), limits).unwrap();
        let barrier = std::sync::Barrier::new(3);
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    barrier.wait();
                    for _ in 0..200 {
                        let info = store.create("u", text("f", "x"), || false).unwrap();
                        store.delete("u", Uuid::parse_str(&info.file_id).unwrap(), || false).unwrap();
                    }
                });
            }
        });
        assert_eq!(fs::read_dir(root.path().join(USERS_DIR)).unwrap().count(), 0);
        for _ in 0..3 {
            store.create("v", text("f", "x"), || false).unwrap();
        }
    }

    #[test]
    fn a_change_given_up_while_it_waited_for_the_users_lock_is_not_made() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        let kept = store.create("u", text("kept", "x"), || false).unwrap();
        let id = Uuid::parse_str(&kept.file_id).unwrap();
        // A call already given up changes nothing.
        assert!(matches!(store.create("u", text("late", "x"), || true), Err(StoreError::GivenUp)));
        assert!(matches!(store.delete("u", id, || true), Err(StoreError::GivenUp)));
        // Calls that wait for the user's lock (another call of the user holds
        // it) and are given up (their timeout passes) meanwhile.
        let given_up = AtomicBool::new(false);
        let abandoned = || given_up.load(Ordering::SeqCst);
        let (locked, wait_for_lock) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let holder = scope.spawn(|| {
                store.areas.with_area(&area_name("u"), |_| {
                    locked.send(()).unwrap();
                    while !abandoned() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                })
            });
            wait_for_lock.recv().unwrap();
            let create = scope.spawn(|| store.create("u", text("late", "x"), abandoned).map(|_| ()));
            let delete = scope.spawn(|| store.delete("u", id, abandoned).map(|_| ()));
            std::thread::sleep(Duration::from_millis(100));
            given_up.store(true, Ordering::SeqCst);
            holder.join().unwrap();
            for call in [create, delete] {
                let error = call.join().unwrap().unwrap_err();
                assert!(matches!(error, StoreError::GivenUp), "{error}");
                assert_eq!(error.kind(), ErrorKind::Timeout);
            }
        });
        assert_eq!(store.list("u").unwrap(), [kept], "nothing was stored or deleted");
    }

    #[test]
    fn planted_links_and_special_files_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        fs::write(&secret, "secret").unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        store.create("mallory", text("mine", "x"), || false).unwrap();
        let area = only_area(root.path());
        let id = Uuid::new_v4();
        symlink(&secret, area.join(record_name(id))).unwrap();
        assert!(matches!(store.read("mallory", id), Err(StoreError::Unsafe(_))));
        assert!(matches!(store.delete("mallory", id, || false), Err(StoreError::Unsafe(_))));
        assert_eq!(store.list("mallory").unwrap().len(), 1, "the link is not listed");
        assert_eq!(fs::read_to_string(&secret).unwrap(), "secret");

        // A whole user area replaced by a link to somewhere else.
        fs::rename(&area, outside.path().join("moved")).unwrap();
        symlink(outside.path(), &area).unwrap();
        assert!(matches!(store.list("mallory"), Err(StoreError::Unsafe(_))));
        assert!(matches!(store.create("mallory", text("x", "x"), || false), Err(StoreError::Unsafe(_))));
        assert!(matches!(store.read("mallory", id), Err(StoreError::Unsafe(_))));
    }

    #[test]
    fn directories_swapped_for_links_after_opening_redirect_nothing() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        let first = store.create("u", text("a", "first"), || false).unwrap();
        // The users directory, checked at opening, replaced by a link.
        fs::rename(root.path().join(USERS_DIR), root.path().join("moved")).unwrap();
        symlink(outside.path(), root.path().join(USERS_DIR)).unwrap();
        let second = store.create("u", text("b", "second"), || false).unwrap();
        store.create("newcomer", text("c", "third"), || false).unwrap();
        assert_eq!(store.list("u").unwrap(), [first, second]);
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0, "nothing was written through the link");
        assert_eq!(fs::read_dir(root.path().join("moved")).unwrap().count(), 2);
    }

    #[test]
    fn damaged_and_foreign_records_are_reported_not_served() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::open(root.path(), LIMITS).unwrap();
        let info = store.create("u", text("a", "original"), || false).unwrap();
        let id = Uuid::parse_str(&info.file_id).unwrap();
        let area = only_area(root.path());
        let path = area.join(record_name(id));
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() = b'X';
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(store.read("u", id), Err(StoreError::Damaged { .. })));
        // The same record under another id is not that other file.
        let other = Uuid::new_v4();
        fs::copy(&path, area.join(record_name(other))).unwrap();
        assert!(matches!(store.read("u", other), Err(StoreError::Damaged { .. })));
        fs::write(area.join("notes.txt"), "stray").unwrap();
        assert_eq!(store.list("u").unwrap(), [info], "only the readable record with its own name is listed");
    }

    #[test]
    fn opening_sweeps_temporaries_and_refuses_a_linked_users_directory() {
        let root = tempfile::tempdir().unwrap();
        Store::open(root.path(), LIMITS).unwrap().create("u", text("a", "a"), || false).unwrap();
        let area = only_area(root.path());
        fs::write(area.join(format!("{}half-written", atomic::TEMP_PREFIX)), "par").unwrap();
        Store::open(root.path(), LIMITS).unwrap();
        assert_eq!(fs::read_dir(&area).unwrap().count(), 1);

        let other = tempfile::tempdir().unwrap();
        let linked_root = tempfile::tempdir().unwrap();
        symlink(other.path(), linked_root.path().join(USERS_DIR)).unwrap();
        assert!(matches!(Store::open(linked_root.path(), LIMITS), Err(StoreError::Unsafe(_))));
    }

    #[test]
    fn hostile_user_ids_map_to_plain_directory_names() {
        for user_id in ["../../etc", "/", "a\0b", "", "\u{202E}x", &"x".repeat(10_000)] {
            let name = area_name(user_id);
            assert_eq!(name.len(), 64);
            assert!(name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
        }
        assert_ne!(area_name("alice"), area_name("Alice"));
    }

    #[test]
    fn record_names_parse_only_in_their_canonical_form() {
        let id = Uuid::new_v4();
        assert_eq!(record_id(&record_name(id)), Some(id));
        assert_eq!(record_id(&format!("{}.rec", id.simple())), None);
        assert_eq!(record_id(&format!("{}.rec", id.hyphenated().to_string().to_uppercase())), None);
        assert_eq!(record_id(&format!("{}{id}.rec", atomic::TEMP_PREFIX)), None);
        assert_eq!(record_id(&id.to_string()), None);
    }
}
