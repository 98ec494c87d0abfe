//! Directories held open by descriptor, and the entries inside them
//! reached relative to that descriptor (`openat` and friends).
//!
//! A directory checked by name and then used by name can be swapped for a
//! link in between; one opened once with `O_NOFOLLOW | O_DIRECTORY` stays
//! the directory that was checked, whatever later happens to its name, so
//! nothing under the root can redirect the module's reads and writes
//! elsewhere.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Flags of every directory opened here: never through a link.
const DIRECTORY: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

/// Opens the directory at `path`; its last component must not be a link.
pub fn open(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(path, DIRECTORY, Mode::empty())?)
}

/// Opens the directory `name` inside `parent`: `None` when there is none;
/// an error for which [`is_not_a_directory`] holds when `name` is a link or
/// anything but a directory.
pub fn open_child(parent: impl AsFd, name: &str) -> io::Result<Option<OwnedFd>> {
    match rustix::fs::openat(parent, name, DIRECTORY, Mode::empty()) {
        Ok(dir) => Ok(Some(dir)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Creates the directory `name` inside `parent` (owner-only access).
pub fn create_child(parent: impl AsFd, name: &str) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(parent, name, Mode::RWXU)?)
}

/// Removes the directory `name` inside `parent` if it is empty; whether
/// it was (`false`: it holds entries). A link is never removed: that is an
/// error for which [`is_not_a_directory`] holds.
pub fn remove_empty_child(parent: impl AsFd, name: &str) -> io::Result<bool> {
    match rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        Ok(()) => Ok(true),
        Err(Errno::NOTEMPTY | Errno::EXIST) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether `error` says an entry opened as a directory is a link or not a
/// directory at all.
pub fn is_not_a_directory(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::NOTDIR.raw_os_error())
}

/// Opens the file `name` in `dir` for reading, never through a link (an
/// error for which [`is_link`] holds) and without blocking on a FIFO.
pub fn open_file(dir: impl AsFd, name: &str) -> io::Result<File> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?))
}

/// Whether `error` says the entry opened is a link.
pub fn is_link(error: &io::Error) -> bool {
    error.raw_os_error() == Some(Errno::LOOP.raw_os_error())
}

/// The names in `dir` that are UTF-8 (no name this module gives is not),
/// without `.` and `..`.
pub fn names(dir: impl AsFd) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        if let Ok(name) = entry.file_name().to_str()
            && name != "."
            && name != ".."
        {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

/// The type and size of the entry `name` in `dir`, not following a link.
pub fn entry_of(dir: impl AsFd, name: &str) -> io::Result<(FileType, u64)> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok((FileType::from_raw_mode(stat.st_mode), u64::try_from(stat.st_size).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_and_files_are_not_opened_as_directories() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("real")).unwrap();
        fs::write(root.path().join("file"), "x").unwrap();
        symlink(outside.path(), root.path().join("link")).unwrap();
        let dir = open(root.path()).unwrap();
        assert!(open_child(&dir, "real").unwrap().is_some());
        assert!(open_child(&dir, "missing").unwrap().is_none());
        for name in ["link", "file"] {
            assert!(is_not_a_directory(&open_child(&dir, name).unwrap_err()), "{name}");
        }
        assert!(is_not_a_directory(&open(&root.path().join("link")).unwrap_err()));
        assert!(is_link(&open_file(&dir, "link").unwrap_err()));
        let mut listed = names(&dir).unwrap();
        listed.sort();
        assert_eq!(listed, ["file", "link", "real"]);
        assert_eq!(entry_of(&dir, "file").unwrap(), (FileType::RegularFile, 1));
        assert_eq!(entry_of(&dir, "link").unwrap().0, FileType::Symlink);

        create_child(&dir, "empty").unwrap();
        assert!(remove_empty_child(&dir, "empty").unwrap());
        assert!(!root.path().join("empty").exists());
        fs::write(root.path().join("real/kept"), "x").unwrap();
        assert!(!remove_empty_child(&dir, "real").unwrap(), "a directory with entries stays");
        assert!(is_not_a_directory(&remove_empty_child(&dir, "link").unwrap_err()));
        assert!(outside.path().exists() && root.path().join("link").exists(), "a link is not removed");
    }

    #[test]
    fn an_open_directory_stays_itself_when_its_name_is_swapped_for_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("area")).unwrap();
        let area = open_child(open(root.path()).unwrap(), "area").unwrap().unwrap();
        fs::rename(root.path().join("area"), root.path().join("moved")).unwrap();
        symlink(outside.path(), root.path().join("area")).unwrap();
        create_child(&area, "new").unwrap();
        assert!(root.path().join("moved/new").is_dir());
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
