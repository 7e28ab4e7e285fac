//! Where the verdict goes: `--verdict PATH` (a regular file replaced by rename, a symlink
//! followed), `-` (stdout), a FIFO, `/dev/fd/N` and `/dev/stdout` (the inherited descriptor
//! itself: a file, a socket), a character device, and `off`.

use crate::harness::{self, Run};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Exactly one verdict line, newline included.
fn one_line(text: &str, what: &str) -> serde_json::Value {
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "{what} is not one line: {text:?}"
    );
    harness::parse_verdict(text).unwrap_or_else(|| panic!("{what} holds no verdict: {text:?}"))
}

/// `vloer-run --verdict TO -- sh -c 'exit CODE'`, finished: the code tells this run's verdict
/// from any other.
fn exiting(to: &str, code: i32) -> harness::Finished {
    Run::new(["--verdict", to, "--", "sh", "-c", &format!("exit {code}")]).finish()
}

#[test]
fn a_regular_file_is_replaced_by_rename() {
    let dir = harness::tempdir();
    let path = harness::tmp_path(&dir, "verdict.json");
    std::fs::write(
        &path,
        "a reader holding this old file must never see it change\n",
    )
    .unwrap();
    let before = std::fs::metadata(&path).unwrap().ino();
    let mut held = std::fs::File::open(&path).unwrap();
    let f = exiting(&harness::path_str(&path), 5);
    assert_eq!(f.code(), Some(5), "{f}");
    assert!(
        harness::parse_verdict(&f.stderr).is_none() && f.stdout.is_empty(),
        "the verdict went elsewhere too: {f}"
    );
    let v = one_line(&std::fs::read_to_string(&path).unwrap(), "the verdict file");
    assert_eq!(v["exit_code"], 5);
    // A new inode, and the old one untouched: the file was renamed over, not rewritten in place.
    assert_ne!(
        std::fs::metadata(&path).unwrap().ino(),
        before,
        "the file was written in place"
    );
    let mut old = String::new();
    held.read_to_string(&mut old).unwrap();
    assert!(
        old.starts_with("a reader holding"),
        "the old file changed under its reader: {old:?}"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["verdict.json"], "a temporary file was left behind");
}

#[test]
fn dash_is_stdout() {
    let f = Run::new(["--verdict", "-", "--", "true"]).finish();
    let v = one_line(&f.stdout, "stdout");
    assert_eq!(v["exit_code"], 0);
    assert!(harness::parse_verdict(&f.stderr).is_none(), "{f}");
}

#[test]
fn a_fifo_gets_one_write() {
    let dir = harness::tempdir();
    let fifo = harness::tmp_path(&dir, "verdict.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    // Opened for reading first (non-blocking, so the open does not wait for a writer).
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let f = exiting(&harness::path_str(&fifo), 4);
    assert_eq!(f.code(), Some(4), "{f}");
    let mut got = String::new();
    reader.read_to_string(&mut got).unwrap();
    let v = one_line(&got, "the FIFO");
    assert_eq!(v["exit_code"], 4);
    assert!(
        std::fs::metadata(&fifo).unwrap().file_type().is_fifo(),
        "the FIFO was replaced by a file"
    );
}

#[test]
fn dev_fd_n_is_an_inherited_descriptor() {
    // fd 3 is our stdout pipe; vloer-run's own stdout (and the child's) goes to /dev/null.
    let f = Run::via(
        &["sh", "-c", "exec \"$0\" \"$@\" 3>&1 >/dev/null"],
        [
            "--verdict",
            "/dev/fd/3",
            "--",
            "sh",
            "-c",
            "echo from-the-child; exit 6",
        ],
    )
    .finish();
    assert_eq!(f.code(), Some(6), "{f}");
    let v = one_line(&f.stdout, "fd 3");
    assert_eq!(v["exit_code"], 6);
}

#[test]
fn a_character_device_is_written() {
    let f = Run::new(["--verdict", "/dev/null", "--", "true"]).finish();
    assert_eq!(f.code(), Some(0), "{f}");
    assert!(f.stderr.is_empty() && f.stdout.is_empty(), "{f}");
    // Written into, not renamed over: as root, a rename would replace the device with a file.
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device(),
        "/dev/null is no longer a device"
    );
}

#[test]
fn off_writes_nothing() {
    let f = exiting("off", 2);
    assert_eq!(f.code(), Some(2), "{f}");
    assert!(f.stdout.is_empty() && f.stderr.is_empty(), "{f}");
}

/// `vloer-run ARGS` with its stdout (and so the child's) sent to `log` by the shell, with `>`
/// or `>>`.
fn into_log(redirect: &str, log: &Path, args: &[&str]) -> harness::Finished {
    let script = format!("log=$1; shift; exec \"$@\" {redirect}\"$log\"");
    Run::via(&["sh", "-c", &script, "sh", &harness::path_str(log)], args).finish()
}

#[test]
fn a_descriptor_path_writes_after_the_childs_output_never_over_it() {
    let dir = harness::tempdir();
    let child = "for i in $(seq 30); do echo line-$i; done";
    for (to, redirect) in [
        ("/dev/fd/1", ">"),
        ("/proc/self/fd/1", ">"),
        ("/dev/stdout", ">"),
        ("/dev/fd/1", ">>"),
        ("/dev/stdout", ">>"),
    ] {
        let log = harness::tmp_path(&dir, "log");
        std::fs::write(&log, "an earlier run\n").unwrap();
        let f = into_log(redirect, &log, &["--verdict", to, "--", "sh", "-c", child]);
        assert_eq!(f.code(), Some(0), "--verdict {to} with {redirect}: {f}");
        let text = std::fs::read_to_string(&log).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        let verdict = lines.pop().unwrap_or_default();
        let mut want: Vec<String> = (1..=30).map(|i| format!("line-{i}")).collect();
        if redirect == ">>" {
            want.insert(0, "an earlier run".into());
        }
        assert_eq!(
            lines, want,
            "--verdict {to} with {redirect}: the log is\n{text}"
        );
        let v = harness::parse_verdict(verdict)
            .unwrap_or_else(|| panic!("--verdict {to} with {redirect}: no verdict last:\n{text}"));
        assert_eq!(v["stopped"], true, "{text}");
    }
}

#[test]
fn a_symlink_is_followed_never_replaced() {
    let dir = harness::tempdir();
    let real = harness::tmp_path(&dir, "real.json");
    std::fs::write(&real, "old\n").unwrap();
    let link = harness::tmp_path(&dir, "link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    // A link that points nowhere yet: its target is created.
    let dangling = harness::tmp_path(&dir, "dangling.json");
    std::os::unix::fs::symlink("new.json", &dangling).unwrap();
    for (path, target, code) in [(&link, "real.json", 3), (&dangling, "new.json", 4)] {
        let f = exiting(&harness::path_str(path), code);
        assert_eq!(f.code(), Some(code), "{f}");
        assert!(
            std::fs::symlink_metadata(path)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{} was replaced by a file",
            path.display()
        );
        let got = std::fs::read_to_string(harness::tmp_path(&dir, target)).unwrap();
        assert_eq!(one_line(&got, target)["exit_code"], code);
    }
}

#[test]
fn dev_stdout_stays_a_symlink_when_stdout_is_a_regular_file() {
    // In a private mount namespace with a /dev of its own: were the link replaced, the machine's
    // /dev/stdout would not be.
    let dir = harness::tempdir();
    let log = harness::tmp_path(&dir, "log");
    let script = r#"mount -t tmpfs tmpfs /dev && ln -s /proc/self/fd/1 /dev/stdout || exit 99
"$1" --verdict /dev/stdout -- echo from-the-child > "$2"; rc=$?
if [ -L /dev/stdout ]; then echo still-a-link; else echo replaced; fi
exit $rc"#;
    let Some(cmd) = harness::in_mount_ns(script, &[harness::bin(), &harness::path_str(&log)])
    else {
        return;
    };
    let f = Run::of(cmd).finish();
    assert_eq!(f.code(), Some(0), "{f}");
    assert_eq!(f.stdout.trim(), "still-a-link", "{f}");
    let text = std::fs::read_to_string(&log).unwrap();
    let (first, verdict) = text.split_once('\n').unwrap_or_default();
    assert_eq!(first, "from-the-child", "the log is {text:?}");
    assert_eq!(one_line(verdict, "the log")["stopped"], true);
}

#[test]
fn a_descriptor_path_to_a_socket_works_like_dash() {
    use std::os::unix::net::UnixStream;
    for to in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1", "-"] {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let mut run = Run::new(["--verdict", to, "--", "sh", "-c", "echo from-the-child"]);
        run.cmd
            .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(
                theirs,
            )));
        let f = run.finish();
        assert_eq!(f.code(), Some(0), "--verdict {to}: {f}");
        ours.set_read_timeout(Some(harness::LIMIT)).unwrap();
        let mut got = String::new();
        (&ours).read_to_string(&mut got).unwrap();
        let (first, verdict) = got.split_once('\n').unwrap_or_default();
        assert_eq!(first, "from-the-child", "--verdict {to}: {got:?}");
        assert_eq!(one_line(verdict, "the socket")["stopped"], true, "{to}");
    }
}

#[test]
fn a_descriptor_that_is_not_open_is_bad_input() {
    let f = Run::new(["--verdict", "/dev/fd/9", "--", "true"]).finish();
    assert_eq!(f.code(), Some(125), "{f}");
    assert!(
        f.stderr.contains("descriptor 9 is not open") && f.stderr.lines().count() == 1,
        "{f}"
    );
}
