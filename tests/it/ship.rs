//! What ships next to the binary: the examples/ script run for real, the Kubernetes termination
//! log, and `--version`. (Man page and completions: src/docs/; the static build:
//! scripts/static-check.sh, run by .ci/run.)

use crate::harness::{self, bin, in_mount_ns, skip, Run};
use std::path::{Path, PathBuf};
use std::process::Command;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

#[test]
fn example_script_goes_on_after_a_proven_stop() {
    let dir = harness::tempdir();
    let pids = dir.path().join("pids");
    let mut cmd = Command::new(example("run-and-check.sh"));
    cmd.env("VLOER_RUN", bin()).env("TMPDIR", dir.path());
    // A child that leaves a plain and a setsid()'d sleeper behind, then exits 3.
    cmd.args([
        "sh",
        "-c",
        "sleep 300 & echo $! >> \"$1\"; setsid sleep 300 & echo $! >> \"$1\"; echo started; exit 3",
        "sh",
    ])
    .arg(&pids);
    let done = Run::of(cmd).finish();
    // Checked before anything else, and ended here (by pid) if vloer-run left them.
    let left: Vec<i32> = harness::read_pids(&pids)
        .into_iter()
        .filter(|&p| harness::alive(p))
        .collect();
    for &pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(harness::read_pids(&pids).len(), 2, "{done}");
    assert!(
        left.is_empty(),
        "sleepers {left:?} outlived a run whose verdict said stopped:true\n{done}"
    );
    assert_eq!(
        done.code(),
        Some(3),
        "the script passes the command's status on:\n{done}"
    );
    assert_eq!(done.stdout.trim(), "started", "{done}");
    assert!(
        done.stderr
            .contains("run-and-check: reason child_exited, nothing left; going on"),
        "{done}"
    );
    // The script removes its verdict file.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "pids")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn example_script_refuses_to_go_on_without_proof() {
    // vloer-run in a mount namespace whose /proc is an empty tmpfs cannot prove anything.
    let script = "mount -t tmpfs none /proc && exec \"$@\"";
    let Some(mut cmd) = in_mount_ns(
        script,
        &[example("run-and-check.sh").to_str().unwrap(), "true"],
    ) else {
        return;
    };
    cmd.env("VLOER_RUN", bin());
    let done = Run::of(cmd).finish();
    assert_eq!(done.code(), Some(125), "{done}");
    assert!(
        done.stderr
            .contains("run-and-check: NOT proven stopped (vloer-run exit 125)"),
        "{done}"
    );
    assert!(
        done.stderr.contains("run-and-check: error: /proc"),
        "the verdict's error is shown:\n{done}"
    );
    assert!(
        done.stderr.contains("run-and-check: refusing to go on"),
        "{done}"
    );
    assert!(!done.stderr.contains("nothing left"), "{done}");
}

/// A stand-in for vloer-run that writes a verdict with a survivor: the script's parsing of
/// `stopped`, `error` and `survivors`, with jq and with the python3 fallback.
#[test]
fn example_script_lists_survivors_with_jq_and_with_python() {
    let dir = harness::tempdir();
    let fake = dir.path().join("fake-vloer-run");
    let verdict = r#"{"stopped":false,"survivors":[{"pid":31,"ppid":1,"pgid":31,"sid":31,"state":"D","comm":"flush"}],"reason":"child_exited","child":{"pid":7,"exit_code":0,"signal":null},"exit_code":125,"scope":"tree","sent":{"SIGKILL":1},"reaped":0,"elapsed_ms":2001,"schema":1}"#;
    // Called as: fake --verdict FILE -- COMMAND...
    harness::write_file(
        &fake,
        &format!("#!/bin/sh\nprintf '%s\\n' '{verdict}' > \"$2\"\nexit 125\n"),
        0o755,
    );

    let check = |path: Option<&Path>, tool: &str| {
        let mut cmd = Command::new("sh");
        cmd.arg(example("run-and-check.sh"))
            .arg("true")
            .env("VLOER_RUN", &fake)
            .env("TMPDIR", dir.path());
        if let Some(p) = path {
            cmd.env("PATH", p);
        }
        let done = Run::of(cmd).finish();
        assert_eq!(done.code(), Some(125), "{tool}: {done}");
        assert!(
            done.stderr.contains(r#"run-and-check: survivors: [{"pid":31,"ppid":1,"pgid":31,"sid":31,"state":"D","comm":"flush"}]"#),
            "{tool}: {done}"
        );
        assert!(
            done.stderr.contains("run-and-check: refusing to go on"),
            "{tool}: {done}"
        );
    };

    let have = |p: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if have("jq") {
        check(None, "jq");
    } else {
        skip("jq is not installed (.ci/run installs it)");
    }
    // python3 alone: a PATH with only what the script needs, and no jq.
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output();
    match python {
        Ok(o) if o.status.success() => {
            let bin_dir = dir.path().join("bin");
            std::fs::create_dir(&bin_dir).unwrap();
            let exe = String::from_utf8_lossy(&o.stdout).trim().to_string();
            std::os::unix::fs::symlink(&exe, bin_dir.join("python3")).unwrap();
            for tool in ["sh", "mktemp", "rm", "cat", "printf"] {
                let found = Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .output()
                    .unwrap();
                let found = String::from_utf8_lossy(&found.stdout).trim().to_string();
                if found.starts_with('/') {
                    std::os::unix::fs::symlink(&found, bin_dir.join(tool)).unwrap();
                }
            }
            check(Some(&bin_dir), "python3");
        }
        _ => {
            skip("python3 is not installed");
        }
    }
}

/// Kubernetes bind-mounts a host file at /dev/termination-log: it cannot be renamed over, and the
/// verdict must still land in it (examples/pod.yaml).
#[test]
fn verdict_reaches_a_bind_mounted_termination_log() {
    let dir = harness::tempdir();
    let host = dir.path().join("host-file");
    let target = dir.path().join("termination-log");
    std::fs::write(&host, "old\n").unwrap();
    std::fs::write(&target, "").unwrap();
    let script = "mount --bind \"$1\" \"$2\" && exec \"$3\" --verdict \"$2\" -- true";
    let Some(cmd) = in_mount_ns(
        script,
        &[host.to_str().unwrap(), target.to_str().unwrap(), bin()],
    ) else {
        return;
    };
    let done = Run::of(cmd).finish();
    assert_eq!(done.code(), Some(0), "{done}");
    let text = std::fs::read_to_string(&host).unwrap();
    let v = harness::parse_verdict(&text)
        .unwrap_or_else(|| panic!("no verdict in the mounted file: {text:?}\n{done}"));
    assert_eq!(v["stopped"], true, "{text}");
    assert_eq!(
        text.lines().count(),
        1,
        "exactly the verdict, nothing of the old contents: {text:?}"
    );
}

#[test]
fn version_names_the_build() {
    let out = Command::new(bin()).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("vloer-run {}", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&want), "{text:?}");
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    match head {
        Ok(o) if o.status.success() => {
            let commit = String::from_utf8_lossy(&o.stdout).trim().to_string();
            assert_eq!(text.trim(), format!("{want} (git {commit})"));
        }
        _ => {
            skip("not a git checkout: --version has no commit to show");
        }
    }
}

/// podman resolves no short image names without a registry alias, and a build context without a
/// .dockerignore sends target/ (hundreds of MB) and .git along.
#[test]
fn the_example_dockerfile_names_its_images_fully_and_leaves_build_output_out() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(example("Dockerfile")).expect("examples/Dockerfile");
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM "))
        .collect();
    assert!(!froms.is_empty(), "no FROM line");
    for from in froms {
        let image = from.split_whitespace().nth(1).unwrap_or_default();
        let registry = image.split('/').next().unwrap_or_default();
        assert!(
            image.contains('/') && (registry.contains('.') || registry.contains(':')),
            "not a fully qualified image name: {from:?}"
        );
    }
    let ignore = std::fs::read_to_string(root.join(".dockerignore")).expect(".dockerignore");
    for needed in ["target", ".git"] {
        assert!(
            ignore
                .lines()
                .any(|l| l.trim().trim_start_matches('/').trim_end_matches('/') == needed),
            ".dockerignore does not leave out {needed}:\n{ignore}"
        );
    }
}
