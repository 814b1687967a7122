//! `docs/reference.md`: every subcommand, its usage and its flags, rendered
//! from the clap definitions (`Cli::command()`) so that the page cannot drift
//! from the binary. Compiled for tests only: the test at the bottom fails
//! when the page differs from what the definitions render, and rewrites it
//! when run with `DROVER_BLESS=1`.
//!
//! The output is deterministic: commands and arguments in declaration order
//! (the order `--help` shows), no terminal width, no colours. Hidden
//! arguments and subcommands, clap's `help` subcommand and `-h/--help` are
//! left out; the global flags are listed once, under `drover` itself.

use clap::builder::PossibleValue;
use clap::{Arg, ArgAction, Command};
use std::fmt::Write as _;

/// The command that rewrites the page; named in the page and in the test's
/// failure message.
pub(crate) const BLESS_COMMAND: &str = "DROVER_BLESS=1 cargo test -p drover --bin drover reference";

/// The whole page for the command tree `cmd` (its root, e.g. `Cli::command()`).
pub(crate) fn render(mut cmd: Command) -> String {
    // Builds every subcommand: propagates the global flags, adds the help
    // flags and gives each subcommand its full name (`drover cluster status`).
    cmd.build();
    let mut commands = Vec::new();
    collect(&cmd, &mut commands);
    let mut out = String::new();
    header(&cmd, &commands, &mut out);
    for c in &commands {
        section(c, c.get_name() == cmd.get_name(), &mut out);
    }
    out
}

/// `cmd` and every visible subcommand below it, depth first, in declaration order.
fn collect<'a>(cmd: &'a Command, out: &mut Vec<&'a Command>) {
    out.push(cmd);
    for sub in visible_subcommands(cmd) {
        collect(sub, out);
    }
}

/// The subcommands `--help` lists: neither hidden nor clap's own `help`.
fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    let generated_help = !cmd.is_disable_help_subcommand_set();
    cmd.get_subcommands().filter(move |s| {
        let clap_help = generated_help && s.get_name() == "help";
        !(s.is_hide_set() || clap_help)
    })
}

/// The full name of a built command (`drover cluster status`).
fn full_name(cmd: &Command) -> &str {
    cmd.get_bin_name().unwrap_or(cmd.get_name())
}

/// The page's title, how it is made, and a list of every command.
fn header(root: &Command, commands: &[&Command], out: &mut String) {
    let name = full_name(root);
    let _ = writeln!(out, "# {name} command reference\n");
    let _ = writeln!(
        out,
        "Generated from the command-line definitions (`src/reference.rs`); do not edit by hand.\n\
         After changing a flag, regenerate it with `{BLESS_COMMAND}`.\n"
    );
    let _ = writeln!(
        out,
        "Every command also takes `-h, --help`. The global flags (under [{name}](#{})) \
         apply to every subcommand and are not repeated in their tables.\n",
        anchor(name)
    );
    for c in commands {
        let depth = full_name(c).split(' ').count().saturating_sub(1);
        let _ = writeln!(
            out,
            "{}- [{}](#{})",
            "  ".repeat(depth),
            full_name(c),
            anchor(full_name(c))
        );
    }
}

/// GitHub's anchor for a heading made of words and spaces.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// One command: about, usage, subcommands, then its flags and arguments.
fn section(cmd: &Command, is_root: bool, out: &mut String) {
    let _ = writeln!(out, "\n## {}\n", full_name(cmd));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", text(&about.to_string()));
    }
    let aliases: Vec<String> = cmd
        .get_visible_aliases()
        .map(|a| format!("`{a}`"))
        .collect();
    if !aliases.is_empty() {
        let _ = writeln!(out, "Aliases: {}.\n", aliases.join(", "));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
    let _ = writeln!(out, "```text\n{}\n```", usage.trim_end());
    subcommand_list(cmd, out);
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| shown(a) && (is_root || !a.is_global_set()))
        .collect();
    if args.is_empty() {
        let _ = writeln!(out, "\nNo flags or arguments of its own.");
        return;
    }
    let title = if is_root {
        "Global flags"
    } else {
        "Flags and arguments"
    };
    let _ = writeln!(out, "\n{title}:\n");
    let _ = writeln!(
        out,
        "| Flag or argument | Value | Default | Env | Description |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for a in args {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            arg_name(a),
            value_name(a),
            default(a),
            env(a),
            description(a)
        );
    }
}

/// The subcommands of `cmd` with their one-line about, linked to their sections.
fn subcommand_list(cmd: &Command, out: &mut String) {
    let subs: Vec<&Command> = visible_subcommands(cmd).collect();
    if subs.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nCommands:\n");
    for s in subs {
        let about = s
            .get_about()
            .map(|a| text(&a.to_string()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- [`{}`](#{}): {about}",
            s.get_name(),
            anchor(full_name(s))
        );
    }
}

/// Whether an argument belongs in a table: not hidden, not `-h/--help`.
fn shown(a: &Arg) -> bool {
    !a.is_hide_set()
        && !matches!(
            a.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong
        )
}

/// `-o, --output` (with visible aliases) for a flag; `<KEY>`, `[PREFIX]`,
/// `<NAMES>...` or `-- <COMMAND>...` for a positional argument.
fn arg_name(a: &Arg) -> String {
    if a.is_positional() {
        let name = value_names(a).join(" ");
        let many = if takes_many(a) { "..." } else { "" };
        let dashes = if a.is_last_set() { "-- " } else { "" };
        return if a.is_required_set() {
            format!("`{dashes}<{name}>{many}`")
        } else {
            format!("`{dashes}[{name}]{many}`")
        };
    }
    let mut names = Vec::new();
    if let Some(s) = a.get_short() {
        names.push(format!("-{s}"));
    }
    for s in a.get_visible_short_aliases().unwrap_or_default() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = a.get_long() {
        names.push(format!("--{l}"));
    }
    for l in a.get_visible_aliases().unwrap_or_default() {
        names.push(format!("--{l}"));
    }
    format!("`{}`", names.join(", "))
}

/// The value names clap shows (the argument's id when none was set, as
/// clap's own usage does; the derive sets one for every field).
fn value_names(a: &Arg) -> Vec<String> {
    match a.get_value_names() {
        Some(names) => names.iter().map(|n| n.to_string()).collect(),
        None => vec![a.get_id().as_str().to_string()],
    }
}

/// Whether the argument takes several values (repeatable, or several at once).
fn takes_many(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Append)
        || a.get_num_args().is_some_and(|n| n.max_values() > 1)
}

/// A flag's value: `NAME`; `[NAME]` when it may be left out, `[=NAME]`
/// when it must then follow an `=` (`--dry-run[=client]`); empty for
/// positional arguments (their name says it) and switches.
fn value_name(a: &Arg) -> String {
    if a.is_positional() || !a.get_action().takes_values() {
        return String::new();
    }
    let names = value_names(a).join(" ");
    let optional = a.get_num_args().is_some_and(|n| n.min_values() == 0);
    let equals = if a.is_require_equals_set() { "=" } else { "" };
    if optional {
        format!("`[{equals}{names}]`")
    } else {
        format!("`{equals}{names}`")
    }
}

/// The default value(s), for arguments that take a value; `""` for an empty one.
fn default(a: &Arg) -> String {
    if !a.get_action().takes_values() || a.is_hide_default_value_set() {
        return String::new();
    }
    let values: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if values.is_empty() {
        return String::new();
    }
    let joined = values.join(",");
    if joined.is_empty() {
        "`\"\"`".to_string()
    } else {
        format!("`{}`", cell(&joined))
    }
}

/// The environment variable the argument is read from, if any.
fn env(a: &Arg) -> String {
    match a.get_env() {
        Some(e) if !a.is_hide_env_set() => format!("`{}`", e.to_string_lossy()),
        _ => String::new(),
    }
}

/// The help text, then the possible values (with their help), then
/// "Required." or "Repeatable." where neither the name nor the help already
/// says it; one sentence after another.
fn description(a: &Arg) -> String {
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| text(&h.to_string()))
        .unwrap_or_default();
    let mut parts = vec![help.clone()];
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(possible_value)
        .collect();
    if !values.is_empty() {
        parts.push(format!("Values: {}.", values.join("; ")));
    }
    if !a.is_positional() {
        if a.is_required_set() {
            parts.push("Required.".to_string());
        }
        let says_it = help.to_lowercase().contains("repeatable");
        if matches!(a.get_action(), ArgAction::Append) && !says_it {
            parts.push("Repeatable.".to_string());
        }
    }
    sentences(&parts)
}

/// The non-empty parts, joined as sentences: a part that is followed by
/// another gets a full stop if it has none (clap drops the one a doc
/// comment ends with).
fn sentences(parts: &[String]) -> String {
    let parts: Vec<&str> = parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect();
    let mut out = String::new();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(p);
        let last = i + 1 == parts.len();
        if !last && !p.ends_with(['.', '!', '?']) {
            out.push('.');
        }
    }
    out
}

/// `` `json` `` or `` `json` (One JSON object per entry…) ``.
fn possible_value(v: &PossibleValue) -> String {
    match v.get_help() {
        Some(h) => format!(
            "`{}` ({})",
            v.get_name(),
            text(&h.to_string()).trim_end_matches('.')
        ),
        None => format!("`{}`", v.get_name()),
    }
}

/// Help text as one table cell or paragraph: lines joined with spaces,
/// paragraphs with `<br>`, each escaped for markdown.
fn text(s: &str) -> String {
    s.trim()
        .split("\n\n")
        .map(|p| escape(&p.split_whitespace().collect::<Vec<_>>().join(" ")))
        .collect::<Vec<_>>()
        .join("<br>")
}

/// Escapes `<` (raw HTML) and `*` (emphasis) outside code spans, and `|`
/// (the end of a table cell) everywhere.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_code = false;
    for ch in s.chars() {
        match ch {
            '`' => {
                in_code = !in_code;
                out.push(ch);
            }
            '<' if !in_code => out.push_str("&lt;"),
            '*' if !in_code => out.push_str("\\*"),
            _ => out.push(ch),
        }
    }
    cell(&out)
}

/// Escapes what would end a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Compares the page at `path` with `rendered`: `Ok` when equal; with
/// `bless`, writes `rendered` there instead. The error says what differs
/// and how to regenerate the page.
fn check(path: &std::path::Path, rendered: &str, bless: bool) -> Result<(), String> {
    if bless {
        return std::fs::write(path, rendered)
            .map_err(|e| format!("cannot write {}: {e}", path.display()));
    }
    let on_disk = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            return Err(format!(
                "cannot read {}: {e}; generate it with `{BLESS_COMMAND}`",
                path.display()
            ))
        }
    };
    if on_disk == rendered {
        return Ok(());
    }
    Err(format!(
        "{} is out of date with the command-line definitions ({}); \
         regenerate it with `{BLESS_COMMAND}` and commit the result",
        path.display(),
        first_difference(&on_disk, rendered)
    ))
}

/// Where two texts first differ, by line, for the failure message.
fn first_difference(on_disk: &str, rendered: &str) -> String {
    let mut a = on_disk.lines();
    let mut b = rendered.lines();
    let mut n = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (x, y) => {
                return format!(
                    "line {n}: the file has {:?}, the definitions give {:?}",
                    x.unwrap_or("<end of file>"),
                    y.unwrap_or("<end of file>")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The page in the repository is what the definitions render.
    #[test]
    fn reference_matches_the_cli() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference.md");
        let bless = std::env::var_os("DROVER_BLESS").is_some_and(|v| v == "1");
        let rendered = render(crate::Cli::command());
        if let Err(e) = check(&path, &rendered, bless) {
            panic!("{e}");
        }
    }

    /// Two renders of the same definitions are the same text.
    #[test]
    fn reference_is_deterministic() {
        assert_eq!(render(crate::Cli::command()), render(crate::Cli::command()));
    }

    /// A small tree: a global flag, a hidden flag, a hidden subcommand, a
    /// nested subcommand with a positional argument and a default.
    fn sample() -> Command {
        Command::new("tool")
            .about("A tool")
            .arg(
                Arg::new("config")
                    .long("config")
                    .global(true)
                    .env("TOOL_CONFIG")
                    .help("Config | file"),
            )
            .subcommand(
                Command::new("group").about("A group").subcommand(
                    Command::new("leaf")
                        .about("A <leaf>")
                        .arg(Arg::new("key").required(true).help("The key"))
                        .arg(
                            Arg::new("mode")
                                .long("mode")
                                .default_value("fast")
                                .value_parser(["fast", "slow"]),
                        )
                        .arg(
                            Arg::new("tag")
                                .short('t')
                                .long("tag")
                                .value_name("TAG")
                                .action(ArgAction::Append)
                                .required(true)
                                .help("A tag"),
                        )
                        .arg(Arg::new("secret").long("secret").hide(true)),
                ),
            )
            .subcommand(Command::new("ghost").hide(true))
    }

    #[test]
    fn reference_lists_global_flags_once_and_leaves_out_hidden_ones() {
        let page = render(sample());
        assert_eq!(page.matches("`--config`").count(), 1, "{page}");
        assert!(
            page.contains("| `--config` | `config` |  | `TOOL_CONFIG` | Config \\| file |"),
            "{page}"
        );
        assert!(!page.contains("secret"), "{page}");
        assert!(!page.contains("ghost"), "{page}");
        assert!(!page.contains("## tool help"), "{page}");
        assert!(!page.contains("| `-h, --help`"), "{page}");
    }

    #[test]
    fn reference_renders_nested_commands_with_usage_and_defaults() {
        let page = render(sample());
        assert!(
            page.contains("\n## tool group leaf\n\nA &lt;leaf>\n"),
            "{page}"
        );
        assert!(
            page.contains("```text\ntool group leaf [OPTIONS] --tag <TAG> <key>\n```"),
            "{page}"
        );
        assert!(page.contains("| `<key>` |  |  |  | The key |"), "{page}");
        assert!(
            page.contains("| `--mode` | `mode` | `fast` |  | Values: `fast`; `slow`. |"),
            "{page}"
        );
        assert!(
            page.contains("\n    - [tool group leaf](#tool-group-leaf)\n"),
            "{page}"
        );
        assert!(
            page.contains("| `-t, --tag` | `TAG` |  |  | A tag. Required. Repeatable. |"),
            "{page}"
        );
    }

    #[test]
    fn check_says_how_to_regenerate() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("reference.md");
        let missing = check(&path, "a\n", false).expect_err("no file yet");
        assert!(missing.contains(BLESS_COMMAND), "{missing}");
        check(&path, "a\nb\n", true).expect("bless writes");
        check(&path, "a\nb\n", false).expect("same text");
        let stale = check(&path, "a\nc\n", false).expect_err("differs");
        assert!(stale.contains("line 2"), "{stale}");
        assert!(stale.contains(BLESS_COMMAND), "{stale}");
    }
}
