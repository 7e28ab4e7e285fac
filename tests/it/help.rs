//! Help that fits a terminal: `-h` and `--help` read through a real pty at 80 columns wrap to
//! its width, show one usage line, and group the run's options under headings.

use crate::tty::Pty;

/// Everything `vloer-run ARGS` writes to an 80-column terminal, without carriage returns.
fn on_80_columns(args: &str) -> String {
    let mut pty = Pty::open();
    let leader = pty.spawn(
        &["sh", "-c", &format!(r#""$VR" {args}; echo "help-exit=$?""#)],
        &[],
    );
    let code = pty.expect_number("help-exit=");
    pty.assert_leader_succeeds(leader, "the sh running vloer-run");
    let text = pty.text().replace('\r', "");
    assert_eq!(code, 0, "vloer-run {args}:\n{text}");
    text
}

fn assert_fits(args: &str, text: &str) {
    let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(
        wide.is_empty(),
        "{args}: {} lines wider than 80 columns:\n{}\n--- whole text\n{text}",
        wide.len(),
        wide.join("\n")
    );
}

#[test]
fn help_wraps_at_the_terminal_width() {
    for args in ["-h", "--help", "exec -h", "stop --help"] {
        let text = on_80_columns(args);
        assert!(
            text.contains("Usage: vloer-run"),
            "{args}: no usage:\n{text}"
        );
        assert_fits(args, &text);
    }
}

#[test]
fn help_has_one_usage_line_and_the_options_under_headings() {
    let text = on_80_columns("-h");
    let usage: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Usage:"))
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        usage,
        ["Usage: vloer-run [OPTIONS] [--] COMMAND [ARG]..."],
        "{text}"
    );
    let headings: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with(':') && !l.starts_with(' '))
        .collect();
    // Every option is under a heading of its own group: none is left in clap's flat "Options".
    assert!(!headings.contains(&"Options:"), "{text}");
    // These groups, in this order; a new group may come between them.
    let ours = [
        "Commands:",
        "Arguments:",
        "Running:",
        "Stopping:",
        "Control:",
        "The verdict and exit status:",
        "Output:",
    ];
    let shown: Vec<&str> = headings
        .iter()
        .copied()
        .filter(|h| ours.contains(h))
        .collect();
    assert_eq!(shown, ours, "{text}");
    // Each option under its heading: the line after a heading starts an option of that group.
    for (heading, option) in [
        ("Running:", "--session"),
        ("Stopping:", "--when-child-exits"),
        ("Control:", "--control"),
        ("The verdict and exit status:", "--verdict"),
        ("Output:", "-v, --verbose"),
    ] {
        let after = text.split(&format!("\n{heading}\n")).nth(1).unwrap_or("");
        let first = after.lines().next().unwrap_or("");
        assert!(
            first.contains(option),
            "{option} is not first under {heading}:\n{text}"
        );
    }
}

#[test]
fn help_says_quiet_keeps_the_verdict() {
    let text = on_80_columns("-h");
    let quiet: String = text
        .split("-q, --quiet")
        .nth(1)
        .and_then(|rest| rest.split("-h, --help").next())
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        quiet.contains("the verdict is still written"),
        "-q does not say it keeps the verdict: {quiet:?}\n{text}"
    );
}
