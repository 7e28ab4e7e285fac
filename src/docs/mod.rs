//! The manual page and the shell completions, generated from the one clap definition (cli.rs) plus
//! the hand-written sections below, and checked against the committed `man/` and `completions/`.
//!
//! When a test here says a file is out of date, regenerate every file with [`BLESS`] and commit
//! the result. Test-only: clap_mangen and clap_complete stay out of the shipped binary.

use crate::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The one command that rewrites every generated file.
const BLESS: &str = "VLOER_BLESS=1 cargo test --bin vloer-run docs::";

mod text;
use text::*;

// ---------------------------------------------------------------------------------------------
// Generation.

/// The command as the documentation shows it. The `.TH` line carries the package version alone:
/// the git commit in `--version` would make every commit a change to the manual.
fn command() -> clap::Command {
    let mut cmd = Cli::command().version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    cmd
}

/// Renders one clap_mangen section; every render repeats roff's apostrophe preamble, which only the
/// first section keeps.
fn section(
    render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
    keep_preamble: bool,
) -> String {
    let mut buf = Vec::new();
    render(&mut buf).expect("rendering to a Vec cannot fail");
    let text = String::from_utf8(buf).expect("clap_mangen writes UTF-8");
    if keep_preamble {
        return text;
    }
    let mut lines = text.lines().peekable();
    let mut out = String::new();
    while let Some(l) = lines.peek() {
        if l.starts_with(".ie \\n(.g .ds Aq") || l.starts_with(".el .ds Aq") {
            lines.next();
        } else {
            break;
        }
    }
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// The manual page, `man/vloer-run.1`.
pub fn man_page() -> String {
    let cmd = command();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = String::new();
    out.push_str(&format!(
        ".\\\" Generated from src/cli.rs and src/docs/; do not edit. Regenerate: {BLESS}\n"
    ));
    out += &section(|w| man.render_title(w), true);
    out += &section(|w| man.render_name_section(w), false);
    out.push_str(".SH SYNOPSIS\n\\fBvloer\\-run\\fR [\\fIOPTIONS\\fR] [\\fB\\-\\-\\fR] \\fICOMMAND\\fR [\\fIARG\\fR]...\n");
    for sub in cmd.get_subcommands() {
        out.push_str(".br\n");
        out += &usage(sub);
    }
    out += &section(|w| man.render_description_section(w), false);
    out += &headings_as(
        &section(|w| man.render_options_section(w), false),
        |title| format!(".SS \"{title}\"\n"),
    );
    out += &commands_section(&cmd);
    out += &to_roff(RUNNING);
    out += &to_roff(STOP);
    out += &to_roff(SWEEP);
    out += &to_roff(VERDICT);
    out += &to_roff(EXIT_STATUS);
    out += &environment_section(&cmd);
    out += &to_roff(FORMATS);
    out += &to_roff(CONTROL_PROTOCOL);
    out += &to_roff(LIMITS);
    out += &to_roff(&examples());
    out += &to_roff(SEE_ALSO);
    out
}

/// COMMANDS: each control client with its own synopsis and options, straight from clap.
fn commands_section(cmd: &clap::Command) -> String {
    let mut out = String::from(".SH COMMANDS\n");
    out += &escape_line(
        "These talk to a running instance through its control socket (see CONTROL PROTOCOL).",
    );
    for sub in cmd.get_subcommands() {
        let sub = sub
            .clone()
            .bin_name(format!("vloer-run {}", sub.get_name()));
        let man = clap_mangen::Man::new(sub.clone());
        let _ = writeln!(out, ".SS \"vloer-run {}\"", sub.get_name());
        out += &usage(&sub);
        out.push_str(".PP\n");
        let about = sub
            .get_long_about()
            .or(sub.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        out += &escape_line(&about);
        let options = section(|w| man.render_options_section(w), false);
        let options = options.replace(".SH OPTIONS\n", ".PP\nOptions:\n");
        out += &headings_as(&options, |title| format!(".PP\n{title}:\n"));
    }
    out
}

/// The option groups of `--help` (cli::heading), which clap_mangen renders as sections of their
/// own, rendered by `render` instead (given the title as --help spells it): they belong inside
/// OPTIONS.
fn headings_as(options: &str, render: impl Fn(&str) -> String) -> String {
    let mut out = String::new();
    for line in options.lines() {
        match line.strip_prefix(".SH ") {
            Some(title) if title != "OPTIONS" => {
                let upper = title.trim_matches('"');
                let cli_title = Cli::command()
                    .get_arguments()
                    .filter_map(|a| a.get_help_heading())
                    .find(|h| h.to_uppercase() == upper)
                    .unwrap_or(upper)
                    .to_string();
                out += &render(&cli_title);
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// A client's synopsis from clap's own usage line: literals bold, <VALUES> italic.
fn usage(sub: &clap::Command) -> String {
    let text = sub.clone().render_usage().to_string();
    let text = text.trim().trim_start_matches("Usage:").trim();
    let words: Vec<String> = text
        .split(' ')
        .map(|w| {
            let (open, rest) = w.split_at(w.len() - w.trim_start_matches('[').len());
            let (core, close) = rest.split_at(rest.trim_end_matches([']', '.']).len());
            let core = if let Some(v) = core.strip_prefix('<').and_then(|c| c.strip_suffix('>')) {
                format!("\\fI{}\\fR", escape(v))
            } else if core == "OPTIONS" {
                "\\fIOPTIONS\\fR".to_string()
            } else {
                format!("\\fB{}\\fR", escape(core))
            };
            format!("{open}{core}{close}")
        })
        .collect();
    words.join(" ") + "\n"
}

/// ENVIRONMENT: every VLOER_* variable clap knows, with the option it sets.
fn environment_section(cmd: &clap::Command) -> String {
    let mut md = String::from(
        "\n# ENVIRONMENT\nEvery run option can be set by a variable, so a Dockerfile can configure vloer-run without changing its ENTRYPOINT; a flag on the command line beats the variable. Switches take true or false (also 1/0, yes/no, on/off); options that repeat take a comma-separated list (VLOER_REWRITE=TERM:QUIT,WINCH:0).\n",
    );
    for arg in cmd.get_arguments() {
        let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) else {
            continue;
        };
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let _ = write!(md, ": `{}`\n`--{long}`: {help}\n", env.to_string_lossy());
    }
    to_roff(&md)
}

/// EXAMPLES: the files in examples/, verbatim, so the manual shows what the tests run.
fn examples() -> String {
    format!(
        "\n# EXAMPLES\nWrap a command; the verdict goes to stderr:\n```\n{}```\nA shell script that reads the verdict and refuses to go on without proof (examples/run-and-check.sh):\n```\n{}```\nA Dockerfile with vloer-run as ENTRYPOINT (examples/Dockerfile):\n```\n{}```\nA Kubernetes pod: the verdict as termination message, a preStop stop (examples/pod.yaml):\n```\n{}```\n",
        "vloer-run --grace 2s -- sh -c 'sleep 60 & setsid sleep 60 & exit 3'\n",
        include_str!("../../examples/run-and-check.sh"),
        include_str!("../../examples/Dockerfile"),
        include_str!("../../examples/pod.yaml"),
    )
}

/// Escapes text for a roff text line: backslashes, dashes, apostrophes, a leading period.
fn escape(text: &str) -> String {
    let s = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('\'', "\\(aq");
    if s.starts_with('.') {
        format!("\\&{s}")
    } else {
        s
    }
}

fn escape_line(text: &str) -> String {
    text.lines().map(|l| escape(l.trim()) + "\n").collect()
}

/// Escapes and turns `code` into bold.
fn inline(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.trim().split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "\\fB{}\\fR", escape(part).trim_start_matches("\\&"));
        } else {
            out += &escape(part);
        }
    }
    if out.starts_with('.') {
        out.insert_str(0, "\\&");
    }
    out + "\n"
}

/// The mini-markup of the hand-written sections, to roff: "# T" a section, "## T" a subsection, a
/// blank line a new paragraph, ": T" the tag of a tagged paragraph, "- " a bullet, "1. " a numbered
/// item, ``` fences a verbatim block; `code` is bold.
fn to_roff(md: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    let mut para = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            if in_code {
                out.push_str(".EE\n");
            } else {
                out.push_str(".PP\n.EX\n");
            }
            in_code = !in_code;
            para = true;
            continue;
        }
        if in_code {
            let l = escape(line);
            out += if l.is_empty() { "\\&" } else { &l };
            out.push('\n');
            continue;
        }
        if line.trim().is_empty() {
            para = true;
            continue;
        }
        if let Some(t) = line.strip_prefix("## ") {
            let _ = writeln!(out, ".SS \"{}\"", t.trim());
            para = false;
        } else if let Some(t) = line.strip_prefix("# ") {
            let _ = writeln!(out, ".SH \"{}\"", t.trim().to_uppercase());
            para = false;
        } else if let Some(t) = line.strip_prefix(": ") {
            out.push_str(".TP\n");
            out += &inline(t);
            para = false;
        } else if let Some(t) = line.strip_prefix("- ") {
            out.push_str(".IP \\(bu 2\n");
            out += &inline(t);
            para = false;
        } else if let Some((n, t)) = line
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            let _ = writeln!(out, ".IP {n}. 4");
            out += &inline(t);
            para = false;
        } else {
            if para {
                out.push_str(".PP\n");
                para = false;
            }
            out += &inline(line);
        }
    }
    assert!(!in_code, "unclosed ``` block");
    out
}

/// The completion script for one shell.
fn completion(shell: Shell) -> String {
    let mut cmd = command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vloer-run", &mut buf);
    let script = String::from_utf8(buf).expect("clap_complete writes UTF-8");
    if shell == Shell::Fish {
        return repair_fish(script);
    }
    script
}

/// clap_complete's fish script offers the top-level options and their values only while
/// `argparse` accepts the words typed so far, and it refuses `vloer-run --scope` (the value is
/// still missing), so `--scope <TAB>` fell back to file names. A line argparse cannot read yet
/// is still at the top level: say so.
fn repair_fish(script: String) -> String {
    let guard =
        "argparse -s (__fish_vloer_run_global_optspecs) -- $cmd 2>/dev/null\n    or return\n";
    assert!(
        script.contains(guard),
        "clap_complete's fish output changed: repair_fish in src/docs/ no longer finds its guard; check `--scope <TAB>` in fish by hand"
    );
    script.replace(guard, "argparse -s (__fish_vloer_run_global_optspecs) -- $cmd 2>/dev/null\n    or return 0 # vloer-run: an option still waits for its value\n")
}

/// Every generated file: its path under the crate root and what it must contain.
fn generated() -> Vec<(&'static str, String)> {
    vec![
        ("man/vloer-run.1", man_page()),
        ("completions/vloer-run.bash", completion(Shell::Bash)),
        ("completions/_vloer-run", completion(Shell::Zsh)),
        ("completions/vloer-run.fish", completion(Shell::Fish)),
    ]
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[cfg(test)]
mod tests;
