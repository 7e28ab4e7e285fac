//! The generated files are current, render cleanly, and the completions work in each shell.

use super::*;

fn write_temp(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The committed files are what the code generates now; `VLOER_BLESS=1` rewrites them.
#[test]
fn generated_files_are_current() {
    let bless = std::env::var_os("VLOER_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (rel, text) in generated() {
        let path = root().join(rel);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed == text {
            continue;
        }
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            eprintln!("blessed {rel}");
        } else {
            let line = committed
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .map_or_else(
                    || committed.lines().count().min(text.lines().count()) + 1,
                    |i| i + 1,
                );
            stale.push(format!("  {rel} (first difference at line {line})"));
        }
    }
    assert!(
        stale.is_empty(),
        "generated files are out of date with src/cli.rs, src/docs/ or examples/:\n{}\nregenerate them with:\n  {BLESS}\nand commit the result",
        stale.join("\n")
    );
}

/// `man --warnings` renders the page without a single warning, and nothing is wider than 80
/// columns.
#[test]
fn man_page_renders_without_warnings() {
    if !have("man") {
        eprintln!("skipped: `man` is not installed (apt-get install man-db; .ci/run does)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = write_temp(dir.path(), "vloer-run.1", &man_page());
    let out = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(&page)
        .env("MANWIDTH", "80")
        .env_remove("MAN_KEEP_FORMATTING")
        .env_remove("MANPAGER")
        .env("PAGER", "cat")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "man --warnings -l: {}\n{stderr}",
        out.status
    );
    for needle in [
        "VLOER_GRACE",
        "EXIT STATUS",
        "CONTROL PROTOCOL",
        "stopped\":true",
        "STOPSIGNAL",
        "preStop",
        "LIMITS",
    ] {
        assert!(
            stdout.contains(needle),
            "the rendered page lacks {needle:?}"
        );
    }
    let wide: Vec<&str> = stdout.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(
        wide.is_empty(),
        "lines wider than 80 columns:\n{}",
        wide.join("\n")
    );
}

/// Every VLOER_* variable of the clap definition is in the manual.
#[test]
fn man_page_lists_every_variable() {
    let page = man_page();
    let cmd = command();
    let vars: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    assert!(vars.len() >= 18, "{vars:?}");
    for v in vars {
        assert!(
            page.contains(&format!("\\fB{}\\fR", v.replace('-', "\\-"))),
            "{v} is not in the ENVIRONMENT section"
        );
    }
}

/// Runs the bash completion function for the words given (the last one is being completed).
fn bash_complete(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}' || exit 3\nf=$(complete -p vloer-run | sed -E 's/.* -F ([^ ]+) .*/\\1/')\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n\"$f\" vloer-run '{}' '{}' || exit 4\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bash completion for {words:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_completes_scopes_and_signals() {
    if !have("bash") {
        eprintln!("skipped: bash is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = write_temp(dir.path(), "vloer-run.bash", &completion(Shell::Bash));
    let load = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p vloer-run",
            script.display()
        ))
        .output()
        .unwrap();
    assert!(
        load.status.success(),
        "sourcing the completion failed: {}",
        String::from_utf8_lossy(&load.stderr)
    );

    let mut scopes = bash_complete(&script, &["vloer-run", "--scope", ""]);
    scopes.sort();
    assert_eq!(scopes, ["group", "tree"]);

    let sigs = bash_complete(&script, &["vloer-run", "--stop-signal", ""]);
    for s in ["TERM", "KILL", "INT", "HUP", "USR1", "RTMIN"] {
        assert!(
            sigs.iter().any(|x| x == s),
            "{s} missing from --stop-signal completions {sigs:?}"
        );
    }
    let mut t = bash_complete(&script, &["vloer-run", "--stop-signal", "TT"]);
    t.sort();
    assert_eq!(t, ["TTIN", "TTOU"]);
    assert!(bash_complete(&script, &["vloer-run", "--stop-on", "US"]).contains(&"USR2".to_string()));
    assert!(
        bash_complete(&script, &["vloer-run", "--child-pdeathsig", ""]).contains(&"0".to_string())
    );
    let opts = bash_complete(&script, &["vloer-run", "--gr"]);
    assert_eq!(opts, ["--grace"]);
    let subs = bash_complete(&script, &["vloer-run", "st"]);
    assert!(
        subs.contains(&"stop".to_string()) && subs.contains(&"status".to_string()),
        "{subs:?}"
    );
}

/// zsh and fish read their scripts without a syntax error, where they are installed.
#[test]
fn zsh_and_fish_completions_parse() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, name, args) in [
        (Shell::Zsh, "_vloer-run", &["-n"][..]),
        (Shell::Fish, "vloer-run.fish", &["--no-execute"][..]),
    ] {
        let program = if shell == Shell::Zsh { "zsh" } else { "fish" };
        if !have(program) {
            eprintln!("skipped {program}: not installed");
            continue;
        }
        let script = write_temp(dir.path(), name, &completion(shell));
        let out = Command::new(program)
            .args(args)
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{program} rejects {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if have("fish") {
        let script = write_temp(dir.path(), "vloer-run.fish", &completion(Shell::Fish));
        let ask = |line: &str| -> Vec<String> {
            let program = format!("source '{}'; complete -C '{line}'", script.display());
            let out = Command::new("fish")
                .args(["--no-config", "-c", &program])
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "fish: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.split('\t').next().unwrap_or("").to_string())
                .collect()
        };
        let mut scopes = ask("vloer-run --scope ");
        scopes.sort();
        assert_eq!(scopes, ["group", "tree"]);
        assert_eq!(ask("vloer-run --stop-signal TE"), ["TERM"]);
        assert!(ask("vloer-run --gra").contains(&"--grace".to_string()));
    }
    // Without the shells, at least the signal names reached the scripts.
    assert!(completion(Shell::Zsh).contains("TERM"));
    assert!(completion(Shell::Fish).contains("TERM"));
}

/// Each signal name offered to completions is one vloer-run accepts.
#[test]
fn completion_signal_names_parse() {
    for name in crate::cli::SIGNAL_NAMES {
        assert!(crate::signal::Sig::parse(name, false).is_ok(), "{name}");
    }
}

/// The mini-markup escapes what roff would misread.
#[test]
fn roff_escaping() {
    let r = to_roff("# t\n.starts with a dot, it's `--x`\n```\n.x 'a' \\ -b\n\n```\n");
    assert_eq!(r, ".SH \"T\"\n\\&.starts with a dot, it\\(aqs \\fB\\-\\-x\\fR\n.PP\n.EX\n\\&.x \\(aqa\\(aq \\e \\-b\n\\&\n.EE\n");
}

/// The manual's error codes are exactly the server's, and no reply writes a code by hand (which
/// is how `proc_unreadable` once went missing from the manual).
#[test]
fn the_manual_lists_every_control_error_code() {
    use crate::control::proto::ErrorCode;
    let sentence = CONTROL_PROTOCOL
        .split("Codes:")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .expect("the manual's control protocol lists its error codes after 'Codes:'");
    let listed: Vec<&str> = sentence.split('`').skip(1).step_by(2).collect();
    let sent: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(listed, sent, "the manual's codes are not the server's");

    let mut by_hand = Vec::new();
    let mut folders = vec![root().join("src")];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.ends_with("src/docs") {
                // The manual's own text shows the reply's shape.
            } else if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("control/proto.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains("\"code\":") || text.contains("\"code\" :") {
                    by_hand.push(path);
                }
            }
        }
    }
    assert!(
        by_hand.is_empty(),
        "a reply's code written by hand, not as an ErrorCode: {by_hand:?}"
    );
}

/// Where the word issue followed by a number (with a space, a dash or a hash between) occurs in
/// `text`: a reader of this repository cannot look such an issue up, so the text names the
/// behaviour instead.
fn numbered_issues(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices("issue") {
        let rest = lower[at + "issue".len()..].trim_start_matches('s');
        let rest = rest.strip_prefix([' ', '-']).unwrap_or(rest);
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            let line = lower[..at].matches('\n').count() + 1;
            found.push(format!(
                "line {line}: {}",
                &text[at..(at + 12).min(text.len())]
            ));
        }
    }
    found
}

#[test]
fn no_text_refers_to_a_numbered_issue() {
    let word = "issue";
    let three = format!("see {word} 14, {}s #2 and {word}-7", "Issue");
    assert_eq!(numbered_issues(&three).len(), 3);
    assert!(numbered_issues("an issue, 14 of them; issues remain").is_empty());
    let mut hits = Vec::new();
    let mut folders = vec![root()];
    while let Some(dir) = folders.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" || name == ".ci" {
                    folders.push(path);
                }
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            hits.extend(
                numbered_issues(&text)
                    .into_iter()
                    .map(|hit| format!("{}: {hit}", path.display())),
            );
        }
    }
    assert!(hits.is_empty(), "numbered issues:\n{}", hits.join("\n"));
}
