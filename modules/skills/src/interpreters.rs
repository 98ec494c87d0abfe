//! Words a program runs as code: the word after `sh -c`, `python3 -c`,
//! `perl -e`, `node -e`, `sed -e`; and the words that choose what runs: an
//! interpreter's script (`python3 app.py`), awk's and sed's program text,
//! the command `env`, `timeout`, `nice`, `sudo`... run, the module an
//! option loads (`perl -MPOSIX`, `ruby -rjson`, `node --import tsx`), and
//! shell text reached through other commands (`su -c`, `script -c`, `sg`,
//! `watch`'s and `ssh`'s command line). A value in one of them would be
//! code (`x; curl evil | sh`) or any program, module or file.

use crate::variables::chosen_variable;

/// A program that runs code given on its command line.
struct Interpreter {
    /// Program names, without a path and a version suffix (`python3.12`).
    names: &'static [&'static str],
    /// Short options whose value is code (`-c`; combined too: `-lc`, `-ne`).
    code_letters: &'static str,
    /// Long options whose value is code.
    code_options: &'static [&'static str],
    /// Short options that take a value that is not code: the rest of their
    /// word (`-Xdev`), else the next word (`-O extglob`).
    value_letters: &'static str,
    /// Long options that take the next word as a value that is not code.
    value_options: &'static [&'static str],
    /// Short options whose value, the rest of their word or else (but for
    /// an attached-only one) the next word, names a module or file the
    /// program loads and runs, or is pasted into code (perl's `-MPOSIX` is
    /// `use POSIX;`): a value there chooses what runs.
    module_letters: &'static str,
    /// Long options whose value, after `=` or the next word, names a module
    /// or file the program loads (`node --import tsx`).
    module_options: &'static [&'static str],
    /// Short options known to take no value (`python3 -u`): the next word
    /// is not theirs. A letter in none of the lists may take it.
    flag_letters: &'static str,
    /// Long options known to take no value (`node --inspect`), and `-`
    /// where it is an option.
    flag_options: &'static [&'static str],
    /// Short options whose value can only be the rest of their word, never
    /// the next word (`perl -i.bak`, `-xdir`).
    attached_letters: &'static str,
    /// Whether the program reads no option after its code (`python3 -c
    /// CODE` and `-m MODULE`: the words after are the code's `sys.argv`).
    code_ends_options: bool,
    /// Whether a code option is a flag and the code the first word that is
    /// not an option (`sh -c -e 'code'`, `sh -c -- 'code'`), as for `sh`;
    /// else the code is the option's value, the next word.
    code_is_operand: bool,
    /// Whether options may start with `+` too (`+o pipefail`).
    plus_options: bool,
    /// Short options after which the program reads its code from stdin,
    /// so that the words after the options are arguments (`sh -s`).
    stdin_letters: &'static str,
    /// Words that are not options to skip before the one that runs
    /// (`timeout`'s duration, `flock`'s lock file, `chroot`'s root).
    leading_operands: usize,
    /// Short options with a value that take the place of the leading
    /// operands (`runuser -u USER CMD`): after one, the first word that is
    /// not an option is what runs.
    operand_letters: &'static str,
    /// Long options like `operand_letters` (`runuser --user USER`).
    operand_options: &'static [&'static str],
    /// Whether the words from the one that runs on are joined into one
    /// command line for a shell (`ssh host cmd...`, `watch cmd...`): a
    /// placeholder in any of them is shell code.
    joins_command: bool,
    /// Whether `NAME=value` words before the one that runs are skipped
    /// (`env`, `sudo`).
    assignments: bool,
    /// Whether the word that runs is a command, itself a program (`env`,
    /// `timeout`), rather than a script or program text.
    runs_commands: bool,
    /// Whether the command it runs is checked wherever the program appears
    /// (`ssh host env {p}`, `find . -exec env {p} ;`), not only where it is
    /// the command's program: running a command is all `env` does, so its
    /// word is hardly ever text.
    command_anywhere: bool,
}

/// An [`Interpreter`] with no options known, for the table to fill in.
const NONE: Interpreter = Interpreter {
    names: &[],
    code_letters: "",
    code_options: &[],
    value_letters: "",
    value_options: &[],
    module_letters: "",
    module_options: &[],
    flag_letters: "",
    flag_options: &[],
    attached_letters: "",
    code_ends_options: false,
    code_is_operand: false,
    plus_options: false,
    stdin_letters: "",
    leading_operands: 0,
    operand_letters: "",
    operand_options: &[],
    joins_command: false,
    assignments: false,
    runs_commands: false,
    command_anywhere: false,
};

/// node's options known to take no value.
const NODE_FLAGS: &[&str] = &[
    "--inspect",
    "--inspect-brk",
    "--inspect-wait",
    "--watch",
    "--check",
    "--interactive",
    "--test",
    "--enable-source-maps",
    "--no-warnings",
    "--trace-warnings",
    "--trace-uncaught",
    "--trace-deprecation",
    "--throw-deprecation",
    "--no-deprecation",
    "--pending-deprecation",
    "--abort-on-uncaught-exception",
    "--expose-gc",
    "--preserve-symlinks",
    "--experimental-vm-modules",
    "--experimental-strip-types",
    "--frozen-intrinsics",
];

/// node's options whose value names a module or file it loads: preloaded
/// modules, loaders, test reporters, OpenSSL's config (which may load an
/// engine), and env files (whose `NODE_OPTIONS` node applies).
const NODE_MODULE_OPTIONS: &[&str] = &[
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "--env-file",
    "--env-file-if-exists",
    "--test-reporter",
    "--openssl-config",
];

/// `su [options] [-] [USER [ARG...]]`: the ARGs go to the user's shell
/// (`su USER -c CODE`, `su USER SCRIPT`); `-s` chooses that shell.
const SU: Interpreter = Interpreter {
    names: &["su"],
    code_letters: "c",
    code_options: &["--command", "--session-command"],
    value_letters: "gGw",
    value_options: &["--group", "--supp-group", "--whitelist-environment"],
    module_letters: "s",
    module_options: &["--shell"],
    flag_letters: "lmpfPhV",
    flag_options: &["-", "--login", "--preserve-environment", "--fast", "--pty", "--help", "--version"],
    leading_operands: 1,
    ..NONE
};

/// The interpreters whose code options are known. A flag listed here must
/// take no value in every program of its entry: a word taken for a flag's
/// next word when it is the flag's value would hide a code option after it.
const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"],
        code_letters: "c",
        code_options: &["--command"],
        value_letters: "oO",
        value_options: &["--rcfile", "--init-file"],
        flag_letters: "abefhikmnprtuvxBCDEHP",
        stdin_letters: "s",
        // A lone `-` ends the options: the next word is the script.
        flag_options: &["-", "--login", "--noprofile", "--norc", "--posix", "--restricted", "--verbose"],
        code_is_operand: true,
        plus_options: true,
        ..NONE
    },
    // fish's `-c` takes its code as the next word; `-C` runs code first.
    Interpreter {
        names: &["fish"],
        code_letters: "cC",
        code_options: &["--command", "--init-command"],
        value_letters: "dfop",
        value_options: &["--debug", "--features", "--debug-output", "--profile"],
        flag_letters: "hilnvNP",
        ..NONE
    },
    // `-W`'s warning category is imported (`-W ignore::this.X` imports `this`).
    Interpreter {
        names: &["python", "pypy"],
        code_letters: "cm",
        value_letters: "X",
        module_letters: "W",
        value_options: &["--check-hash-based-pycs"],
        flag_letters: "bBdEhiIOPqsSuvVx",
        flag_options: &["--help", "--version", "--help-env", "--help-xoptions", "--help-all"],
        code_ends_options: true,
        ..NONE
    },
    // `-MMOD` and `-mMOD` are pasted into `use MOD ...;`, `-d:MOD` into
    // `use Devel::MOD;`; `-I` chooses where modules are loaded from.
    Interpreter {
        names: &["perl"],
        code_letters: "eE",
        module_letters: "MmId",
        flag_letters: "acnpsStTuUwWXlhv",
        attached_letters: "ixdDCV",
        ..NONE
    },
    Interpreter {
        names: &["ruby"],
        code_letters: "e",
        value_letters: "EC",
        module_letters: "rI",
        flag_letters: "acdlnpsSvwWyh",
        attached_letters: "ixKTF",
        ..NONE
    },
    Interpreter { names: &["lua", "luajit"], code_letters: "e", module_letters: "l", flag_letters: "ivEW", ..NONE },
    Interpreter {
        names: &["Rscript"],
        code_letters: "e",
        flag_options: &[
            "--verbose",
            "--vanilla",
            "--no-environ",
            "--no-site-file",
            "--no-init-file",
            "--restore",
            "--no-restore",
            "--save",
            "--no-save",
        ],
        ..NONE
    },
    // `-B`, `-R` and `-E` run code before, for and after every input line;
    // `-d auto_prepend_file=F` runs F, `-c` reads an ini file that may,
    // `-z` loads a Zend extension.
    Interpreter {
        names: &["php"],
        code_letters: "rBRE",
        value_letters: "St",
        module_letters: "dcz",
        flag_letters: "aCqsHivwhlmne",
        ..NONE
    },
    Interpreter {
        names: &["node", "nodejs"],
        code_letters: "ep",
        code_options: &["--eval", "--print"],
        value_letters: "C",
        value_options: &["--conditions", "--input-type", "--title"],
        module_letters: "r",
        module_options: NODE_MODULE_OPTIONS,
        flag_letters: "cihv",
        flag_options: NODE_FLAGS,
        ..NONE
    },
    Interpreter {
        names: &["bun", "deno"],
        code_letters: "ep",
        code_options: &["--eval", "--print"],
        module_letters: "r",
        module_options: &["--require", "--import", "--loader", "--experimental-loader", "--preload"],
        ..NONE
    },
    // `env -S`: one word split into a command line.
    Interpreter {
        names: &["env"],
        code_letters: "S",
        code_options: &["--split-string"],
        value_letters: "uC",
        value_options: &["--unset", "--chdir"],
        flag_letters: "iv",
        // A lone `-` is `-i`.
        flag_options: &["-", "--ignore-environment", "--null", "--debug"],
        assignments: true,
        runs_commands: true,
        command_anywhere: true,
        ..NONE
    },
    Interpreter {
        names: &["awk", "gawk", "mawk", "nawk"],
        // Program files (`-f`, `-E`), included source, loaded extensions.
        code_letters: "feilE",
        code_options: &["--file", "--source", "--include", "--load", "--exec"],
        value_letters: "vFW",
        value_options: &["--assign", "--field-separator"],
        flag_letters: "bcCghMNOPrsStVn",
        attached_letters: "odDLp",
        ..NONE
    },
    // GNU sed's `e` command runs its text as a shell command.
    Interpreter {
        names: &["sed", "gsed"],
        code_letters: "ef",
        code_options: &["--expression", "--file"],
        value_letters: "l",
        value_options: &["--line-length"],
        flag_letters: "nErsuzb",
        flag_options: &[
            "--quiet",
            "--silent",
            "--regexp-extended",
            "--separate",
            "--unbuffered",
            "--null-data",
            "--debug",
            "--posix",
            "--sandbox",
            "--follow-symlinks",
            "--in-place",
        ],
        attached_letters: "i",
        ..NONE
    },
    Interpreter {
        names: &["timeout"],
        value_letters: "sk",
        value_options: &["--signal", "--kill-after"],
        flag_letters: "v",
        flag_options: &["--preserve-status", "--foreground", "--verbose"],
        leading_operands: 1,
        runs_commands: true,
        ..NONE
    },
    Interpreter { names: &["nice"], value_letters: "n", value_options: &["--adjustment"], runs_commands: true, ..NONE },
    Interpreter { names: &["nohup"], runs_commands: true, ..NONE },
    Interpreter {
        names: &["stdbuf"],
        value_letters: "ioe",
        value_options: &["--input", "--output", "--error"],
        runs_commands: true,
        ..NONE
    },
    Interpreter {
        names: &["setsid"],
        flag_letters: "cfw",
        flag_options: &["--ctty", "--fork", "--wait"],
        runs_commands: true,
        ..NONE
    },
    Interpreter {
        names: &["ionice"],
        value_letters: "cnpPu",
        value_options: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
        flag_letters: "t",
        flag_options: &["--ignore"],
        runs_commands: true,
        ..NONE
    },
    // The priority comes before the command.
    Interpreter {
        names: &["chrt"],
        value_letters: "TPD",
        value_options: &["--sched-runtime", "--sched-period", "--sched-deadline"],
        flag_letters: "abdefiormpRv",
        leading_operands: 1,
        runs_commands: true,
        ..NONE
    },
    Interpreter {
        names: &["xargs"],
        value_letters: "adEILnPs",
        value_options: &["--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"],
        flag_letters: "oprtx",
        flag_options: &["--null", "--no-run-if-empty", "--verbose", "--exit", "--interactive", "--open-tty"],
        attached_letters: "eil",
        runs_commands: true,
        ..NONE
    },
    Interpreter {
        names: &["sudo"],
        value_letters: "ugCDhprRtTU",
        value_options: &[
            "--user",
            "--group",
            "--close-from",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--chroot",
        ],
        flag_letters: "AbBEHiKklnPSsVv",
        flag_options: &[
            "--askpass",
            "--background",
            "--set-home",
            "--login",
            "--non-interactive",
            "--stdin",
            "--shell",
        ],
        assignments: true,
        runs_commands: true,
        ..NONE
    },
    Interpreter { names: &["exec"], value_letters: "a", flag_letters: "cl", runs_commands: true, ..NONE },
    Interpreter { names: &["command"], flag_letters: "pvV", runs_commands: true, ..NONE },
    Interpreter {
        names: &["time"],
        value_letters: "fo",
        value_options: &["--format", "--output"],
        flag_letters: "apvq",
        flag_options: &["--append", "--portability", "--verbose", "--quiet"],
        runs_commands: true,
        ..NONE
    },
    // `flock FILE -c CODE` runs CODE with a shell.
    Interpreter {
        names: &["flock"],
        code_letters: "c",
        code_options: &["--command"],
        value_letters: "wE",
        value_options: &["--wait", "--timeout", "--conflict-exit-code"],
        flag_letters: "sexnuoFv",
        flag_options: &[
            "--shared",
            "--exclusive",
            "--nonblock",
            "--nb",
            "--unlock",
            "--close",
            "--no-fork",
            "--verbose",
        ],
        leading_operands: 1,
        runs_commands: true,
        ..NONE
    },
    Interpreter {
        names: &["chroot"],
        value_options: &["--userspec", "--groups"],
        flag_options: &["--skip-chdir"],
        leading_operands: 1,
        runs_commands: true,
        ..NONE
    },
    // Namespace options take an optional file, attached only (`-m/proc/1/ns/mnt`).
    Interpreter {
        names: &["nsenter"],
        value_letters: "tSGW",
        value_options: &["--target", "--setuid", "--setgid", "--wdns"],
        flag_letters: "aFZechV",
        flag_options: &[
            "--all",
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--cgroup",
            "--user",
            "--time",
            "--root",
            "--wd",
            "--preserve-credentials",
            "--no-fork",
            "--follow-context",
            "--env",
            "--join-cgroup",
            "--user-parent",
            "--keep-caps",
        ],
        attached_letters: "muinpCUTrw",
        runs_commands: true,
        ..NONE
    },
    Interpreter {
        names: &["unshare"],
        value_letters: "RwSG",
        value_options: &[
            "--root",
            "--wd",
            "--setuid",
            "--setgid",
            "--propagation",
            "--setgroups",
            "--map-user",
            "--map-group",
            "--map-users",
            "--map-groups",
            "--monotonic",
            "--boottime",
        ],
        flag_letters: "frchV",
        flag_options: &[
            "--mount",
            "--uts",
            "--ipc",
            "--net",
            "--pid",
            "--user",
            "--cgroup",
            "--time",
            "--fork",
            "--map-root-user",
            "--map-current-user",
            "--map-auto",
            "--kill-child",
            "--mount-proc",
            "--keep-caps",
        ],
        attached_letters: "muinpUCT",
        runs_commands: true,
        ..NONE
    },
    SU,
    // su, or with `-u USER` a wrapper: `runuser -u USER CMD`.
    Interpreter { names: &["runuser"], operand_letters: "u", operand_options: &["--user"], runs_commands: true, ..SU },
    // `sg [-] GROUP [-c] COMMAND` gives COMMAND to `sh -c`.
    Interpreter { names: &["sg"], code_letters: "c", flag_options: &["-"], leading_operands: 1, ..NONE },
    // `script -c CODE` gives CODE to the shell; its operand is the log file.
    Interpreter {
        names: &["script"],
        code_letters: "c",
        code_options: &["--command"],
        value_letters: "IOBTmEo",
        value_options: &[
            "--log-in",
            "--log-out",
            "--log-io",
            "--log-timing",
            "--logging-format",
            "--echo",
            "--output-limit",
        ],
        flag_letters: "aefqhV",
        flag_options: &["--append", "--return", "--flush", "--force", "--quiet", "--timing", "--help", "--version"],
        attached_letters: "t",
        leading_operands: 1,
        ..NONE
    },
    // watch joins its command's words and gives them to `sh -c` (but with
    // `-x`, which is refused alike).
    Interpreter {
        names: &["watch"],
        value_letters: "nq",
        value_options: &["--interval", "--equexit"],
        flag_letters: "bcCegprtwxhv",
        flag_options: &[
            "--beep",
            "--color",
            "--no-color",
            "--differences",
            "--errexit",
            "--chgexit",
            "--precise",
            "--no-rerun",
            "--no-title",
            "--no-wrap",
            "--exec",
            "--help",
            "--version",
        ],
        attached_letters: "d",
        joins_command: true,
        ..NONE
    },
    // ssh joins its command's words and gives them to the remote shell;
    // `-F`'s config file may set a `ProxyCommand`, `-I` loads a library.
    Interpreter {
        names: &["ssh"],
        value_letters: "BbcDEeiJLlmOoPpQRSWw",
        module_letters: "FI",
        flag_letters: "46AaCfGgKkMNnqsTtVvXxYy",
        leading_operands: 1,
        joins_command: true,
        ..NONE
    },
];

/// What a word with a placeholder is to the program that reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Code it runs, or the script, program text or command it runs.
    Code,
    /// An option's value naming a module or file it loads (`perl -M{p}`).
    Module,
    /// A word of a command line it joins for a shell (`ssh host cmd {p}`).
    CommandLine,
    /// An assignment it makes for the command it runs, to a variable that
    /// loads or runs code or with a placeholder in the name (`env
    /// LD_PRELOAD={p} tool`).
    Variable,
}

/// Where a value would be code or choose what runs: the program word and
/// the word it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeWord {
    /// The program's word as the template writes it (`sh`, `/usr/bin/env`, `timeout`).
    pub program: String,
    /// The word that holds the placeholder.
    pub word: String,
    /// What that word is to the program.
    pub role: Role,
}

/// What [`code_word`] found.
enum Found<'a> {
    /// The word that runs as code, chooses what runs, or names a module
    /// that is loaded, with a placeholder.
    Value(&'a String, Role),
    /// Nothing; the command the program runs is the word at this index.
    Command(usize),
    /// Nothing.
    Nothing,
}

/// The first word of `words` (a template split into argv words) that an
/// interpreter among them runs as code or loads as a module and
/// `has_placeholder`, or that chooses what runs where the program is the
/// command's (the first word, or the command a wrapper such as `env` or
/// `timeout` runs): the script of `python3 {p}`, the program text of `awk
/// '{p}'`, the command of `env {p}`. Code and module options are looked for
/// after every word, the program's or not (`find . -exec sh -c '{p}' ;`).
pub fn value_as_code(words: &[String], has_placeholder: impl Fn(&str) -> bool) -> Option<CodeWord> {
    let mut command_at = 0;
    for (at, program) in words.iter().enumerate() {
        let Some(interpreter) = interpreter(program) else { continue };
        let is_command = at == command_at || interpreter.command_anywhere;
        match code_word(interpreter, &words[at + 1..], is_command, &has_placeholder) {
            Found::Value(word, role) => {
                return Some(CodeWord { program: program.clone(), word: word.clone(), role });
            }
            Found::Command(offset) if at == command_at => command_at = at + 1 + offset,
            Found::Command(_) | Found::Nothing => {}
        }
    }
    None
}

/// The word of `args` (what follows the program's word) that `interpreter`
/// runs as code, or loads as a module, and `has_placeholder`; where
/// `is_command` (the program is the command's), also the first word that
/// is neither an option nor a known option's value (past the
/// `leading_operands`), what the program runs unless a code option was
/// given: a script, program text, a command (whose index is returned when
/// it has no placeholder). That word ends the options (what follows is the
/// script's), and so does the code where `code_ends_options`. An option
/// not in the table (neither a flag nor one with a value) may take the
/// next word as its value, so that word does not end the options: a code
/// option after it is still seen, and a placeholder in it or in a leading
/// operand after it is refused as the word that may run (a false refusal
/// is safer than a missed one).
fn code_word<'a>(
    interpreter: &Interpreter,
    args: &'a [String],
    is_command: bool,
    has_placeholder: &impl Fn(&str) -> bool,
) -> Found<'a> {
    let (mut code_pending, mut code_seen, mut maybe_value, mut options_ended) = (false, false, false, false);
    let (mut operands, mut was_maybe_value) = (0, false);
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let at = args.len() - words.len() - 1;
        let signed = word.starts_with('-') || (interpreter.plus_options && word.starts_with('+'));
        let lone_option = interpreter.flag_options.contains(&word.as_str());
        if options_ended || !signed || (word.len() < 2 && !lone_option) {
            if code_pending {
                return if has_placeholder(word) { Found::Value(word, Role::Code) } else { Found::Nothing };
            }
            let runs = is_command && !code_seen;
            if runs && interpreter.assignments && !options_ended && word.contains('=') {
                if chosen_variable(word, has_placeholder).is_some() {
                    return Found::Value(word, Role::Variable);
                }
                continue;
            }
            let maybe = std::mem::take(&mut maybe_value) && !options_ended;
            was_maybe_value |= maybe;
            if runs && (maybe || operands < interpreter.leading_operands) {
                if has_placeholder(word) && (maybe || was_maybe_value) {
                    return Found::Value(word, Role::Code);
                }
                operands += usize::from(!maybe);
                continue;
            }
            if maybe {
                continue;
            }
            if runs && interpreter.joins_command {
                let joined = args[at..].iter().find(|word| has_placeholder(word));
                return joined.map_or(Found::Nothing, |word| Found::Value(word, Role::CommandLine));
            }
            return match runs {
                true if has_placeholder(word) => Found::Value(word, Role::Code),
                true if interpreter.runs_commands => Found::Command(at),
                _ => Found::Nothing,
            };
        }
        maybe_value = false;
        if word == "--" {
            options_ended = true;
            continue;
        }
        let is_code = if let Some(long) = word.strip_prefix("--") {
            let (name, attached) = long.split_once('=').map_or((long, None), |(name, value)| (name, Some(value)));
            let name = &word[..2 + name.len()];
            let module = interpreter.module_options.contains(&name);
            let takes_operands = interpreter.operand_options.contains(&name);
            if takes_operands {
                operands = interpreter.leading_operands;
            }
            if interpreter.code_options.contains(&name) {
                Some(attached.is_some())
            } else {
                let value = match attached {
                    Some(_) => Some(word),
                    None if module || takes_operands || interpreter.value_options.contains(&name) => words.next(),
                    None => {
                        maybe_value = !interpreter.flag_options.contains(&name);
                        None
                    }
                };
                if let Some(value) = value.filter(|value| module && has_placeholder(value)) {
                    return Found::Value(value, Role::Module);
                }
                None
            }
        } else {
            let letters = short_options(interpreter, word, &mut words, has_placeholder);
            if let Some(value) = letters.module {
                return Found::Value(value, Role::Module);
            }
            maybe_value = letters.maybe_value;
            code_seen |= letters.stdin;
            if letters.operands {
                operands = interpreter.leading_operands;
            }
            letters.code
        };
        match is_code {
            // The code is attached (`-c{code}`, `--eval={code}`).
            Some(true) if has_placeholder(word) => return Found::Value(word, Role::Code),
            Some(true) if interpreter.code_ends_options => return Found::Nothing,
            Some(true) => code_seen = true,
            Some(false) if interpreter.code_is_operand => code_pending = true,
            // The code is the next word.
            Some(false) => match words.next() {
                Some(next) if has_placeholder(next) => return Found::Value(next, Role::Code),
                _ if interpreter.code_ends_options => return Found::Nothing,
                _ => code_seen = true,
            },
            None => {}
        }
    }
    Found::Nothing
}

/// What a word of bundled short options holds, as [`short_options`] reads it.
#[derive(Default)]
struct Letters<'a> {
    /// A code option, with its code attached (`Some(true)`) or not.
    code: Option<bool>,
    /// The last letter is one the table does not know: the next word may
    /// be its value.
    maybe_value: bool,
    /// A letter says the code comes from stdin.
    stdin: bool,
    /// A letter's value takes the place of the leading operands.
    operands: bool,
    /// The word holding a module option's value, when that value has a
    /// placeholder.
    module: Option<&'a String>,
}

/// Reads a word of bundled short options: letters up to the first one that
/// is a code option or takes a value (its value is the rest of the word,
/// else, but for an attached-only one, the next word of `words`, taken) or
/// that is not a letter.
fn short_options<'a>(
    interpreter: &Interpreter,
    word: &'a String,
    words: &mut impl Iterator<Item = &'a String>,
    has_placeholder: &impl Fn(&str) -> bool,
) -> Letters<'a> {
    let mut found = Letters::default();
    for (at, letter) in word.char_indices().skip(1) {
        let rest = &word[at + letter.len_utf8()..];
        if !letter.is_ascii_alphabetic() {
            break;
        }
        if interpreter.code_letters.contains(letter) {
            if interpreter.code_is_operand {
                found.code = Some(false);
                continue;
            }
            found.code = Some(!rest.is_empty());
            return found;
        }
        let attached = interpreter.attached_letters.contains(letter);
        let module = interpreter.module_letters.contains(letter);
        found.operands = interpreter.operand_letters.contains(letter);
        if attached || module || found.operands || interpreter.value_letters.contains(letter) {
            let value = match (rest.is_empty(), attached) {
                (false, _) => Some(word),
                (true, true) => None,
                (true, false) => words.next(),
            };
            found.module = value.filter(|value| module && has_placeholder(value));
            return found;
        }
        if interpreter.stdin_letters.contains(letter) {
            found.stdin = true;
            continue;
        }
        if !interpreter.flag_letters.contains(letter) {
            found.maybe_value = rest.is_empty();
        }
    }
    found
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

    fn found_in(command: &str) -> Option<CodeWord> {
        let words = shell_words::split(command).unwrap();
        value_as_code(&words, |word| word.contains("{p}"))
    }

    fn code_in(command: &str) -> Option<String> {
        found_in(command).map(|found| format!("{} {}", found.program, found.word))
    }

    /// Options that load a module or file, or paste their value into code:
    /// a placeholder in their value, in their word or the next, is refused.
    #[test]
    fn values_in_module_options_are_found() {
        let cases = [
            ("perl -M{p} script.pl", "perl", "-M{p}"),
            ("perl -m{p} script.pl", "perl", "-m{p}"),
            ("perl -M {p} script.pl", "perl", "{p}"),
            ("perl -wM{p} script.pl", "perl", "-wM{p}"),
            ("perl -MPOSIX -M{p} script.pl", "perl", "-M{p}"),
            ("perl -I{p} script.pl", "perl", "-I{p}"),
            ("perl -I {p} script.pl", "perl", "{p}"),
            ("perl -d:{p} script.pl", "perl", "-d:{p}"),
            ("ruby -r{p} app.rb", "ruby", "-r{p}"),
            ("ruby -r {p} app.rb", "ruby", "{p}"),
            ("ruby -I {p} app.rb", "ruby", "{p}"),
            ("node -r {p} app.js", "node", "{p}"),
            ("node --require={p} app.js", "node", "--require={p}"),
            ("node --import {p} app.js", "node", "{p}"),
            ("node --loader {p} app.js", "node", "{p}"),
            ("node --experimental-loader={p} app.js", "node", "--experimental-loader={p}"),
            ("node --env-file {p} app.js", "node", "{p}"),
            ("bun --preload {p} app.ts", "bun", "{p}"),
            ("python3 -W ignore::{p} app.py", "python3", "ignore::{p}"),
            ("lua -l {p} app.lua", "lua", "{p}"),
            ("php -d auto_prepend_file={p} app.php", "php", "auto_prepend_file={p}"),
            ("php -c{p} app.php", "php", "-c{p}"),
            // Wherever the interpreter is, like code options.
            ("find . -exec perl -M{p} x.pl ;", "perl", "-M{p}"),
        ];
        for (command, program, word) in cases {
            let expected = CodeWord { program: program.into(), word: word.into(), role: Role::Module };
            assert_eq!(found_in(command), Some(expected), "{command}");
        }
        for command in [
            "perl -MPOSIX script.pl {p}",
            "perl -Mstrict -Ilib -e 'print @ARGV' {p}",
            "perl -d script.pl {p}",
            "perl script.pl -M{p}",
            "ruby -rjson app.rb {p}",
            "node --import tsx app.ts {p}",
            "node --env-file=.env app.js {p}",
            "python3 -W ignore app.py {p}",
            "lua -l socket app.lua {p}",
            "php -d display_errors=1 app.php {p}",
        ] {
            assert_eq!(found_in(command), None, "{command}");
        }
    }

    /// Assignments `env` and `sudo` make for the command they run: a
    /// placeholder in a variable that loads or runs code, or in a name.
    #[test]
    fn values_in_variables_that_run_code_are_found() {
        let cases = [
            ("env PERL5OPT={p} perl x.pl", "env", "PERL5OPT={p}"),
            ("env BASH_ENV={p} bash x.sh", "env", "BASH_ENV={p}"),
            ("env LD_PRELOAD={p} tool", "env", "LD_PRELOAD={p}"),
            ("env NODE_OPTIONS=--require={p} node app.js", "env", "NODE_OPTIONS=--require={p}"),
            ("env -i FOO=1 PYTHONWARNINGS=ignore::{p} python3 a.py", "env", "PYTHONWARNINGS=ignore::{p}"),
            ("env -u HOME PATH={p} ls", "env", "PATH={p}"),
            ("env {p}=1 tool", "env", "{p}=1"),
            ("/usr/bin/env GIT_SSH_COMMAND={p} git fetch", "/usr/bin/env", "GIT_SSH_COMMAND={p}"),
            ("find . -exec env LD_PRELOAD={p} tool ;", "env", "LD_PRELOAD={p}"),
            ("timeout 5 env RUBYOPT=-r{p} ruby a.rb", "env", "RUBYOPT=-r{p}"),
            ("sudo -u nobody LD_LIBRARY_PATH={p} tool", "sudo", "LD_LIBRARY_PATH={p}"),
        ];
        for (command, program, word) in cases {
            let expected = CodeWord { program: program.into(), word: word.into(), role: Role::Variable };
            assert_eq!(found_in(command), Some(expected), "{command}");
        }
        for command in [
            "env FOO={p} tool",
            "env LANG={p} TZ={p} date",
            "env LD_PRELOAD=/usr/lib/x.so tool {p}",
            "sudo -u nobody HOME={p} tool",
            // After the command, `NAME=value` is the command's argument.
            "env tool PATH={p}",
            "env -- tool LD_PRELOAD={p}",
            "make LD_PRELOAD={p}",
        ] {
            assert_eq!(found_in(command), None, "{command}");
        }
    }

    /// Shell text reached through other commands: `su -c`, `script -c`,
    /// `sg`'s command, `watch`'s and `ssh`'s command line; and the command
    /// `runuser -u`, `nsenter` and `unshare` run.
    #[test]
    fn values_in_shells_reached_through_other_commands_are_found() {
        use Role::{Code, CommandLine, Module};
        let cases = [
            ("su -c {p}", "su", "{p}", Code),
            ("su - nobody -c 'echo {p}'", "su", "echo {p}", Code),
            ("su nobody --command='echo {p}'", "su", "--command=echo {p}", Code),
            ("su nobody {p}", "su", "{p}", Code),
            ("su -s {p} nobody", "su", "{p}", Module),
            ("runuser -c {p}", "runuser", "{p}", Code),
            ("runuser nobody -c 'echo {p}'", "runuser", "echo {p}", Code),
            ("runuser -u nobody {p}", "runuser", "{p}", Code),
            ("runuser -u nobody -- {p} x", "runuser", "{p}", Code),
            ("runuser --user=nobody timeout 5 {p}", "timeout", "{p}", Code),
            ("sg staff 'echo {p}'", "sg", "echo {p}", Code),
            ("sg - staff -c 'echo {p}'", "sg", "echo {p}", Code),
            ("script -q -c {p} /dev/null", "script", "{p}", Code),
            ("script out.log --command='echo {p}'", "script", "--command=echo {p}", Code),
            ("watch {p}", "watch", "{p}", CommandLine),
            ("watch -n 5 'ls {p}'", "watch", "ls {p}", CommandLine),
            ("watch -d -n 5 ls -l {p}", "watch", "{p}", CommandLine),
            ("ssh host {p}", "ssh", "{p}", CommandLine),
            ("ssh host 'ls {p}'", "ssh", "ls {p}", CommandLine),
            ("ssh -i key -p 22 host ls -l {p}", "ssh", "{p}", CommandLine),
            ("ssh host -- cat {p}", "ssh", "{p}", CommandLine),
            ("ssh host sh -c 'echo {p}'", "ssh", "echo {p}", CommandLine),
            ("ssh -F {p} host", "ssh", "{p}", Module),
            ("timeout 5 ssh host {p}", "ssh", "{p}", CommandLine),
            ("nsenter -t 1 -m {p}", "nsenter", "{p}", Code),
            ("nsenter --target 1 --mount --net=/run/netns/x python3 {p}", "python3", "{p}", Code),
            ("unshare -r {p}", "unshare", "{p}", Code),
            ("unshare --mount-proc -f --wd=/tmp sh -c 'echo {p}'", "sh", "echo {p}", Code),
        ];
        for (command, program, word, role) in cases {
            let expected = CodeWord { program: program.into(), word: word.into(), role };
            assert_eq!(found_in(command), Some(expected), "{command}");
        }
        for command in [
            "ssh -i key host",
            "ssh -i key {p}",
            "ssh {p} uptime",
            "ssh -l {p} -p {p} host uptime",
            "su {p} -c id",
            "su -c id nobody {p}",
            "runuser -u {p} -- ls",
            "sg {p} id",
            "script -q {p}",
            "script -c ls {p}",
            "watch -n {p} ls",
            "nsenter -t {p} -n ip a",
            "unshare -r python3 app.py {p}",
            "echo ssh host {p}",
        ] {
            assert_eq!(found_in(command), None, "{command}");
        }
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
            // Options after `sh -c`: the code is the first word that is not one.
            ("sh -c -e 'echo {p}'", "sh echo {p}"),
            ("sh -c -- 'echo {p}'", "sh echo {p}"),
            ("bash -ce -o pipefail 'echo {p}'", "bash echo {p}"),
            // Options with a value as the next word or the rest of theirs.
            ("bash -O extglob -c 'echo {p}'", "bash echo {p}"),
            ("bash --rcfile x -c 'echo {p}'", "bash echo {p}"),
            ("php -d x=1 -r 'echo {p};'", "php echo {p};"),
            ("php -R 'echo {p};'", "php echo {p};"),
            ("lua -l socket -e 'print({p})'", "lua print({p})"),
            ("node --import tsx -e {p}", "node {p}"),
            ("perl -Mfeature=say -e 'say \"{p}\"'", "perl say \"{p}\""),
            ("ruby -rnet/http -e 'p {p}'", "ruby p {p}"),
            ("perl -e 1 -e 'print {p}'", "perl print {p}"),
            // An option the table does not know may take the next word.
            ("node --unknown-option x -e {p}", "node {p}"),
            ("env -- {p}", "env {p}"),
            ("env --chdir /tmp {p}", "env {p}"),
            ("env -u HOME {p}", "env {p}"),
            ("env - {p}", "env {p}"),
            ("env - A=1 {p}", "env {p}"),
            ("find . -exec env {p} ;", "env {p}"),
            ("parallel env A=1 {p}", "env {p}"),
            ("sh - {p}", "sh {p}"),
            ("bash - {p} x", "bash {p}"),
            // A known option's value is not the script's name.
            ("python3 -X dev -c {p}", "python3 {p}"),
            ("python3 -W ignore -u -c {p}", "python3 {p}"),
            ("perl -I lib -e {p}", "perl {p}"),
            // A module name chooses what runs.
            ("python3 -m {p}", "python3 {p}"),
            ("python3 -um{p}", "python3 -um{p}"),
            // An unknown option's possible value does not end the options.
            ("python3 -Q new -c {p}", "python3 {p}"),
            ("node --unknown-flag app.js -e {p}", "node {p}"),
            ("bun --inspect app.js -e {p}", "bun {p}"),
            // The script an interpreter runs.
            ("bash {p}", "bash {p}"),
            ("bash -- {p}", "bash {p}"),
            ("sh -x {p} a", "sh {p}"),
            ("python3 {p}", "python3 {p}"),
            ("python3 -u {p}.py", "python3 {p}.py"),
            ("perl -w {p}", "perl {p}"),
            ("ruby -I lib {p}", "ruby {p}"),
            ("node --inspect {p}", "node {p}"),
            ("php -f {p}", "php {p}"),
            ("php {p}", "php {p}"),
            ("lua {p}", "lua {p}"),
            ("Rscript {p}", "Rscript {p}"),
            // An unknown option's possible value may be the script.
            ("python3 -Q {p}", "python3 {p}"),
            // awk's and sed's program text, as the first word or an option's value.
            ("awk '{print $1, \"{p}\"}' file", "awk {print $1, \"{p}\"}"),
            ("gawk -F, -v x=1 '/{p}/' file", "gawk /{p}/"),
            ("awk -f {p} file", "awk {p}"),
            ("sed -n 's/{p}/x/p' file", "sed s/{p}/x/p"),
            ("sed -i.bak -E 's/{p}/x/' file", "sed s/{p}/x/"),
            ("sed -e 1d --expression={p} file", "sed --expression={p}"),
            // Wrappers run the command they are given.
            ("timeout 5 {p}", "timeout {p}"),
            ("timeout -s KILL -k 2 --preserve-status 5 {p} x", "timeout {p}"),
            ("nice {p}", "nice {p}"),
            ("nice -n 5 {p}", "nice {p}"),
            ("nohup {p}", "nohup {p}"),
            ("stdbuf -oL -e 0 {p}", "stdbuf {p}"),
            ("setsid -w {p}", "setsid {p}"),
            ("ionice -c 3 -n 7 {p}", "ionice {p}"),
            ("chrt -r 5 {p}", "chrt {p}"),
            ("xargs -0 -n 1 {p}", "xargs {p}"),
            ("sudo -u nobody HOME=/tmp {p}", "sudo {p}"),
            ("exec -a name {p}", "exec {p}"),
            ("command -p {p}", "command {p}"),
            ("time -f %e {p}", "time {p}"),
            ("flock -w 3 /tmp/l {p}", "flock {p}"),
            ("flock /tmp/l -c {p}", "flock {p}"),
            ("chroot --userspec=1:1 / {p}", "chroot {p}"),
            // What a wrapper runs is the command's program, wrapped again too.
            ("nice -n 5 timeout 5 python3 {p}", "python3 {p}"),
            ("env A=1 xargs awk '{p}'", "awk {p}"),
            // An interpreter a wrapper runs is read as ever.
            ("timeout 5 sh -c '{p}'", "sh {p}"),
            ("sudo -u nobody bash -lc 'echo {p}'", "bash echo {p}"),
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
            "sh -c 'echo \"$1\"' -- {p}",
            "env -S 'python3 a.py' {p}",
            "perl -Mstrict script.pl {p}",
            "ruby -I lib app.rb {p}",
            // The code or module ends python's options: the rest is its `sys.argv`.
            "python3 -m pytest -c {p}",
            "python3 -um pytest -c {p}",
            "python3 -mpytest -c {p}",
            "python3 -c 'import sys' -c {p}",
            // Flags the table knows take no value: the next word is the script.
            "python3 -u script.py -c {p}",
            "python3 -OO -B script.py -c {p}",
            "node --inspect app.js -p {p}",
            "node -i app.js -e {p}",
            "perl -w -i.bak script.pl -e {p}",
            "perl -x script.pl -e {p}",
            "ruby -w app.rb -e {p}",
            "bash -x script.sh -c {p}",
            "lua -i app.lua -e {p}",
            "php -n app.php -r {p}",
            "Rscript --vanilla app.R -e {p}",
            // Arguments after the script, code or program text.
            "bash script.sh {p}",
            "bash -s {p}",
            "python3 - {p}",
            "awk -F: '{print $1}' {p}",
            "awk -f prog.awk {p}",
            "sed -e 's/a/b/' {p}",
            "sed 's/a/b/' {p}",
            "timeout {p} sleep 1",
            "flock {p} true",
            "nice -n {p} python3 app.py",
            "sudo -u {p} true",
            // What runs is chosen by the first word's program, not any word.
            "grep -e python3 {p}",
            "echo timeout 5 {p}",
        ] {
            assert_eq!(code_in(command), None, "{command}");
        }
    }
}
