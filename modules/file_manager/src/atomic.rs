//! Creating files so that a crash at any moment leaves either the whole
//! file or nothing under its name.
//!
//! The bytes go to a temporary file in the same directory, which is
//! flushed to disk (`fsync`), then renamed to its final name (a rename
//! within one file system is atomic), then the directory is flushed so the
//! new name itself survives a power loss. A crash before the rename leaves
//! only a temporary file, which [`remove_temporaries`] deletes at the next
//! start.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use uuid::Uuid;

use crate::dirs;

/// How temporary files start; final names never do.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Why [`create_file`] or [`remove_file`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// Nothing changed.
    #[error(transparent)]
    NotMade(#[from] io::Error),
    /// The change was made, and every later call sees it, but the
    /// directory could not be flushed to disk, so a crash may undo it.
    #[error("the change was made but its directory could not be flushed to disk: {0}")]
    NotFlushed(io::Error),
}

/// Creates `name` in the directory `dir` holding `bytes`, atomically and
/// durably; fails if `name` exists. Every step is relative to `dir`, so
/// the file lands in that directory whatever happens to its path.
pub fn create_file(dir: impl AsFd, name: &str, bytes: &[u8]) -> Result<(), ChangeError> {
    let dir = dir.as_fd();
    let temporary = format!("{TEMP_PREFIX}{}", Uuid::new_v4().simple());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = File::from(
        rustix::fs::openat(dir, temporary.as_str(), flags, Mode::RUSR | Mode::WUSR).map_err(io::Error::from)?,
    );
    let written = file.write_all(bytes).and_then(|()| file.sync_all()).and_then(|()| persist(dir, &temporary, name));
    if written.is_err() {
        // Best effort: what is left is swept at the next start.
        let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
    }
    written?;
    sync_dir(dir).map_err(ChangeError::NotFlushed)
}

/// Gives the temporary file its final name, never replacing a file: an
/// atomic rename, or on file systems without `RENAME_NOREPLACE` a hard link
/// and the temporary name's removal.
fn persist(dir: impl AsFd, temporary: &str, name: &str) -> io::Result<()> {
    let dir = dir.as_fd();
    match rustix::fs::renameat_with(dir, temporary, dir, name, RenameFlags::NOREPLACE) {
        Err(Errno::INVAL | Errno::NOSYS) => {
            rustix::fs::linkat(dir, temporary, dir, name, AtFlags::empty())?;
            Ok(rustix::fs::unlinkat(dir, temporary, AtFlags::empty())?)
        }
        renamed => Ok(renamed?),
    }
}

/// Removes `name` from the directory `dir` durably.
pub fn remove_file(dir: impl AsFd, name: &str) -> Result<(), ChangeError> {
    rustix::fs::unlinkat(dir.as_fd(), name, AtFlags::empty()).map_err(io::Error::from)?;
    sync_dir(dir).map_err(ChangeError::NotFlushed)
}

/// Flushes a directory's entries (new, renamed and removed names) to disk.
pub fn sync_dir(dir: impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(dir)?)
}

/// Deletes the temporary files a crash left in `dir`; returns how many.
pub fn remove_temporaries(dir: impl AsFd) -> io::Result<usize> {
    let dir = dir.as_fd();
    let mut removed = 0;
    for name in dirs::names(dir)? {
        // Checked without following links: a planted link is left alone.
        if name.starts_with(TEMP_PREFIX) && dirs::entry_of(dir, &name)?.0 == FileType::RegularFile {
            rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty())?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn files_are_created_whole_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fd = dirs::open(dir.path()).unwrap();
        create_file(&fd, "a", b"first").unwrap();
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"first");
        let error = create_file(&fd, "a", b"second").unwrap_err();
        assert!(matches!(&error, ChangeError::NotMade(e) if e.kind() == io::ErrorKind::AlreadyExists), "{error}");
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"first");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["a"], "no temporary file is left behind");
        remove_file(&fd, "a").unwrap();
        assert!(!dir.path().join("a").exists());
    }

    #[test]
    fn a_change_made_but_not_flushed_is_told_apart_from_one_not_made() {
        let dir = tempfile::tempdir().unwrap();
        // A directory opened with `O_PATH` serves `openat` and `renameat`,
        // but `fsync` on it fails (`EBADF`), as a failing disk would.
        let path_only = rustix::fs::open(dir.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let error = create_file(&path_only, "a", b"kept").unwrap_err();
        assert!(matches!(error, ChangeError::NotFlushed(_)), "{error}");
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"kept", "the file was made");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left behind");
        let error = remove_file(&path_only, "a").unwrap_err();
        assert!(matches!(error, ChangeError::NotFlushed(_)), "{error}");
        assert!(!dir.path().join("a").exists(), "the file was removed");
        assert!(matches!(remove_file(&path_only, "a"), Err(ChangeError::NotMade(_))));
    }

    #[test]
    fn only_temporary_files_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(format!("{TEMP_PREFIX}abc")), b"half").unwrap();
        fs::write(dir.path().join("kept"), b"whole").unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(format!("{TEMP_PREFIX}link"))).unwrap();
        assert_eq!(remove_temporaries(dirs::open(dir.path()).unwrap()).unwrap(), 1);
        assert!(dir.path().join("kept").exists());
        assert!(outside.path().exists(), "a link's target is never touched");
    }
}
