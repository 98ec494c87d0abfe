//! Creating files so that a crash at any moment leaves either the whole
//! file or nothing under its name.
//!
//! The bytes go to a temporary file in the same directory, which is
//! flushed to disk (`fsync`), then renamed to its final name (a rename
//! within one file system is atomic), then the directory is flushed so the
//! new name itself survives a power loss. A crash before the rename leaves
//! only a temporary file, which [`remove_temporaries`] deletes at the next
//! start.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// How temporary files start; final names never do.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Creates `dir/name` holding `bytes`, atomically and durably; fails if
/// `dir/name` exists.
pub fn create_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut temporary = tempfile::Builder::new().prefix(TEMP_PREFIX).tempfile_in(dir)?;
    temporary.write_all(bytes)?;
    temporary.as_file().sync_all()?;
    temporary.persist_noclobber(dir.join(name)).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Removes `dir/name` durably.
pub fn remove_file(dir: &Path, name: &str) -> io::Result<()> {
    fs::remove_file(dir.join(name))?;
    sync_dir(dir)
}

/// Flushes a directory's entries (new, renamed and removed names) to disk.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Deletes the temporary files a crash left in `dir`; returns how many.
pub fn remove_temporaries(dir: &Path) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let is_temporary = entry.file_name().to_str().is_some_and(|n| n.starts_with(TEMP_PREFIX));
        // `file_type` does not follow links: a planted link is left alone.
        if is_temporary && entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
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

    #[test]
    fn files_are_created_whole_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        create_file(dir.path(), "a", b"first").unwrap();
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"first");
        let error = create_file(dir.path(), "a", b"second").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"first");
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["a"], "no temporary file is left behind");
        remove_file(dir.path(), "a").unwrap();
        assert!(!dir.path().join("a").exists());
    }

    #[test]
    fn only_temporary_files_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(format!("{TEMP_PREFIX}abc")), b"half").unwrap();
        fs::write(dir.path().join("kept"), b"whole").unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join(format!("{TEMP_PREFIX}link"))).unwrap();
        assert_eq!(remove_temporaries(dir.path()).unwrap(), 1);
        assert!(dir.path().join("kept").exists());
        assert!(outside.path().exists(), "a link's target is never touched");
    }
}
