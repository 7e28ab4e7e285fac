//! What a stop costs vloer-run itself: a process that has already exited is not read
//! from /proc, nor is a large group while it dies of the stop signal. A dying tree of thousands
//! is mostly zombies by the time a scan meets it, and each read both costs the scan and leaves
//! the kernel /proc entries to tear down when it is reaped.

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

/// The read(2)-family calls `pid` has made so far (`syscr` in /proc/PID/io), and the times it
/// slept (its voluntary context switches): each wake-up of vloer-run reads its signalfd once.
fn reads_made(pid: i32) -> (u64, u64) {
    let field = |file: &str, name: &str| -> u64 {
        let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).expect("/proc/PID/...");
        harness::status_field(&text, name).parse().expect("a count")
    };
    (
        field("io", "syscr"),
        field("status", "voluntary_ctxt_switches"),
    )
}

/// Starts `helper` under vloer-run with its verdict on a full stdout pipe, sends SIGTERM, and
/// returns the reads vloer-run made until it blocked writing that verdict and the times it
/// slept, with the verdict.
fn reads_of_a_stop(
    opts: &[&str],
    helper: &[&str],
    ready: &std::path::Path,
) -> ((u64, u64), String) {
    let (r, w) = nix::unistd::pipe().expect("pipe");
    // The verdict goes to stdout, a full pipe: vloer-run blocks in its last write, once the stop
    // is over, and its count of reads is taken there.
    fill(&w);
    let mut run = Run::helper(opts, helper);
    run.cmd.stdout(std::process::Stdio::from(w));
    let (running, _) = run.start_until_ready(ready);
    let pid = running.pid();
    running.signal(libc::SIGTERM);
    // write(2) on fd 1; the call's number is the machine's (1 on x86_64, 64 on aarch64).
    let writing_stdout = format!("{} 0x1 ", libc::SYS_write);
    harness::wait_until("vloer-run to block writing its verdict to stdout", || {
        std::fs::read_to_string(format!("/proc/{pid}/syscall"))
            .is_ok_and(|s| s.starts_with(&writing_stdout))
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
    (reads, format!("{v}\n{f}"))
}

#[test]
fn a_stop_reads_nothing_of_the_processes_that_already_exited() {
    // The main child ignores SIGTERM and never reaps its ZOMBIES children, so both scans of the
    // stop (after the group's signal, and at SIGKILL time) meet all of them.
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let ((reads, _), v) = reads_of_a_stop(
        &["-q", "--grace", "100ms", "--verdict", "-"],
        &[
            "zombie-parent",
            &ZOMBIES.to_string(),
            &harness::path_str(&ready),
        ],
        &ready,
    );
    assert!(v.contains(&format!("\"reaped\":{ZOMBIES},")), "{v}");
    // Each scan that read the zombies made one read each: 2 x ZOMBIES.
    assert!(
        reads < ZOMBIES as u64 / 2,
        "vloer-run made {reads} reads in a run whose stop met {ZOMBIES} zombies twice\n{v}"
    );
}

#[test]
fn a_large_dying_group_is_not_read_and_a_daemon_that_left_it_still_hears_the_signal() {
    let _storm = harness::storm();
    // MEMBERS wait for SIGTERM, then exit in 20 bursts 5 ms apart (about 100 ms in all); the
    // main child dies of it at once, and a setsid() daemon outside the group waits to be found.
    // A scan while the group dies would read each member still alive (its stat and its
    // children, 2 reads); waiting for the reaper reads none of them, and the scan after that
    // finds the daemon long before SIGKILL time.
    const MEMBERS: usize = 3000;
    let dir = harness::tempdir();
    let ready = dir.path().join("ready");
    let ((reads, sleeps), v) = reads_of_a_stop(
        &["-q", "--grace", "20s", "--verdict", "-"],
        &[
            "dying-group",
            &MEMBERS.to_string(),
            &harness::path_str(&ready),
            "--daemon",
        ],
        &ready,
    );
    let verdict = harness::parse_verdict(v.lines().next().unwrap_or("")).expect("the verdict");
    assert_eq!(
        verdict["reaped"],
        MEMBERS + 1,
        "the members and the daemon\n{v}"
    );
    assert_eq!(
        verdict["sent"]["SIGTERM"], 2,
        "the group call and the daemon\n{v}"
    );
    assert!(verdict["sent"].get("SIGKILL").is_none(), "{v}");
    assert!(
        verdict["elapsed_ms"].as_u64().is_some_and(|ms| ms < 5000),
        "the daemon was found only at the bound, a quarter of the grace\n{v}"
    );
    // Each wake-up reads the signalfd once, and under load many come without a sleep; beyond
    // those, only the last scan's few reads.
    let beyond = reads.saturating_sub(sleeps);
    assert!(
        beyond < MEMBERS as u64 / 2,
        "vloer-run made {reads} reads over {sleeps} sleeps while a group of {MEMBERS} died of \
         its SIGTERM\n{v}"
    );
}
