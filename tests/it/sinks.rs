//! Where the verdict goes: `--verdict PATH` (a regular file replaced by rename), `-` (stdout),
//! a FIFO, `/dev/fd/N`, a character device, and `off`.

use crate::harness::{self, Run};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};

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
