//! The module's own settings, read from the command line or the
//! environment (the HTTP server's settings — `HOST`, `PORT`,
//! `SERVICE_AUTH_TOKEN`, `MAX_BODY_BYTES`, `LOG_FORMAT` — are read by
//! `Module::serve`).

use std::path::PathBuf;

use clap::Parser;
use module_sdk::{PathSetting, PathUse};

use crate::store::Limits;

/// `FILES_ROOT`, for its errors.
pub const FILES_ROOT: PathSetting =
    PathSetting { name: "FILES_ROOT", what: "the files directory", usage: PathUse::Create };

/// Settings of the file_manager module.
#[derive(Debug, Clone, Parser)]
#[command(version, about = "Serve the file_manager module: per-user documents and uploads.")]
pub struct Settings {
    /// The SDK's flags (`--stdio`).
    #[command(flatten)]
    pub sdk: module_sdk::SdkFlags,

    /// Directory holding every user's files; created when missing. One
    /// module process per directory.
    #[arg(long, env = "FILES_ROOT", default_value = "./data/files")]
    pub files_root: PathBuf,

    /// Largest file, in bytes (its content, before any base64).
    #[arg(long, env = "FILE_MAX_BYTES", default_value_t = 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub file_max_bytes: u64,

    /// Most bytes one user may store in all.
    #[arg(long, env = "USER_QUOTA_BYTES", default_value_t = 20 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub user_quota_bytes: u64,

    /// Most files one user may keep.
    #[arg(long, env = "USER_MAX_FILES", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub user_max_files: u64,

    /// Most bytes all users' files may take together on disk (each file
    /// and each user's directory counted in whole 4 KiB blocks), whatever
    /// the number of users.
    #[arg(long, env = "STORE_MAX_BYTES", default_value_t = 8 * 1024 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub store_max_bytes: u64,
}

impl Settings {
    /// The storage limits these settings give.
    pub fn limits(&self) -> Limits {
        Limits {
            file_max_bytes: self.file_max_bytes,
            user_quota_bytes: self.user_quota_bytes,
            user_max_files: self.user_max_files,
            store_max_bytes: self.store_max_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_refusals() {
        let settings = Settings::try_parse_from(["file_manager"]).unwrap();
        assert_eq!(settings.files_root, PathBuf::from("./data/files"));
        assert_eq!(settings.limits().file_max_bytes, 1024 * 1024);
        assert!(Settings::try_parse_from(["file_manager", "--user-quota-bytes", "0"]).is_err());
        assert!(Settings::try_parse_from(["file_manager", "--file-max-bytes", "lots"]).is_err());
    }
}
