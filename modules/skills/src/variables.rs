//! Environment variables that make a program load or run code: the
//! dynamic loader's (`LD_PRELOAD`), an interpreter's options and module
//! paths (`PERL5OPT`, `NODE_OPTIONS`, `PYTHONPATH`), a shell's startup
//! file and prompt code (`BASH_ENV`, `PROMPT_COMMAND`), the commands
//! programs start for an editor, a pager or a password (`GIT_SSH_COMMAND`,
//! `PAGER`, `SSH_ASKPASS`), and `PATH`. A value in one, set through `env
//! NAME={p}` or `sudo NAME={p}`, would choose what runs. This is a deny
//! list of known variables: a variable not on it is not recognised.

/// Variables, by their whole name, that load or run code.
const NAMES: &[&str] = &[
    // Shells: startup files, code run before prompts or traces, parsing.
    "BASH_ENV",
    "ENV",
    "ZDOTDIR",
    "FPATH",
    "PROMPT_COMMAND",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "BASH_LOADABLES_PATH",
    "IFS",
    "SHELL",
    "PATH",
    // glibc loads iconv modules from here.
    "GCONV_PATH",
    // Interpreters: options, modules and files run first.
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "PYTHONUSERBASE",
    "PYTHONBREAKPOINT",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "R_PROFILE",
    "R_PROFILE_USER",
    "OPENSSL_CONF",
    // Commands programs start: editors, pagers, password prompts, ssh.
    "EDITOR",
    "VISUAL",
    "FCEDIT",
    "PAGER",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GIT_ASKPASS",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_PAGER",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PROXY_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "GIT_DIR",
    "GIT_COMMON_DIR",
];

/// Prefixes of families of such variables: the dynamic loader's (`LD_`,
/// macOS's `DYLD_`), bash's exported functions, git's config entries, and
/// lua's code and paths with their version suffix (`LUA_INIT_5_4`).
const PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG", "LUA_INIT", "LUA_PATH", "LUA_CPATH"];

/// Whether a variable named `name` is on the deny list.
pub fn loads_code(name: &str) -> bool {
    NAMES.contains(&name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// The variable an assignment word (`NAME=value`) sets, when a
/// placeholder would choose what runs through it: one in its name (the
/// value would choose the variable), or one in the value of a variable on
/// the deny list.
pub fn chosen_variable(word: &str, has_placeholder: impl Fn(&str) -> bool) -> Option<&str> {
    let (name, value) = word.split_once('=')?;
    (has_placeholder(name) || (has_placeholder(value) && loads_code(name))).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(word: &str) -> Option<&str> {
        chosen_variable(word, |text| text.contains("{p}"))
    }

    #[test]
    fn a_placeholder_in_a_variable_that_runs_code_is_found() {
        for (word, name) in [
            ("LD_PRELOAD={p}", "LD_PRELOAD"),
            ("LD_LIBRARY_PATH=/opt/{p}/lib", "LD_LIBRARY_PATH"),
            ("DYLD_INSERT_LIBRARIES={p}", "DYLD_INSERT_LIBRARIES"),
            ("PERL5OPT=-M{p}", "PERL5OPT"),
            ("BASH_ENV={p}", "BASH_ENV"),
            ("BASH_FUNC_ls%%={p}", "BASH_FUNC_ls%%"),
            ("NODE_OPTIONS=--require {p}", "NODE_OPTIONS"),
            ("PYTHONWARNINGS=ignore::{p}", "PYTHONWARNINGS"),
            ("GIT_CONFIG_VALUE_0={p}", "GIT_CONFIG_VALUE_0"),
            ("LUA_INIT_5_4={p}", "LUA_INIT_5_4"),
            ("PATH={p}:/usr/bin", "PATH"),
            ("PS4=$({p})", "PS4"),
            // The value would choose the variable.
            ("{p}=1", "{p}"),
            ("LD_{p}=/tmp/x.so", "LD_{p}"),
            ("A{p}=x=1", "A{p}"),
        ] {
            assert_eq!(chosen(word), Some(name), "{word}");
        }
        for word in ["FOO={p}", "LANG={p}", "TZ={p}", "LD_PRELOAD=/usr/lib/x.so", "PATHS={p}", "MY_PATH={p}", "x"] {
            assert_eq!(chosen(word), None, "{word}");
        }
    }
}
