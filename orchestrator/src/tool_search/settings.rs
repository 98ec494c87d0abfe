//! The budgets of tool search: how long a query may be and how many tools
//! one search may answer (README "Limits").

use crate::config::{ConfigError, positive_count};

/// The default [`ToolSearchSettings::max_query_chars`].
pub const DEFAULT_MAX_SEARCH_QUERY_CHARS: usize = 512;
/// The default [`ToolSearchSettings::max_results`].
pub const DEFAULT_MAX_SEARCH_RESULTS: usize = 50;
/// How many tools a search answers when it names no `limit` (fewer when
/// `MAX_SEARCH_RESULTS` is lower).
pub const DEFAULT_SEARCH_LIMIT: usize = 10;

/// What one search may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSearchSettings {
    /// `MAX_SEARCH_QUERY_CHARS`: the longest query, in characters; a longer one is refused.
    pub max_query_chars: usize,
    /// `MAX_SEARCH_RESULTS`: the largest `limit` a search may ask for; a larger one is refused.
    pub max_results: usize,
}

impl Default for ToolSearchSettings {
    fn default() -> Self {
        Self { max_query_chars: DEFAULT_MAX_SEARCH_QUERY_CHARS, max_results: DEFAULT_MAX_SEARCH_RESULTS }
    }
}

/// The tool search keys of the TOML configuration, as written.
#[derive(Debug, Default)]
pub struct ToolSearchFile {
    /// `max_search_query_chars`.
    pub max_search_query_chars: Option<usize>,
    /// `max_search_results`.
    pub max_search_results: Option<usize>,
}

impl ToolSearchSettings {
    /// The file's values overlaid by `env`, each a positive whole number.
    pub fn read(file: ToolSearchFile, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let count = |name, from_file, default| positive_count(env, name, from_file, default, "a positive whole number");
        Ok(Self {
            max_query_chars: count("MAX_SEARCH_QUERY_CHARS", file.max_search_query_chars, defaults.max_query_chars)?,
            max_results: count("MAX_SEARCH_RESULTS", file.max_search_results, defaults.max_results)?,
        })
    }

    /// The `limit` of a search that names none.
    pub fn default_limit(&self) -> usize {
        DEFAULT_SEARCH_LIMIT.min(self.max_results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_file_environment_and_bad_values() {
        let none = |_: &str| None;
        assert_eq!(ToolSearchSettings::read(ToolSearchFile::default(), &none).unwrap(), ToolSearchSettings::default());
        let file = ToolSearchFile { max_search_results: Some(5), ..ToolSearchFile::default() };
        let env = |name: &str| (name == "MAX_SEARCH_QUERY_CHARS").then(|| "40".to_owned());
        let settings = ToolSearchSettings::read(file, &env).unwrap();
        assert_eq!((settings.max_query_chars, settings.max_results, settings.default_limit()), (40, 5, 5));
        for bad in ["0", "-3", "many"] {
            let env = |name: &str| (name == "MAX_SEARCH_RESULTS").then(|| bad.to_owned());
            let error = ToolSearchSettings::read(ToolSearchFile::default(), &env).unwrap_err().to_string();
            assert!(error.contains("MAX_SEARCH_RESULTS"), "{error}");
        }
    }
}
