//! What a stop costs vloer-run itself (issue 14): a process that has already exited is not read
//! from /proc. A dying tree of thousands is mostly zombies by the time a scan meets it, and each
//! read both costs the scan and leaves the kernel /proc entries to tear down when it is reaped.

use crate::harness::{self, Run};
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};

const ZOMBIES: usize = 500;

/// Fills a pipe to the brim, through its write end, leaving that end blocking.
fn fill(w: &OwnedFd) {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_truncate(fcntl(w.as_fd(), FcntlArg::F_GETFL).expect("F_GETFL"));
    fcntl(w.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).expect("F_SETFL");
    let block = [b'.'; 4096];
    while nix::unistd::write(w, &block).is_ok_and(|n| n > 0) {}
    fcntl(w.as_fd(), FcntlArg::F_SETFL(flags)).expect("F_SETFL");
}

/// The read(2)-family calls `pid` has made so far (`syscr` in /proc/PID/io).
fn reads_made(pid: i32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io");
    harness::status_field(&io, "syscr")
        .parse()
        .expect("a count")
}

#[test]
fn a_stop_reads_nothing_of_the_processes_that_already_exited() {
    // The main child ignores SIGTERM and never reaps its ZOMBIES children, so both scans of the
    // stop (after the group's signal, and at SIGKILL time) meet all of them.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let (r, w) = nix::unistd::pipe().expect("pipe");
    // The verdict goes to stdout, a full pipe: vloer-run blocks in its last write, once the stop
    // is over, and its count of reads is taken there.
    fill(&w);
    let mut run = Run::helper(
        &["-q", "--grace", "100ms", "--verdict", "-"],
        &[
            "zombie-parent",
            &ZOMBIES.to_string(),
            &harness::path_str(&ready),
        ],
    );
    run.cmd.stdout(std::process::Stdio::from(w));
    let (running, _) = run.start_until_ready(&ready);
    let pid = running.pid();
    running.signal(libc::SIGTERM);
    harness::wait_until("vloer-run to block writing its verdict to stdout", || {
        std::fs::read_to_string(format!("/proc/{pid}/syscall"))
            .is_ok_and(|s| s.starts_with("1 0x1 "))
    });
    let reads = reads_made(pid);
    let drained = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = std::fs::File::from(r).read_to_end(&mut out);
        out
    });
    let f = running.finish();
    let out = drained.join().expect("the reader");
    let text = String::from_utf8_lossy(&out);
    let v = harness::parse_verdict(text.trim_start_matches('.')).expect("a verdict on stdout");
    assert_eq!(v["stopped"], true, "{v}\n{f}");
    assert_eq!(v["reaped"], ZOMBIES, "{v}\n{f}");
    // Each scan that read the zombies made one read each: 2 x ZOMBIES.
    assert!(
        reads < ZOMBIES as u64 / 2,
        "vloer-run made {reads} reads in a run whose stop met {ZOMBIES} zombies twice\n{v}\n{f}"
    );
}
