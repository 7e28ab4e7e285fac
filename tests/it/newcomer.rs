//! A newcomer's first hour: `-v` speaks in words, and the release tarball runs as PID 1
//! in an otherwise empty root.

use crate::harness::{self, Run};

/// Whether `line` has a form Rust's `{:?}` prints: `Exited(0)`, `ChildExited`, `Sig(9)`, `"sh"`.
fn looks_like_debug(line: &str) -> bool {
    let camel = line.split(|c: char| !c.is_alphanumeric()).any(|w| {
        let mut chars = w.chars();
        chars.next().is_some_and(|c| c.is_ascii_uppercase())
            && w.chars().skip(1).any(|c| c.is_ascii_uppercase())
            && w.chars().any(|c| c.is_ascii_lowercase())
    });
    let call = line
        .char_indices()
        .any(|(i, c)| c == '(' && line[..i].ends_with(|p: char| p.is_ascii_alphabetic()));
    camel || call || line.contains('"') || line.contains("Some") || line.contains("None")
}

/// Checks every line against the Debug forms, and that each of `expected` (a line's start, with
/// `N` for any number) is there.
fn assert_words(f: &harness::Finished, expected: &[&str]) {
    let lines = f.own_lines();
    for l in &lines {
        assert!(
            !looks_like_debug(l),
            "a -v line in Rust's debug form: {l:?}\n{f}"
        );
    }
    for want in expected {
        let found = lines.iter().any(|l| {
            let mut rest = *l;
            want.split('N').enumerate().all(|(i, part)| {
                if i > 0 {
                    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                    if digits == 0 {
                        return false;
                    }
                    rest = &rest[digits..];
                }
                match rest.strip_prefix(part) {
                    Some(r) => {
                        rest = r;
                        true
                    }
                    None => false,
                }
            })
        });
        assert!(found, "no -v line like {want:?}:\n{}", lines.join("\n"));
    }
}

#[test]
fn verbose_lines_are_words_not_debug_forms() {
    // The child's exit, a reaped orphan, a forwarded signal.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let script = format!(
        "trap 'exit 3' USR1; sh -c 'exit 0' & wait; echo $$ > {}; while :; do sleep 0.05; done",
        harness::path_str(&ready)
    );
    let (run, _) = Run::new(["-v", "--", "sh", "-c", &script]).start_until_ready(&ready);
    let f = run.finish_after(libc::SIGUSR1);
    assert_words(
        &f,
        &[
            "started 'sh' as pid N",
            "received SIGUSR1 from pid N",
            "forwarded SIGUSR1 to group N",
            "child N (sh) ended: exited with status 3",
            "stopping: the child exited",
        ],
    );
    // A timeout, a child killed by a signal, an orphan reaped.
    let f = Run::new([
        "-v",
        "--timeout",
        "300ms",
        "--",
        "sh",
        "-c",
        "sh -c 'sleep 0.05' & exec sleep 30",
    ])
    .finish();
    assert_words(
        &f,
        &[
            "timeout after 300ms",
            "stopping: the timeout passed",
            "sent SIGTERM to the child's process group N",
            "child N (sleep) ended: killed by SIGTERM",
            "reaped N (",
        ],
    );
    // An exec through the control socket, and a control stop.
    let sock = dir.path().join("ctl");
    let sock_s = harness::path_str(&sock);
    let inst = Run::new(["-v", "--control", &sock_s, "--", "sleep", "300"]).start();
    harness::wait_for_socket(&sock);
    let exec = Run::new(["exec", "--control", &sock_s, "--", "sh", "-c", "exit 4"]).finish();
    assert_eq!(exec.code(), Some(4), "{exec}");
    let stop = Run::new(["stop", "--control", &sock_s]).finish();
    assert_eq!(stop.code(), Some(0), "{stop}");
    let f = inst.finish();
    assert_words(
        &f,
        &[
            "exec 'sh -c exit 4' started as pid N",
            "exec N (sh) ended: exited with status 4",
            "stopping: a control client asked",
            "sent SIGTERM to the child's process group N",
            "child N (sleep) ended: killed by SIGTERM",
            "stop confirmed after ",
        ],
    );
    // A command that cannot start says so in words too.
    let f = Run::new(["-v", "--", "/nonexistent/cmd"]).finish();
    assert!(
        f.stderr
            .contains("vloer-run: cannot run '/nonexistent/cmd': "),
        "{f}"
    );
}

#[test]
fn verbose_tells_the_stop_as_it_happens_each_line_with_its_time() {
    // A control stop of a child that ignores SIGTERM: what started it, who got what, why
    // SIGKILL followed, what was reaped, that it was confirmed and how long it took.
    let dir = harness::tempdir();
    let sock = harness::path_str(&dir.path().join("ctl"));
    let ready = harness::tmp_path(&dir, "ready");
    let (run, pids) = Run::helper(
        &["-v", "--control", &sock, "--grace", "400ms"],
        &["ignore-term", &harness::path_str(&ready)],
    )
    .start_until_ready(&ready);
    let stop = Run::new(["stop", "--control", &sock]).finish();
    assert_eq!(stop.code(), Some(0), "{stop}");
    let f = run.finish();
    assert_words(
        &f,
        &[
            "stopping: a control client asked",
            "sent SIGTERM to the child's process group N",
            "the grace of 400ms ran out with 1 process left: SIGKILL",
            &format!("sent SIGKILL to {} (vloer-test-chil)", pids[0]),
            "child N (vloer-test-chil) ended: killed by SIGKILL",
            "stop confirmed after ",
        ],
    );
    // Every -v line carries its time since the start, in order; the SIGKILL comes a grace
    // after the stop began.
    let timed: Vec<(std::time::Duration, &str)> = f
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("vloer-run: "))
        .map(|l| {
            harness::verbose_time(l)
                .unwrap_or_else(|| panic!("a -v line without its time: {l:?}\n{f}"))
        })
        .collect();
    assert!(
        timed.windows(2).all(|w| w[0].0 <= w[1].0),
        "out of order:\n{f}"
    );
    let at = |start: &str| {
        timed
            .iter()
            .find(|(_, l)| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?}:\n{f}"))
            .0
    };
    let waited = at("sent SIGKILL to ") - at("stopping: ");
    assert!(
        waited >= std::time::Duration::from_millis(400),
        "SIGKILL after {waited:?}:\n{f}"
    );
}
