//! Command templates: split into argv words once, at load time; a value
//! replaces its placeholder inside one word, so it can never add words,
//! pipes, redirections or substitutions. A value that would start a word
//! with `-` (and so be read as an option) is refused unless its argument
//! allows it or the word comes after a literal `--` word. A placeholder in
//! code an interpreter runs (`sh -c '... {p}'`), in the script or
//! command a program runs (`python3 {p}`, `timeout 5 {p}`), in a module
//! an option loads (`perl -M{p}`), in a command line a program gives a
//! shell (`ssh host ls {p}`), or in an environment variable that loads or
//! runs code (`env LD_PRELOAD={p} tool`) is refused at load.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use crate::interpreters::{CodeWord, Role, value_as_code};

/// The kernel's limit on one argument (`MAX_ARG_STRLEN`, 128 KiB), less
/// its terminating NUL byte.
pub const MAX_ARGUMENT_BYTES: usize = 128 * 1024 - 1;

/// The most placeholders (each occurrence) one command may hold: loading
/// a tool and building its argv look each up among the others.
pub const MAX_PLACEHOLDERS: usize = 100;

/// `{name}`: a placeholder; any other brace is literal text.
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{([A-Za-z_][A-Za-z0-9_]*)\}").expect("a valid pattern"));

/// Why a template cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    /// Unbalanced quotes and the like.
    #[error("cannot split into words (shell-words rules): {0}")]
    Split(String),
    /// Nothing to run.
    #[error("is empty")]
    Empty,
    /// The model would choose the program.
    #[error("the program (the first word, `{0}`) cannot contain a placeholder")]
    PlaceholderProgram(String),
    /// More placeholders than [`MAX_PLACEHOLDERS`].
    #[error("has {0} placeholders, more than the {MAX_PLACEHOLDERS} a command may hold")]
    TooManyPlaceholders(usize),
    /// A value would be code an interpreter runs (`sh -c '... {p} ...'`),
    /// or would choose the script or command it runs (`python3 {p}`).
    #[error(
        "the word `{word}` is code that `{program}` runs, or names the script or command it runs, so a value in it \
         would choose what runs; pass the value as an argument of its own after the code or script (`sh -c 'grep \
         -- \"$1\" data.txt' sh {{p}}`, `python3 app.py {{p}}`)"
    )]
    ValueAsCode {
        /// The interpreter, as the template writes it.
        program: String,
        /// The word with the placeholder.
        word: String,
    },
    /// A value would name a module or file an option loads, or be pasted
    /// into code (`perl -M{p}`, `node --import {p}`).
    #[error(
        "the word `{word}` is the value of an option with which `{program}` loads a module or file, or pastes it \
         into code (`perl -M`/`-m`/`-I`/`-d:`, `ruby -r`/`-I`, `node -r`/`--import`/`--loader`/`--env-file`, \
         `python3 -W`, `lua -l`, `php -d`/`-c`/`-z`, `su -s`, `ssh -F`/`-I`), so a value in it would choose what runs; name the module in \
         the template and pass the value as an argument of its own (`perl -MPOSIX script.pl {{p}}`)"
    )]
    ValueAsModule {
        /// The interpreter, as the template writes it.
        program: String,
        /// The word with the placeholder.
        word: String,
    },
    /// A value would be in a command line a program joins for a shell
    /// (`ssh host ls {p}`, `watch ls {p}`).
    #[error(
        "the word `{word}` is in the command line that `{program}` joins into one and gives to a shell (`ssh host \
         ...`, the remote one; `watch ...`), so a value in it would be shell code whatever the quoting; keep \
         placeholders out of that command line (`ssh {{host}} uptime` is fine)"
    )]
    ValueInCommandLine {
        /// The program, as the template writes it.
        program: String,
        /// The word with the placeholder.
        word: String,
    },
    /// A value would be in an environment variable that makes a program
    /// load or run code (`env LD_PRELOAD={p} tool`), or name the variable.
    #[error(
        "the word `{word}` sets the environment variable `{variable}` for the command `{program}` runs, and a value \
         in it would choose what runs: the variable makes a program load or run code (`LD_*`, `PERL5OPT`, \
         `NODE_OPTIONS`, `PYTHONPATH`, `BASH_ENV`, `GIT_SSH_COMMAND`, `PAGER`, `PATH`... a deny list of known \
         variables), or the value would name the variable; set such a variable in the template only and pass the \
         value as an argument of its own (`env LANG={{p}}` and `env FOO={{p}} tool` are fine)"
    )]
    ValueInVariable {
        /// The program that sets it (`env`, `sudo`), as the template writes it.
        program: String,
        /// The variable's name as the template writes it.
        variable: String,
        /// The word with the placeholder.
        word: String,
    },
}

/// Why a call's value cannot be put into the command line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValueError {
    /// A NUL byte ends a C string, so no argument can carry one.
    #[error("arguments.{0}: contains a NUL character, which no command-line argument can carry")]
    Nul(String),
    /// Longer than the kernel accepts for one argument.
    #[error(
        "arguments.{name}: makes a command-line argument of {bytes} bytes (UTF-8), over the kernel's limit of {MAX_ARGUMENT_BYTES} bytes per argument"
    )]
    TooLong {
        /// The argument's name.
        name: String,
        /// The size of the word it makes.
        bytes: usize,
    },
    /// The value would start an argv word with `-`, so the program would
    /// take it for an option.
    #[error(
        "arguments.{0}: starts with `-`, so the program would read it as an option; send a value that does not start with `-`"
    )]
    LeadingDash(String),
}

/// The literal word after which a program reads no more options.
const END_OF_OPTIONS: &str = "--";

/// A piece of an argv word.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Placeholder(String),
}

/// One argv word: text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word(Vec<Piece>);

impl Word {
    fn parse(word: &str) -> Self {
        let mut pieces = Vec::new();
        let mut last = 0;
        for found in PLACEHOLDER.captures_iter(word) {
            let whole = found.get(0).expect("group 0 always matches");
            if whole.start() > last {
                pieces.push(Piece::Text(word[last..whole.start()].to_owned()));
            }
            pieces.push(Piece::Placeholder(found[1].to_owned()));
            last = whole.end();
        }
        if last < word.len() || pieces.is_empty() {
            pieces.push(Piece::Text(word[last..].to_owned()));
        }
        Self(pieces)
    }

    fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|piece| match piece {
            Piece::Placeholder(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
    }

    fn literal_bytes(&self) -> usize {
        self.0.iter().map(|piece| if let Piece::Text(text) = piece { text.len() } else { 0 }).sum()
    }

    /// A literal word that looks like an option (`--limit`, `-n`); not
    /// `--`, which ends the options and is never dropped with an absent
    /// value after it (the words after it would then be read as options).
    fn is_flag(&self) -> bool {
        matches!(self.0.as_slice(), [Piece::Text(text)] if text.starts_with('-') && text != END_OF_OPTIONS)
    }

    /// The literal word `--`.
    fn is_end_of_options(&self) -> bool {
        matches!(self.0.as_slice(), [Piece::Text(text)] if text == END_OF_OPTIONS)
    }

    /// Whether `name`'s value can be the first text of this word (only
    /// placeholders before it).
    fn can_lead_with(&self, name: &str) -> bool {
        self.0
            .iter()
            .take_while(|piece| matches!(piece, Piece::Placeholder(_)))
            .any(|piece| matches!(piece, Piece::Placeholder(p) if p == name))
    }
}

/// A command line with `{placeholders}`, split into words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTemplate {
    words: Vec<Word>,
}

impl CommandTemplate {
    /// Splits `command` into words with shell-words rules (quotes and
    /// backslashes group; nothing is expanded) and finds the placeholders.
    pub fn parse(command: &str) -> Result<Self, TemplateError> {
        let split = shell_words::split(command).map_err(|e| TemplateError::Split(e.to_string()))?;
        let program = split.first().ok_or(TemplateError::Empty)?;
        if PLACEHOLDER.is_match(program) {
            return Err(TemplateError::PlaceholderProgram(program.clone()));
        }
        let count: usize = split.iter().map(|word| PLACEHOLDER.find_iter(word).count()).sum();
        if count > MAX_PLACEHOLDERS {
            return Err(TemplateError::TooManyPlaceholders(count));
        }
        if let Some(CodeWord { program, word, role }) = value_as_code(&split, |word| PLACEHOLDER.is_match(word)) {
            return Err(match role {
                Role::Code => TemplateError::ValueAsCode { program, word },
                Role::Module => TemplateError::ValueAsModule { program, word },
                Role::CommandLine => TemplateError::ValueInCommandLine { program, word },
                Role::Variable => {
                    let variable = word.split_once('=').map_or(word.as_str(), |(name, _)| name).to_owned();
                    TemplateError::ValueInVariable { program, variable, word }
                }
            });
        }
        Ok(Self { words: split.iter().map(|word| Word::parse(word)).collect() })
    }

    /// The placeholders, each once, in order of first appearance.
    pub fn placeholders(&self) -> Vec<&str> {
        let mut seen = BTreeSet::new();
        self.words.iter().flat_map(Word::placeholders).filter(|name| seen.insert(*name)).collect()
    }

    /// The longest value (in bytes) `name` can take so that every word it
    /// is in stays within [`MAX_ARGUMENT_BYTES`], when it is its word's only
    /// placeholder (the check at call time is exact).
    pub fn max_value_bytes(&self, name: &str) -> usize {
        self.words
            .iter()
            .filter(|word| word.placeholders().any(|p| p == name))
            .map(|word| MAX_ARGUMENT_BYTES.saturating_sub(word.literal_bytes()))
            .min()
            .unwrap_or(MAX_ARGUMENT_BYTES)
    }

    /// The words before the first literal `--` (all of them without one):
    /// those a program may read as options.
    fn option_words(&self) -> impl Iterator<Item = &Word> {
        self.words.iter().take_while(|word| !word.is_end_of_options())
    }

    /// Whether `name`'s value can start a word a program may read as an
    /// option: the argument whose values starting with `-` are refused.
    pub fn can_start_an_option(&self, name: &str) -> bool {
        self.option_words().any(|word| word.can_lead_with(name))
    }

    /// The program and its arguments, with `value(name)` in each
    /// placeholder. A word with an absent value is left out, with the flag
    /// word right before it (`--limit {limit}`). A value that would start
    /// a word before `--` with `-` is refused unless `may_start_with_dash(name)`.
    pub fn argv(
        &self,
        value: impl Fn(&str) -> Option<String>,
        may_start_with_dash: impl Fn(&str) -> bool,
    ) -> Result<Vec<String>, ValueError> {
        let mut argv: Vec<String> = Vec::with_capacity(self.words.len());
        let mut previous_was_flag = false;
        let mut options_ended = false;
        for word in &self.words {
            let mut text = String::new();
            let mut complete = true;
            // The placeholder with the longest value, named when the word is too long.
            let mut longest: (&str, usize) = ("", 0);
            for piece in &word.0 {
                match piece {
                    Piece::Text(literal) => text.push_str(literal),
                    Piece::Placeholder(name) => match value(name) {
                        Some(value) if value.contains('\0') => return Err(ValueError::Nul(name.clone())),
                        Some(value)
                            if !options_ended
                                && text.is_empty()
                                && value.starts_with('-')
                                && !may_start_with_dash(name) =>
                        {
                            return Err(ValueError::LeadingDash(name.clone()));
                        }
                        Some(value) => {
                            if value.len() >= longest.1 {
                                longest = (name, value.len());
                            }
                            text.push_str(&value);
                        }
                        None => complete = false,
                    },
                }
            }
            if !complete {
                if previous_was_flag {
                    argv.pop();
                }
                previous_was_flag = false;
                continue;
            }
            if text.len() > MAX_ARGUMENT_BYTES {
                return Err(ValueError::TooLong { name: longest.0.to_owned(), bytes: text.len() });
            }
            previous_was_flag = word.is_flag();
            options_ended |= word.is_end_of_options();
            argv.push(text);
        }
        Ok(argv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(command: &str, values: &[(&str, &str)]) -> Vec<String> {
        let template = CommandTemplate::parse(command).unwrap();
        let value = |name: &str| values.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        template.argv(value, |_| false).unwrap()
    }

    #[test]
    fn values_stay_inside_their_word() {
        let hostile = "; touch /tmp/x $(id) `id` | cat\n*";
        assert_eq!(
            argv("python3 'scripts/a b.py' list --name {name} --tag=x{name}y", &[("name", hostile)]),
            ["python3", "scripts/a b.py", "list", "--name", hostile, &format!("--tag=x{hostile}y")]
        );
        assert_eq!(argv("sort --key={k} {f}", &[("k", "-x"), ("f", "a-")]), ["sort", "--key=-x", "a-"]);
        assert_eq!(argv("echo \"{a}\" {b}", &[("a", "1"), ("b", "{a}")]), ["echo", "1", "{a}"]);
    }

    #[test]
    fn an_absent_optional_value_removes_its_word_and_flag() {
        let command = "reader list --limit {limit} --name {name} --tag={tag} {path}";
        assert_eq!(argv(command, &[("path", "p")]), ["reader", "list", "p"]);
        assert_eq!(argv(command, &[("limit", "5"), ("tag", "t")]), ["reader", "list", "--limit", "5", "--tag=t"]);
    }

    #[test]
    fn a_value_that_would_start_an_option_is_refused_unless_allowed() {
        let template = CommandTemplate::parse("sort {a}{b} {file} -- {operand}").unwrap();
        let values = |file: &'static str| {
            move |name: &str| match name {
                "a" => Some(String::new()),
                "b" => Some("b".into()),
                "file" => Some(file.into()),
                _ => Some("--after-the-end".into()),
            }
        };
        let refused = template.argv(values("--output=/tmp/x/victim.txt"), |_| false).unwrap_err();
        assert_eq!(refused, ValueError::LeadingDash("file".into()));
        assert!(refused.to_string().starts_with("arguments.file: starts with `-`"), "{refused}");
        assert_eq!(template.argv(values("-"), |_| false), Err(ValueError::LeadingDash("file".into())));
        let allowed = template.argv(values("-r"), |name| name == "file").unwrap();
        assert_eq!(allowed, ["sort", "b", "-r", "--", "--after-the-end"]);
        // An empty value before it does not hide a leading dash.
        let hidden =
            template.argv(|name| Some(if name == "a" { String::new() } else { format!("-{name}") }), |_| false);
        assert_eq!(hidden, Err(ValueError::LeadingDash("b".into())));
        let which: Vec<bool> = ["a", "b", "file", "operand"].map(|n| template.can_start_an_option(n)).into();
        assert_eq!(which, [true, true, true, false]);
        // `--` stays when the value after it is absent, so what follows is still an operand.
        let ended = CommandTemplate::parse("sort -- {opt} {file}").unwrap();
        let file = ended.argv(|name| (name == "file").then(|| "--output=/tmp/victim".to_owned()), |_| false);
        assert_eq!(file.unwrap(), ["sort", "--", "--output=/tmp/victim"]);
    }

    #[test]
    fn placeholders_are_listed_once_in_order() {
        let template = CommandTemplate::parse("run {b} {a} --x={b} {not a placeholder} {{c}}").unwrap();
        assert_eq!(template.placeholders(), ["b", "a", "c"]);
        assert_eq!(template.max_value_bytes("b"), MAX_ARGUMENT_BYTES - 4);
    }

    #[test]
    fn bad_templates_and_values_are_refused() {
        assert!(matches!(CommandTemplate::parse("run 'open"), Err(TemplateError::Split(_))));
        assert_eq!(CommandTemplate::parse("  "), Err(TemplateError::Empty));
        assert!(matches!(CommandTemplate::parse("{tool} x"), Err(TemplateError::PlaceholderProgram(_))));
        let many = |count: usize| format!("run{}", (0..count).map(|n| format!(" {{p{n}}}")).collect::<String>());
        assert_eq!(CommandTemplate::parse(&many(MAX_PLACEHOLDERS)).unwrap().placeholders().len(), MAX_PLACEHOLDERS);
        assert_eq!(CommandTemplate::parse(&many(MAX_PLACEHOLDERS + 1)), Err(TemplateError::TooManyPlaceholders(101)));
        let code = CommandTemplate::parse("sh -c 'grep {p} data.txt | head'").unwrap_err();
        let expected = TemplateError::ValueAsCode { program: "sh".into(), word: "grep {p} data.txt | head".into() };
        assert_eq!(code, expected);
        assert!(code.to_string().contains("pass the value as an argument of its own"), "{code}");
        let script = CommandTemplate::parse("nice -n 5 python3 {p}").unwrap_err();
        assert_eq!(script, TemplateError::ValueAsCode { program: "python3".into(), word: "{p}".into() });
        assert!(script.to_string().contains("names the script or command it runs"), "{script}");
        let module = CommandTemplate::parse("perl -M{p} script.pl").unwrap_err();
        assert_eq!(module, TemplateError::ValueAsModule { program: "perl".into(), word: "-M{p}".into() });
        assert!(module.to_string().contains("loads a module or file, or pastes it into code"), "{module}");
        assert!(CommandTemplate::parse("perl -MPOSIX script.pl {p}").is_ok());
        let remote = CommandTemplate::parse("ssh -i key host ls {p}").unwrap_err();
        assert_eq!(remote, TemplateError::ValueInCommandLine { program: "ssh".into(), word: "{p}".into() });
        assert!(remote.to_string().contains("joins into one and gives to a shell"), "{remote}");
        assert!(CommandTemplate::parse("ssh -i key {p} uptime").is_ok());
        let variable = CommandTemplate::parse("env LD_PRELOAD={p} tool").unwrap_err();
        let expected = TemplateError::ValueInVariable {
            program: "env".into(),
            variable: "LD_PRELOAD".into(),
            word: "LD_PRELOAD={p}".into(),
        };
        assert_eq!(variable, expected);
        assert!(variable.to_string().contains("sets the environment variable `LD_PRELOAD`"), "{variable}");
        assert!(CommandTemplate::parse("env FOO={p} LANG={p} tool").is_ok());
        let template = CommandTemplate::parse("echo --x={v}").unwrap();
        assert_eq!(template.argv(|_| Some("a\0b".into()), |_| false), Err(ValueError::Nul("v".into())));
        let long = "a".repeat(MAX_ARGUMENT_BYTES - 3);
        let error = template.argv(|_| Some(long.clone()), |_| false).unwrap_err();
        assert_eq!(error, ValueError::TooLong { name: "v".into(), bytes: MAX_ARGUMENT_BYTES + 1 });
        assert!(error.to_string().contains("131071 bytes per argument"), "{error}");
        assert!(template.argv(|_| Some("a".repeat(MAX_ARGUMENT_BYTES - 4)), |_| false).is_ok());
        // Two values in one word: the long one is named.
        let pair = CommandTemplate::parse("echo {short}{long}").unwrap();
        let value = |name: &str| Some(if name == "long" { "b".repeat(MAX_ARGUMENT_BYTES) } else { "a".into() });
        let error = pair.argv(value, |_| false).unwrap_err();
        assert_eq!(error, ValueError::TooLong { name: "long".into(), bytes: MAX_ARGUMENT_BYTES + 1 });
    }
}
