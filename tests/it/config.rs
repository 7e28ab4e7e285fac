//! Configuration: `VLOER_*` environment variables set every run option and a flag beats its
//! variable; bad input (an unknown signal, a malformed duration, a missing COMMAND, a verdict path
//! in a missing folder, ...) gets one `vloer-run:` line naming the option, exit 125, and nothing
//! is started.

use crate::harness::{self, Run};

#[test]
fn variables_set_options() {
    let f = Run::new(["--", "true"]).env("VLOER_VERDICT", "-").finish();
    assert!(
        harness::parse_verdict(&f.stdout).is_some(),
        "VLOER_VERDICT=- did not move the verdict to stdout: {f}"
    );
    assert!(harness::parse_verdict(&f.stderr).is_none(), "{f}");

    let f = Run::new(["--", "sh", "-c", "exit 3"])
        .env("VLOER_SUCCESS_EXIT", "3")
        .finish();
    assert_eq!(f.code(), Some(0), "{f}");

    let f = Run::new(["--", "sleep", "1000"])
        .env("VLOER_TIMEOUT", "200ms")
        .finish();
    assert_eq!(f.code(), Some(124), "{f}");
    assert_eq!(f.verdict()["reason"], "timeout", "{f}");

    // A switch takes 1/true/yes.
    let f = Run::new(["--", "sleep", "1000"])
        .env("VLOER_TIMEOUT", "200ms")
        .env("VLOER_PRESERVE_STATUS", "1")
        .finish();
    // After a timeout the child's 128+N is a plain status, never vloer-run's own death.
    assert_eq!(f.code(), Some(143), "{f}");

    let f = Run::new(["--", "true"])
        .env("VLOER_SCOPE", "group")
        .finish();
    assert_eq!(f.verdict()["scope"], "group", "{f}");

    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let f = Run::helper(
        &[],
        &["many", "2", &harness::path_str(&ready), "--then-exit"],
    )
    .env("VLOER_STOP_SIGNAL", "HUP")
    .finish();
    assert_eq!(f.verdict()["sent"], serde_json::json!({"SIGHUP": 2}), "{f}");
}

#[test]
fn a_flag_beats_its_variable() {
    let f = Run::new(["--verdict", "stderr", "--", "true"])
        .env("VLOER_VERDICT", "-")
        .finish();
    assert!(harness::parse_verdict(&f.stderr).is_some(), "{f}");
    assert!(f.stdout.is_empty(), "{f}");

    let f = Run::new(["--scope", "tree", "--", "true"])
        .env("VLOER_SCOPE", "group")
        .finish();
    assert_eq!(f.verdict()["scope"], "tree", "{f}");

    let f = Run::new(["--timeout", "200ms", "--", "sleep", "1000"])
        .env("VLOER_TIMEOUT", "1h")
        .finish();
    assert_eq!(f.code(), Some(124), "{f}");

    let dir = harness::tempdir();
    let ready = harness::tmp_path(&dir, "ready");
    let f = Run::helper(
        &["--stop-signal", "TERM"],
        &["many", "2", &harness::path_str(&ready), "--then-exit"],
    )
    .env("VLOER_STOP_SIGNAL", "HUP")
    .finish();
    assert_eq!(
        f.verdict()["sent"],
        serde_json::json!({"SIGTERM": 2}),
        "{f}"
    );
}

/// Runs vloer-run with bad input and a COMMAND that would leave a mark; checks the one line, the
/// 125 and that nothing ran. `names` must appear in the line.
fn refused(args: &[&str], env: &[(&str, &str)], names: &[&str]) {
    refused_as(args, true, env, names);
}

fn refused_as(args: &[&str], with_command: bool, env: &[(&str, &str)], names: &[&str]) {
    let dir = harness::tempdir();
    let mark = harness::tmp_path(&dir, "started");
    let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if with_command {
        argv.extend([
            "--".into(),
            "sh".into(),
            "-c".into(),
            format!("touch {}", harness::path_str(&mark)),
        ]);
    }
    let mut run = Run::new(&argv);
    for (k, v) in env {
        run = run.env(k, v);
    }
    let f = run.finish();
    assert_eq!(f.code(), Some(125), "{args:?} {env:?}: {f}");
    assert!(f.stdout.is_empty(), "{f}");
    let lines: Vec<&str> = f.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line: {f}");
    assert!(lines[0].starts_with("vloer-run: "), "{f}");
    for name in names {
        assert!(
            lines[0].contains(name),
            "the line does not name {name:?}: {f}"
        );
    }
    assert!(!mark.exists(), "the command ran despite bad input: {f}");
}

#[test]
fn bad_input_gets_one_line_and_125() {
    refused(
        &["--stop-signal", "NOSUCHSIG"],
        &[],
        &["--stop-signal", "NOSUCHSIG", "TERM"],
    );
    refused(&["--stop-on", "99"], &[], &["--stop-on"]);
    refused(&["--grace", "5x"], &[], &["--grace", "5x", "500ms"]);
    refused(&["--timeout", "-1"], &[], &["--timeout"]);
    refused(&["--kill-timeout", "soon"], &[], &["--kill-timeout"]);
    refused_as(&[], false, &[], &["COMMAND"]);
    refused_as(&["--grace", "2s"], false, &[], &["COMMAND"]);
    refused(
        &["--verdict", "/nonexistent-dir/verdict.json"],
        &[],
        &["--verdict", "/nonexistent-dir"],
    );
    refused(&["--rewrite", "TERM"], &[], &["--rewrite", "FROM:TO"]);
    refused(&["--scope", "everything"], &[], &["--scope"]);
    refused(&["--success-exit", "300"], &[], &["--success-exit"]);
}

/// Like `refused`, and the line must not mention any of `absent`.
fn refused_without(args: &[&str], env: &[(&str, &str)], names: &[&str], absent: &[&str]) {
    refused(args, env, names);
    let mut run = Run::new(args.iter().chain(&["--", "true"]));
    for (k, v) in env {
        run = run.env(k, v);
    }
    let f = run.finish();
    for word in absent {
        assert!(!f.stderr.contains(word), "the line names {word:?}: {f}");
    }
}

#[test]
fn a_bad_variable_is_named_with_what_it_accepts_never_as_a_flag() {
    // Every variable, with a bad value and a word of what it accepts.
    let table: &[(&str, &str, &str, &str)] = &[
        (
            "VLOER_CONTROL",
            "/nonexistent-dir/s",
            "--control",
            "existing folder",
        ),
        ("VLOER_SESSION", "maybe", "--session", "true or false"),
        ("VLOER_FORWARD_TO", "grp", "--forward-to", "group or child"),
        ("VLOER_REWRITE", "TERM", "--rewrite", "FROM:TO"),
        ("VLOER_PARENT_DEATH", "2", "--parent-death", "true or false"),
        (
            "VLOER_CHILD_PDEATHSIG",
            "x",
            "--child-pdeathsig",
            "signal name",
        ),
        (
            "VLOER_WHEN_CHILD_EXITS",
            "never",
            "--when-child-exits",
            "stop or wait",
        ),
        (
            "VLOER_STOP_SIGNAL",
            "NOSUCHSIG",
            "--stop-signal",
            "signal name",
        ),
        ("VLOER_STOP_ORDER", "first", "--stop-order", "child or all"),
        ("VLOER_GRACE", "abc", "--grace", "500ms"),
        ("VLOER_KILL_TIMEOUT", "soon", "--kill-timeout", "500ms"),
        ("VLOER_STOP_ON", "0", "--stop-on", "1..=64"),
        ("VLOER_TIMEOUT", "-1", "--timeout", "500ms"),
        ("VLOER_SCOPE", "everything", "--scope", "tree or group"),
        (
            "VLOER_VERDICT",
            "/nonexistent-dir/v",
            "--verdict",
            "existing folder",
        ),
        (
            "VLOER_PRESERVE_STATUS",
            "perhaps",
            "--preserve-status",
            "true or false",
        ),
        ("VLOER_SUCCESS_EXIT", "300", "--success-exit", "0..=255"),
        ("VLOER_VERBOSE", "loud", "--verbose", "true or false"),
        ("VLOER_QUIET", "hush", "--quiet", "true or false"),
        (
            "VLOER_SWEEP",
            "/nonexistent-dir",
            "--sweep",
            "does not exist",
        ),
        (
            "VLOER_SWEEP_STRICT",
            "always",
            "--sweep-strict",
            "true or false",
        ),
    ];
    for (var, value, flag, accepted) in table {
        refused_without(&[], &[(var, value)], &[var, value, accepted], &[flag]);
    }
    let mut covered: Vec<&str> = table.iter().map(|row| row.0).collect();
    covered.sort();
    let help = Run::new(["--help"]).finish();
    let mut listed: Vec<&str> = help
        .stdout
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.starts_with("VLOER_"))
        .collect();
    listed.sort();
    listed.dedup();
    assert_eq!(covered, listed, "a variable of --help is not checked here");
}

#[test]
fn a_variable_and_a_flag_in_conflict_are_each_named_as_given() {
    refused_without(
        &["-v"],
        &[("VLOER_QUIET", "1")],
        &["'--verbose'", "VLOER_QUIET"],
        &["--quiet"],
    );
    refused_without(
        &[],
        &[("VLOER_QUIET", "1"), ("VLOER_VERBOSE", "1")],
        &["VLOER_VERBOSE", "VLOER_QUIET"],
        &["--quiet", "--verbose"],
    );
}

#[test]
fn a_typo_gets_the_similar_name() {
    refused(
        &["--gracee", "5s"],
        &[],
        &["'--gracee'", "a similar argument exists: '--grace'"],
    );
    refused(
        &["--scope", "tre"],
        &[],
        &["'--scope", "a similar value exists: 'tree'"],
    );
    refused_without(
        &[],
        &[("VLOER_SCOPE", "tre")],
        &["VLOER_SCOPE", "a similar value exists: 'tree'"],
        &["--scope"],
    );
}

#[test]
fn exec_without_a_command_shows_the_usage_of_exec() {
    let dir = harness::tempdir();
    let socket = harness::path_str(&harness::tmp_path(&dir, "control"));
    refused_as(
        &["exec", "--control", &socket],
        false,
        &[],
        &[
            "no COMMAND given",
            "usage: vloer-run exec --control PATH",
            "vloer-run exec --help",
        ],
    );
}

#[test]
fn a_flag_with_a_bad_value_is_named_as_the_flag_even_with_its_variable_set() {
    refused_without(
        &["--grace", "5x"],
        &[("VLOER_GRACE", "5x")],
        &["'--grace <DURATION>'", "5x"],
        &["VLOER_GRACE"],
    );
}

#[test]
fn bad_variables_are_refused_the_same_way() {
    refused(
        &["--verdict", "stderr"],
        &[("VLOER_GRACE", "5x")],
        &["VLOER_GRACE", "5x"],
    );
    refused(
        &["--verdict", "stderr"],
        &[("VLOER_STOP_SIGNAL", "NOSUCHSIG")],
        &["VLOER_STOP_SIGNAL"],
    );
}
