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

#[test]
fn bad_variables_are_refused_the_same_way() {
    refused(
        &["--verdict", "stderr"],
        &[("VLOER_GRACE", "5x")],
        &["--grace", "5x"],
    );
    refused(
        &["--verdict", "stderr"],
        &[("VLOER_STOP_SIGNAL", "NOSUCHSIG")],
        &["--stop-signal"],
    );
}
