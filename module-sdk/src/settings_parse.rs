//! A module's clap settings read so that a bad value is named by its
//! environment variable: clap names an argument by its flag and value
//! placeholder (`--store-max-bytes <STORE_MAX_BYTES>`), which reads as
//! another setting when the value came from `NOTES_STORE_MAX_BYTES`.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, Error};
use clap::{Command, Parser};

/// The settings from the process's command line and environment, as
/// [`Parser::parse`] reads them; an error (printed before the process exits
/// with clap's status) names each argument it is about by its environment
/// variable and flag, `NOTES_STORE_MAX_BYTES (--store-max-bytes)`.
pub fn parse_settings<T: Parser>() -> T {
    try_parse_settings_from(std::env::args_os()).unwrap_or_else(|error| error.exit())
}

/// [`parse_settings`] from `args` (the program's name first), the error
/// returned.
pub fn try_parse_settings_from<T, I>(args: I) -> Result<T, Error>
where
    T: Parser,
    I: IntoIterator,
    I::Item: Into<OsString> + Clone,
{
    T::try_parse_from(args).map_err(|error| {
        // Built, as the parser's was, so its arguments are written as clap wrote them.
        let mut command = T::command();
        command.build();
        name_settings(error, &command)
    })
}

/// `error` with each argument it names (`--flag <PLACEHOLDER>`, as clap
/// writes it) that has an environment variable written as that variable and
/// its flag; other arguments and errors are left as they are.
fn name_settings(mut error: Error, command: &Command) -> Error {
    let rename = |written: &String| {
        command
            .get_arguments()
            .find(|argument| argument.to_string() == *written)
            .and_then(|argument| {
                let variable = argument.get_env()?.to_string_lossy();
                Some(match argument.get_long() {
                    Some(long) => format!("{variable} (--{long})"),
                    None => variable.into_owned(),
                })
            })
            .unwrap_or_else(|| written.clone())
    };
    let renamed = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(written)) => ContextValue::String(rename(written)),
        Some(ContextValue::Strings(written)) => ContextValue::Strings(written.iter().map(rename).collect()),
        _ => return error,
    };
    error.insert(ContextKind::InvalidArg, renamed);
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    /// Settings as a module declares them.
    #[derive(Debug, Parser)]
    struct Settings {
        #[arg(long, env = "DEMO_STORE_MAX_BYTES", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        store_max_bytes: u64,
        #[arg(long, env = "DEMO_MODE", value_parser = ["fast", "slow"])]
        mode: String,
        #[arg(long, env = "DEMO_STRICT")]
        strict: bool,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
        no_variable: u8,
    }

    fn error(args: &[&str]) -> (ErrorKind, String) {
        let error = try_parse_settings_from::<Settings, _>(["demo"].iter().chain(args)).unwrap_err();
        (error.kind(), error.to_string())
    }

    #[test]
    fn a_bad_or_missing_value_is_named_by_its_variable_and_flag() {
        let (kind, text) = error(&["--mode", "fast", "--store-max-bytes", "0"]);
        assert_eq!(kind, ErrorKind::ValueValidation);
        assert!(text.contains("'DEMO_STORE_MAX_BYTES (--store-max-bytes)'"), "{text}");
        assert!(!text.contains("<STORE_MAX_BYTES>"), "{text}");
        let (kind, text) = error(&["--mode", "quick"]);
        assert_eq!(kind, ErrorKind::InvalidValue);
        assert!(text.contains("'DEMO_MODE (--mode)'"), "{text}");
        let (kind, text) = error(&[]);
        assert_eq!(kind, ErrorKind::MissingRequiredArgument);
        assert!(text.contains("DEMO_MODE (--mode)"), "{text}");
    }

    #[test]
    fn an_argument_without_a_variable_keeps_clap_s_name() {
        let (kind, text) = error(&["--mode", "fast", "--no-variable", "0"]);
        assert_eq!(kind, ErrorKind::ValueValidation);
        assert!(text.contains("'--no-variable <NO_VARIABLE>'"), "{text}");
        let (kind, _) = error(&["--mode", "fast", "--unknown"]);
        assert_eq!(kind, ErrorKind::UnknownArgument);
        let settings = try_parse_settings_from::<Settings, _>(["demo", "--mode", "slow", "--strict"]).unwrap();
        assert!(settings.strict && settings.mode == "slow" && settings.store_max_bytes == 1);
    }
}
