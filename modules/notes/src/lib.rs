//! The notes module: an agent's long-term memory. Each user's notes, with
//! tags, in one SQLite database (`NOTES_DB`), searched with FTS5 and BM25
//! ranking.
//!
//! The library holds the store and the tools so that the benchmark
//! (`benches/search.rs`) measures the same code the binary serves.

pub mod cursor;
pub mod note;
pub mod query;
pub mod settings;
pub mod store;
pub mod tags;
pub mod tools;

use module_sdk::{Module, PathSettingError};

use crate::settings::{NOTES_DB, Settings};
use crate::store::Store;

/// The module over the database `settings.notes_db` (opened and migrated
/// now, by its absolute path, which an error names).
pub fn module(settings: &Settings) -> Result<Module, PathSettingError> {
    let database = NOTES_DB.absolute(&settings.notes_db)?;
    let store = Store::open(&database, settings.limits(), settings.busy_timeout())
        .map_err(|e| NOTES_DB.unusable(&settings.notes_db, &database, e))?
        .search_budget(settings.search_budget())
        .answer_max_bytes(settings.answer_max_bytes);
    Ok(Module::new(
        "notes",
        "The user's long-term notes: save facts to remember, search them by relevance, list, edit and delete them.",
    )
    .version(env!("CARGO_PKG_VERSION"))
    .sdk_flags(settings.sdk)
    .state(store)
    .tool(tools::save_note)
    .tool(tools::search_notes)
    .tool(tools::list_notes)
    .tool(tools::update_note)
    .tool(tools::delete_note))
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use module_sdk::Permission;

    use super::*;

    #[test]
    fn only_saving_and_reading_are_guest_tools() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("notes.db");
        let settings = Settings::try_parse_from(["notes", "--notes-db", db.to_str().unwrap()]).unwrap();
        let client = module(&settings).unwrap().test_client().unwrap();
        for tool in &client.manifest().tools {
            let annotations = tool.annotations.as_ref().unwrap();
            let erases = matches!(tool.name.as_str(), "notes.update_note" | "notes.delete_note");
            assert_eq!(annotations.destructive, erases, "{}", tool.name);
            let permission = if erases { Permission::User } else { Permission::Guest };
            assert_eq!(tool.required_permission, permission, "{}", tool.name);
        }
    }
}
