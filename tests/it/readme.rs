//! The README's commands work: each shell block marked `<!-- readme-test: run -->` is run for
//! real (its output compared with the `<!-- readme-test: output -->` block after it), every
//! file of the repository it names exists, and every vloer-run option it shows is one vloer-run
//! knows.

use crate::harness::{self, Run};
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("reading README.md")
}

/// A marked block: its kind (`run` or `output`) and its text.
fn marked_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(kind) = line
            .strip_prefix("<!-- readme-test: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or("");
        assert!(
            fence.starts_with("```"),
            "a marker not followed by a block: {line}"
        );
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| !l.starts_with("```"))
            .collect();
        blocks.push((kind.to_string(), body.join("\n") + "\n"));
    }
    blocks
}

/// Every shell block's lines, marked or not.
fn shell_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("```") {
            inside = !inside && (line == "```sh" || line == "```dockerfile");
            continue;
        }
        if inside {
            out.push(line.to_string());
        }
    }
    out
}

/// Runs one block in a fresh folder, as a reader would from the repository root after building:
/// `vloer-run` and `target/release/vloer-run` are the binary under test, and `cargo` (whose
/// build and test are what runs this) only says whether it was asked for one of those.
fn run_block(block: &str) -> harness::Finished {
    let dir = harness::tempdir();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(dir.path().join("target/release")).unwrap();
    let under_test = std::fs::canonicalize(harness::bin()).unwrap();
    std::os::unix::fs::symlink(&under_test, bin.join("vloer-run")).unwrap();
    std::os::unix::fs::symlink(&under_test, dir.path().join("target/release/vloer-run")).unwrap();
    let script = format!(
        "set -e\n\
         cargo() {{ case \"$1\" in build|test|install) ;; *) echo \"cargo $1: not a cargo command the README may show\" >&2; return 1;; esac; }}\n\
         {block}"
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script])
        .current_dir(dir.path())
        .env("PATH", path);
    let f = Run::of(cmd).finish();
    drop(dir);
    f
}

/// The README's sample output against a real one: plain lines must appear as shown; a verdict
/// must have the same keys in the same order and the same values, bar pids and times.
fn assert_output_matches(shown: &str, f: &harness::Finished) {
    let real = format!("{}{}", f.stdout, f.stderr);
    for line in shown.lines() {
        let Ok(want) = serde_json::from_str::<serde_json::Value>(line) else {
            assert!(
                real.lines().any(|l| l == line),
                "{line:?} is not in the output: {f}"
            );
            continue;
        };
        let got = harness::parse_verdict(&real).unwrap_or_else(|| panic!("no verdict: {f}"));
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        let mut want_keys = keys(&want);
        let mut got_keys = keys(&got);
        want_keys.sort();
        got_keys.sort();
        assert_eq!(
            want_keys, got_keys,
            "the README's verdict has other fields: {f}"
        );
        let at = |text: &str, key: &str| text.find(&format!("\"{key}\":"));
        let order = |text: &str| {
            let mut ks = want_keys.clone();
            ks.sort_by_key(|k| at(text, k));
            ks
        };
        assert_eq!(
            order(line),
            order(&real),
            "the README's verdict keys are in another order: {f}"
        );
        for key in [
            "stopped",
            "survivors",
            "reason",
            "exit_code",
            "scope",
            "sent",
            "reaped",
            "schema",
        ] {
            assert_eq!(want[key], got[key], "the README shows another {key}: {f}");
        }
        assert_eq!(want["child"]["exit_code"], got["child"]["exit_code"], "{f}");
    }
}

#[test]
fn the_readme_examples_run_as_shown() {
    let blocks = marked_blocks(&readme());
    assert!(
        blocks.iter().filter(|(kind, _)| kind == "run").count() >= 3,
        "the README's marked blocks are gone: {blocks:?}"
    );
    let mut last: Option<harness::Finished> = None;
    for (kind, body) in &blocks {
        match kind.as_str() {
            "run" => {
                let f = run_block(body);
                assert_eq!(f.code(), Some(0), "the README's block failed:\n{body}\n{f}");
                last = Some(f);
            }
            "output" => {
                let f = last.as_ref().expect("an output block after a run block");
                assert_output_matches(body, f);
            }
            other => panic!("unknown README marker {other:?}"),
        }
    }
}

/// The repository files a README line names, e.g. `scripts/static-check.sh` or `man/vloer-run.1`.
fn named_files(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "`()[]\"',;<>|".contains(c)) {
        let word = word.trim_end_matches(['.', ':']);
        let known = [
            "scripts/",
            "examples/",
            "man/",
            "completions/",
            "benches/",
            "tests/",
            ".ci/",
        ];
        let repo_file = known.iter().any(|k| word.starts_with(k))
            || ["CONTRIBUTING.md", "BENCHMARKS.md", "Cargo.toml"].contains(&word);
        if repo_file && !word.contains('*') {
            names.push(word.to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_file_the_readme_names_exists() {
    let names = named_files(&readme());
    assert!(
        names.iter().any(|n| n == "scripts/container-check.sh"),
        "{names:?}"
    );
    let missing: Vec<&String> = names.iter().filter(|n| !root().join(n).exists()).collect();
    assert!(
        missing.is_empty(),
        "the README names files that do not exist: {missing:?}"
    );
}

#[test]
fn every_option_the_readme_shows_is_known() {
    let help = |args: &[&str]| {
        let f = Run::new(args).finish();
        assert_eq!(f.code(), Some(0), "{f}");
        f.stdout
    };
    let run_help = help(&["--help"]);
    let mut checked = 0;
    for line in shell_lines(&readme()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words
            .iter()
            .position(|w| w.ends_with("vloer-run") && !w.starts_with('/') && !w.starts_with('"'))
        else {
            continue;
        };
        let rest = &words[at + 1..];
        let (known, options): (String, Vec<&str>) = match rest.first() {
            Some(&client) if ["stop", "status", "exec"].contains(&client) => {
                (help(&[client, "--help"]), rest[1..].to_vec())
            }
            _ => (run_help.clone(), rest.to_vec()),
        };
        for word in options
            .iter()
            .take_while(|w| **w != "--" && !w.starts_with('#'))
        {
            if let Some(option) = word.strip_prefix("--") {
                let option = option.split('=').next().unwrap_or(option);
                assert!(
                    known.contains(&format!("--{option}")),
                    "the README shows --{option}, which vloer-run does not know: {line}"
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 3,
        "no vloer-run option found in the README's commands"
    );
}

/// The Dockerfile section says what the container check does about podman's runtime failing on
/// a low hard RLIMIT_NOFILE: the very limits the script sets.
#[test]
fn the_readme_says_how_the_container_check_sets_podmans_limits() {
    let script = std::fs::read_to_string(root().join("scripts/container-check.sh")).unwrap();
    let limits = script
        .lines()
        .find(|l| l.starts_with("default_ulimits"))
        .expect("container-check.sh sets default_ulimits");
    let readme = readme();
    let section = readme
        .split("\n## In a Dockerfile\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("the README has a Dockerfile section");
    let flat: String = section.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("RLIMIT_NOFILE"),
        "no word of RLIMIT_NOFILE: {section}"
    );
    assert!(
        flat.contains(limits),
        "the section does not show the script's {limits:?}"
    );
}
