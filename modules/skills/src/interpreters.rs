//! Words a program runs as code: the word after `sh -c`, `python3 -c`,
//! `perl -e`, `node -e`, and the command `env` runs. A value in one of
//! them would be code (`x; curl evil | sh`), whatever word it stays in.

/// A program that runs code given on its command line.
struct Interpreter {
    /// Program names, without a path and a version suffix (`python3.12`).
    names: &'static [&'static str],
    /// Short options whose value is code (`-c`; combined too: `-lc`, `-ne`).
    code_letters: &'static str,
    /// Long options whose value is code.
    code_options: &'static [&'static str],
    /// Options that take the next word as a value that is not code.
    value_options: &'static [&'static str],
}

/// The interpreters whose code options are known.
const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"],
        code_letters: "c",
        code_options: &["--command"],
        value_options: &["-o", "+o"],
    },
    Interpreter { names: &["python", "pypy"], code_letters: "c", code_options: &[], value_options: &["-W", "-X"] },
    Interpreter { names: &["perl"], code_letters: "eE", code_options: &[], value_options: &[] },
    Interpreter {
        names: &["ruby", "lua", "luajit", "Rscript"],
        code_letters: "e",
        code_options: &[],
        value_options: &[],
    },
    Interpreter { names: &["php"], code_letters: "r", code_options: &[], value_options: &[] },
    Interpreter {
        names: &["node", "nodejs", "bun", "deno"],
        code_letters: "ep",
        code_options: &["--eval", "--print"],
        value_options: &["-r", "--require"],
    },
    // `env -S`: one word split into a command line; `-u NAME`, `-C DIR` take a value.
    Interpreter { names: &["env"], code_letters: "S", code_options: &["--split-string"], value_options: &["-u", "-C"] },
];

/// Where a value would be code: the program word and what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeWord {
    /// The interpreter's word as the template writes it (`sh`, `/usr/bin/env`).
    pub program: String,
    /// The word that holds the placeholder.
    pub word: String,
}

/// The first word of `words` (a template split into argv words) that an
/// interpreter among them runs as code and `has_placeholder`, or the
/// placeholder word `env` would run as its command.
pub fn value_as_code(words: &[String], has_placeholder: impl Fn(&str) -> bool) -> Option<CodeWord> {
    for (at, program) in words.iter().enumerate() {
        let Some(interpreter) = interpreter(program) else { continue };
        let found = |word: &String| CodeWord { program: program.clone(), word: word.clone() };
        let mut rest = words[at + 1..].iter();
        while let Some(word) = rest.next() {
            let runs_commands = interpreter.names == ["env"];
            if word == "--" || !(word.starts_with('-') || word.starts_with('+')) {
                // `env`'s `NAME=value` words, then the command it runs;
                // else the script or the code.
                if runs_commands && word.contains('=') {
                    continue;
                }
                if runs_commands && has_placeholder(word) {
                    return Some(found(word));
                }
                break;
            }
            if interpreter.value_options.contains(&word.as_str()) {
                rest.next();
                continue;
            }
            let long = word.starts_with("--");
            let code = if long {
                interpreter
                    .code_options
                    .iter()
                    .find(|option| word.starts_with(*option))
                    .map(|option| word.len() > option.len())
            } else {
                let letters: String = word[1..].chars().take_while(char::is_ascii_alphabetic).collect();
                letters.contains(|c| interpreter.code_letters.contains(c)).then(|| word.len() > 1 + letters.len())
            };
            match code {
                // The code is attached (`-c{code}`, `--eval={code}`) or the next word.
                Some(_) if has_placeholder(word) => return Some(found(word)),
                Some(false) => match rest.next() {
                    Some(next) if has_placeholder(next) => return Some(found(next)),
                    _ => break,
                },
                Some(true) => break,
                None => {}
            }
        }
    }
    None
}

/// The interpreter `word` names, as a program: its last path component
/// without a version suffix (`/usr/bin/python3.12` is `python`).
fn interpreter(word: &str) -> Option<&'static Interpreter> {
    let name = word.rsplit('/').next().unwrap_or(word);
    let name = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.iter().find(|interpreter| interpreter.names.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_in(command: &str) -> Option<String> {
        let words = shell_words::split(command).unwrap();
        value_as_code(&words, |word| word.contains("{p}")).map(|found| format!("{} {}", found.program, found.word))
    }

    #[test]
    fn values_in_code_words_are_found() {
        let cases = [
            ("sh -c 'grep {p} data.txt | head'", "sh grep {p} data.txt | head"),
            ("bash -lc 'echo {p}'", "bash echo {p}"),
            ("bash -o pipefail -c 'echo {p}'", "bash echo {p}"),
            ("timeout 5 /bin/sh -c 'echo {p}'", "/bin/sh echo {p}"),
            ("python3.12 -c 'print({p})'", "python3.12 print({p})"),
            ("python3 -cprint({p})", "python3 -cprint({p})"),
            ("perl -ne 'print if /{p}/' f", "perl print if /{p}/"),
            ("node --eval={p}", "node --eval={p}"),
            ("node -e {p}", "node {p}"),
            ("env {p}", "env {p}"),
            ("env -i PATH=/bin {p} x", "env {p}"),
            ("env -S {p}", "env {p}"),
            ("env FOO=1 sh -c 'echo {p}'", "sh echo {p}"),
        ];
        for (command, expected) in cases {
            assert_eq!(code_in(command).as_deref(), Some(expected), "{command}");
        }
    }

    #[test]
    fn values_outside_code_words_are_allowed() {
        for command in [
            "sh -c 'grep \"$1\" data.txt | head' sh {p}",
            "python3 scripts/a.py -c {p}",
            "python3 -c 'import sys; print(sys.argv[1])' {p}",
            "perl script.pl -e {p}",
            "env FOO={p} python3 a.py",
            "grep -e {p} file",
            "bash -- {p}",
        ] {
            assert_eq!(code_in(command), None, "{command}");
        }
    }
}
