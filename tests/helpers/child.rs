//! Misbehaving children for the integration tests (an example target, which `cargo test` builds).
//!
//! ```text
//! vloer-test-child [--root] COMMAND ARGS...
//!   sleep READY                  publish its pid, then sleep until killed
//!   ignore-term READY            the same with SIGTERM ignored
//!   daemon PIDFILE [--undumpable]
//!                                double fork + setsid(); the daemon publishes its pid and sleeps;
//!                                the original exits 0 once the daemon is ready. --undumpable: the
//!                                daemon makes itself undumpable (its environ then unreadable to
//!                                other processes of its uid)
//!   pthread-exit READY           the main thread starts a thread that forks a child ignoring
//!                                SIGTERM, then calls pthread_exit (/proc shows Z, yet it runs);
//!                                publishes its pid and the child's
//!   no-pidfd CMD ARG...          execs CMD with pidfd_open and pidfd_send_signal refused (ENOSYS)
//!                                by a seccomp filter
//!   no-kcmp CMD ARG...           execs CMD with kcmp refused (EPERM, as a container's seccomp
//!                                profile refuses it) by a seccomp filter
//!   no-group-signal CMD ARG...   execs CMD with pidfd_send_signal's process-group flag refused
//!                                (EINVAL, as before Linux 6.9) by a seccomp filter
//!   fork-loop READY LOG [--hop] [--fast]
//!                                SIGTERM ignored; forks a new generation every millisecond (--fast:
//!                                as fast as fork allows), each logging its pid to LOG; with --hop
//!                                each parent exits after forking, so the live pid keeps changing
//!   subreaper-hop READY LOG      a subreaper outside the child's group (its own group, SIGTERM
//!                                ignored) whose descendants hop as fast as they can: each one joins
//!                                the child's group, forks the next and exits, so the live one is
//!                                orphaned to the subreaper; the child exits once the first has
//!                                joined its group. READY gets the child's pid, then the
//!                                subreaper's; LOG every hopper's
//!   thread-cwd unshare|leader READY
//!                                a thread moves into the folder $HELPER_DIR (named in no argument):
//!                                with `unshare` it has a working directory of its own while the
//!                                main thread stays where it was; with `leader` the main thread
//!                                exits (pthread_exit) once the thread is there; publishes its pid
//!   thread-files N READY         N threads besides the main one; the last one started unshares
//!                                its file table and opens a file in the folder $HELPER_DIR (named
//!                                in no argument); the others and the main thread hold nothing
//!                                there; publishes its pid once the file is open
//!   uring-file READY             opens a file in the folder $HELPER_DIR (named in no argument),
//!                                registers it with an io_uring ring as a fixed file, closes its
//!                                own descriptor (only the ring's is left), publishes its pid and
//!                                sleeps
//!   chroot JAIL READY [NAME]...  chroot(JAIL), chdir("/"), then publishes its pid to READY (a
//!                                path in the jail's terms) and sleeps; the NAMEs are arguments
//!                                only, read by no one but a sweep
//!   map FILE [DROP] READY        maps a page of FILE (shared), closes its descriptor, goes to
//!                                `/`; with DROP, then makes a mount namespace of its own (as
//!                                root) and detaches DROP there; publishes its pid and sleeps:
//!                                only the map holds FILE
//!   uring-check                  exits 0 where io_uring works; 3, saying why, where the kernel
//!                                has none or refuses it (ENOSYS, EPERM: a sysctl, a seccomp
//!                                profile); anything else fails (2)
//!   thread-hop files|fs READY    SIGTERM ignored; a thread unshares its file table (files; or its working directory,
//!                                fs) and opens a file in (moves into) the folder $HELPER_DIR;
//!                                then each thread starts the next, which shares those, and exits,
//!                                so they live only in a thread newer than any listing of the
//!                                process's threads; the main thread holds nothing there;
//!                                publishes its pid once the first has the file open
//!   pid-cycle N READY            as root in a pid namespace of its own: a subreaper whose
//!                                descendants (SIGTERM ignored), working in the folder $HELPER_DIR, each fork the
//!                                next and exit, with /proc/sys/kernel/ns_last_pid set before each
//!                                fork so that they take N pid numbers in turn, over and over;
//!                                publishes its own pid once the first is in the folder, and exits
//!                                once none is left
//!   join-group PGID READY        SIGTERM ignored; moves into process group PGID (of its session),
//!                                publishes its pid and sleeps
//!   many N READY [--then-exit]   forks N sleepers, publishes all pids (its own first), then reaps
//!                                them as they die, or exits 0
//!   orphans N READY              makes N processes that exit only after their parent did (orphaned
//!                                zombies for the reaper), publishes their pids, then sleeps
//!   zombie-parent N READY        SIGTERM ignored; forks N children that exit at once, publishes
//!                                its pid once all N are zombies, then sleeps without reaping them
//!   dying-group N READY [--daemon]
//!                                forks N children in its group that wait for SIGTERM and then
//!                                exit in 20 bursts, one every 5 ms; publishes all pids
//!                                (its own first); SIGTERM ends it at once. --daemon: first starts
//!                                a setsid() daemon (as `daemon`), published last
//!   record OUT [GRANDOUT]        blocks every signal (1 to 64) and appends each one it receives (its number)
//!                                to OUT after a first line `ready PID`; exits 0 after SIGTERM; with
//!                                GRANDOUT a forked grandchild in the same group does the same
//!   record-until SIG OUT         `record OUT`, but exits 0 after SIG instead of SIGTERM
//!   exec [--block SIG]... [--ignore SIG]... -- CMD ARG...
//!                                execs CMD with those signals blocked and ignored
//!   trace PID READY              a tracer from outside the run: PTRACE_SEIZE on PID, publishes its
//!                                own pid, then sleeps without ever waiting for its tracee, whose
//!                                stops and exit stay with it (a zombie its reaper cannot collect)
//!   check                        exits 0 (with --root: proves setresuid(0,0,0) worked)
//!   storm READY                  a fork storm: SIGTERM ignored, every process forks as fast as it
//!                                can and reaps its dead children, for ever; at EAGAIN it tries
//!                                again. The caller bounds it (RLIMIT_NPROC under a uid of its
//!                                own, a pids cgroup)
//!   zombies N PAUSE_AT DIR       makes N orphaned zombies for the subreaper, 100 per short-lived
//!                                parent, at most two batches in flight; once PAUSE_AT are reaped
//!                                it publishes DIR/paused and waits for DIR/resume to exist; once
//!                                all N are reaped it publishes DIR/done and sleeps
//! ```
//!
//! `--root` first calls setresuid(0, 0, 0): on a setuid-root copy run by an unprivileged user this
//! makes a process that user's vloer-run cannot signal (EPERM).
//!
//! "Publish" writes the pids one per line to a temporary file and renames it over the path, so a
//! test that sees the file sees all of it. Every process this makes ends itself after LIFETIME at
//! the latest (SIGALRM), so a test that fails half-way leaves nothing running for long.

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::exit;
use std::time::{Duration, Instant};

/// Longer than any test's own limit (60 s), short enough that leaks do not pile up.
const LIFETIME_SECS: u32 = 120;

/// How long `fork-loop` keeps forking; well past any stop a test lets it run into.
const FORK_FOR: Duration = Duration::from_secs(20);
const FORK_MAX: usize = 100_000;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    arm_lifetime();
    if args.first().map(String::as_str) == Some("--root") {
        args.remove(0);
        become_root();
    }
    let Some(cmd) = args.first().cloned() else {
        die("no COMMAND; see the comment at the top of tests/helpers/child.rs")
    };
    let rest = &args[1..];
    match (cmd.as_str(), rest) {
        ("sleep", [ready]) => {
            publish(ready, &[getpid()]);
            sleep_forever()
        }
        ("ignore-term", [ready]) => {
            ignore(libc::SIGTERM);
            publish(ready, &[getpid()]);
            sleep_forever()
        }
        ("daemon", [pidfile]) => daemon(pidfile, false),
        ("daemon", [pidfile, flag]) if flag == "--undumpable" => daemon(pidfile, true),
        ("pthread-exit", [ready]) => pthread_exit_leader(ready),
        ("no-pidfd", [_, ..]) => no_pidfd(rest),
        ("no-group-signal", [_, ..]) => no_group_signal(rest),
        ("no-kcmp", [_, ..]) => no_kcmp(rest),
        ("fork-loop", [ready, log, flags @ ..]) => {
            let (mut hop, mut fast) = (false, false);
            for f in flags {
                match f.as_str() {
                    "--hop" => hop = true,
                    "--fast" => fast = true,
                    _ => die(&format!("fork-loop: unknown flag '{f}'")),
                }
            }
            fork_loop(ready, log, hop, fast)
        }
        ("subreaper-hop", [ready, log]) => subreaper_hop(ready, log),
        ("thread-cwd", [how, ready]) if how == "ns" || how == "ns-leader" => {
            thread_ns(how == "ns-leader", ready)
        }
        ("thread-cwd", [how, ready]) => thread_cwd(how == "unshare", ready),
        ("thread-files", [n, ready]) => thread_files(parse_count(n), ready),
        ("uring-file", [ready]) => uring_file(ready),
        ("chroot", [jail, ready, ..]) => {
            if let Err(e) =
                std::os::unix::fs::chroot(jail).and_then(|()| std::env::set_current_dir("/"))
            {
                die(&format!("chroot {jail}: {e}"));
            }
            publish(ready, &[getpid()]);
            sleep_forever()
        }
        ("map", [file, ready]) => map_only(file, ready, None),
        ("map", [file, dropped, ready]) => map_only(file, ready, Some(dropped)),
        ("uring-check", []) => match uring_setup() {
            Ok(_) => exit(0),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                println!("io_uring_setup: {e}");
                exit(3)
            }
            Err(e) => die(&format!("io_uring_setup: {e}")),
        },
        ("thread-hop", [how, ready]) if how == "files" || how == "fs" => {
            thread_hop(how == "fs", ready)
        }
        ("pid-cycle", [n, ready]) => pid_cycle(parse_count(n).max(1), ready),
        ("join-group", [pgid, ready]) => {
            ignore(libc::SIGTERM);
            let pgid: i32 = pgid
                .parse()
                .unwrap_or_else(|_| die(&format!("'{pgid}' is not a group")));
            // SAFETY: plain integer arguments; the result is checked.
            if unsafe { libc::setpgid(0, pgid) } != 0 {
                die(&format!(
                    "setpgid(0, {pgid}): {}",
                    std::io::Error::last_os_error()
                ));
            }
            publish(ready, &[getpid()]);
            sleep_forever()
        }
        ("many", [n, ready]) => many(parse_count(n), ready, false),
        ("many", [n, ready, then]) if then == "--then-exit" => many(parse_count(n), ready, true),
        ("orphans", [n, ready]) => orphans(parse_count(n), ready),
        ("zombie-parent", [n, ready]) => zombie_parent(parse_count(n), ready),
        ("dying-group", [n, ready]) => dying_group(parse_count(n), ready, false),
        ("dying-group", [n, ready, d]) if d == "--daemon" => {
            dying_group(parse_count(n), ready, true)
        }
        ("record", [out]) => record(out, None, libc::SIGTERM),
        ("record", [out, grand]) => record(out, Some(grand), libc::SIGTERM),
        ("record-until", [sig, out]) => record(out, None, parse_sig(sig)),
        ("exec", _) => exec_with(rest),
        ("check", []) => exit(0),
        ("trace", [pid, ready]) => trace(parse_count(pid) as i32, ready),
        ("storm", [ready]) => storm(ready),
        ("zombies", [n, pause_at, dir]) => zombies(parse_count(n), parse_count(pause_at), dir),
        _ => die(&format!(
            "bad arguments {args:?}; see the comment at the top of tests/helpers/child.rs"
        )),
    }
}

fn die(msg: &str) -> ! {
    eprintln!("vloer-test-child: {msg}");
    exit(2)
}

fn parse_count(n: &str) -> usize {
    n.parse()
        .unwrap_or_else(|_| die(&format!("'{n}' is not a count")))
}

fn getpid() -> i32 {
    std::process::id() as i32
}

fn arm_lifetime() {
    // SAFETY: alarm only sets a timer; SIGALRM is at its default (terminate) in these processes.
    unsafe {
        libc::alarm(LIFETIME_SECS);
    }
}

fn become_root() {
    // SAFETY: plain integer arguments; the result is checked.
    if unsafe { libc::setresuid(0, 0, 0) } != 0 {
        die(&format!(
            "setresuid(0, 0, 0): {}",
            std::io::Error::last_os_error()
        ));
    }
}

fn ignore(sig: i32) {
    // SAFETY: SIG_IGN installs no handler, so no code of ours runs asynchronously.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}

/// fork(2); in the child, re-arms the lifetime alarm (alarms are not inherited).
fn fork() -> i32 {
    // SAFETY: this program is single-threaded, so the child may run any code after fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        die(&format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        arm_lifetime();
    }
    pid
}

fn sleep_forever() -> ! {
    loop {
        // SAFETY: pause only waits for a signal.
        unsafe {
            libc::pause();
        }
    }
}

/// Leaves the process at once, without running Rust's exit machinery in a forked child.
fn quick_exit(code: i32) -> ! {
    // SAFETY: _exit ends the process; nothing is shared with the parent that needs flushing.
    unsafe { libc::_exit(code) }
}

fn publish(path: &str, pids: &[i32]) {
    let tmp = format!("{path}.tmp.{}", getpid());
    let text: String = pids.iter().map(|p| format!("{p}\n")).collect();
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
        die(&format!("publishing {path}: {e}"));
    }
}

/// Appends one line in one write(2) to a file opened with O_APPEND, so concurrent writers never
/// interleave within a line.
fn append(path: &str, line: &str) {
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = result {
        die(&format!("appending to {path}: {e}"));
    }
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors; the result is checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        die(&format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors are fresh and owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn daemon(pidfile: &str, undumpable: bool) -> ! {
    let pid = setsid_daemon(undumpable);
    publish(pidfile, &[pid]);
    exit(0)
}

/// Double fork + setsid(): a daemon that sleeps until killed, in a session of its own. Returns
/// its pid once it is up; the first child is reaped.
fn setsid_daemon(undumpable: bool) -> i32 {
    let (r, w) = pipe();
    let first = fork();
    if first == 0 {
        drop(r);
        // SAFETY: setsid takes no arguments; this child is not a group leader, so it succeeds.
        if unsafe { libc::setsid() } < 0 {
            die(&format!("setsid: {}", std::io::Error::last_os_error()));
        }
        if fork() != 0 {
            quick_exit(0);
        }
        if undumpable {
            // SAFETY: prctl with plain integer arguments.
            unsafe {
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            }
        }
        let _ = std::fs::File::from(w).write_all(format!("{}\n", getpid()).as_bytes());
        sleep_forever();
    }
    drop(w);
    let mut text = String::new();
    let _ = std::fs::File::from(r).read_to_string(&mut text);
    reap(first);
    text.trim()
        .parse()
        .unwrap_or_else(|_| die("the daemon did not report its pid"))
}

fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: `status` is a valid out-pointer.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
    }
}

fn fork_loop(ready: &str, log: &str, hop: bool, fast: bool) -> ! {
    ignore(libc::SIGTERM);
    append(log, &format!("{}\n", getpid()));
    publish(ready, &[getpid()]);
    let until = Instant::now() + FORK_FOR;
    let mut generations = 0;
    while Instant::now() < until && generations < FORK_MAX {
        if !fast {
            std::thread::sleep(Duration::from_millis(1));
        }
        generations += 1;
        if fork() == 0 {
            append(log, &format!("{}\n", getpid()));
            continue;
        }
        if hop {
            quick_exit(0);
        }
        sleep_forever();
    }
    sleep_forever()
}

fn subreaper_hop(ready: &str, log: &str) -> ! {
    let group = getpid();
    let (r, w) = pipe();
    if fork() == 0 {
        ignore(libc::SIGTERM);
        // SAFETY: plain integer arguments.
        unsafe {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        let subreaper = getpid();
        if fork() == 0 {
            // SAFETY: plain integer arguments; the group exists while the child waits below.
            if unsafe { libc::setpgid(0, group) } != 0 {
                die(&format!("setpgid: {}", std::io::Error::last_os_error()));
            }
            append(log, &format!("{}\n", getpid()));
            drop(r);
            drop(w);
            let until = Instant::now() + FORK_FOR;
            let mut generations = 0;
            while Instant::now() < until && generations < FORK_MAX {
                generations += 1;
                if fork() != 0 {
                    quick_exit(0);
                }
                append(log, &format!("{}\n", getpid()));
            }
            sleep_forever();
        }
        drop(r);
        let _ = std::fs::File::from(w).write_all(format!("{subreaper}\n").as_bytes());
        reap_forever()
    }
    drop(w);
    let mut text = String::new();
    let _ = std::fs::File::from(r).read_to_string(&mut text);
    let subreaper: i32 = text
        .trim()
        .parse()
        .unwrap_or_else(|_| die("the subreaper did not report its pid"));
    publish(ready, &[group, subreaper]);
    exit(0)
}

fn thread_cwd(unshare: bool, ready: &str) -> ! {
    let dir = std::env::var_os("HELPER_DIR").unwrap_or_else(|| die("no HELPER_DIR"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: plain integer argument; only this thread's filesystem context is unshared.
        if unshare && unsafe { libc::unshare(libc::CLONE_FS) } != 0 {
            die(&format!("unshare: {}", std::io::Error::last_os_error()));
        }
        if let Err(e) = std::env::set_current_dir(&dir) {
            die(&format!("chdir: {e}"));
        }
        let _ = tx.send(());
        sleep_forever()
    });
    let _ = rx.recv();
    publish(ready, &[getpid()]);
    if unshare {
        sleep_forever()
    }
    // The raw exit(2) ends this thread only (glibc's pthread_exit would unwind through Rust's
    // frames and abort; see `pthread_exit_leader`).
    // SAFETY: the other thread touches nothing on this thread's stack.
    unsafe {
        libc::syscall(libc::SYS_exit, 0);
    }
    unreachable!("exit(2) returned")
}

/// A thread that makes a mount namespace of its own, binds HELPER_DIR at HELPER_VIEW in it and
/// works there; the main thread stays in `/`, or exits (`exit_leader`).
fn thread_ns(exit_leader: bool, ready: &str) -> ! {
    let dir = std::env::var("HELPER_DIR").unwrap_or_else(|_| die("no HELPER_DIR"));
    let view = std::env::var("HELPER_VIEW").unwrap_or_else(|_| die("no HELPER_VIEW"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let c = |s: &str| std::ffi::CString::new(s).unwrap_or_else(|_| die("a NUL in a path"));
        let (dir_c, view_c, root) = (c(&dir), c(&view), c("/"));
        // SAFETY: plain integer argument; only this thread's filesystem context and mount
        // namespace are unshared.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            die(&format!("unshare: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: NUL-terminated paths that outlive the calls; null type and data are allowed
        // for a propagation change and a bind mount.
        let (private, bind) = unsafe {
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            let private = libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            );
            let bind = libc::mount(
                dir_c.as_ptr(),
                view_c.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            );
            (private, bind)
        };
        if private != 0 || bind != 0 {
            die(&format!("mount: {}", std::io::Error::last_os_error()));
        }
        if let Err(e) = std::env::set_current_dir(&view) {
            die(&format!("chdir: {e}"));
        }
        let _ = tx.send(());
        sleep_forever()
    });
    let _ = rx.recv();
    publish(ready, &[getpid()]);
    if !exit_leader {
        sleep_forever()
    }
    // SAFETY: as in `thread_cwd`: the other thread touches nothing on this thread's stack.
    unsafe {
        libc::syscall(libc::SYS_exit, 0);
    }
    unreachable!("exit(2) returned")
}

fn thread_files(n: usize, ready: &str) -> ! {
    let dir = std::env::var_os("HELPER_DIR").unwrap_or_else(|| die("no HELPER_DIR"));
    let idle = || {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| sleep_forever())
            .unwrap_or_else(|e| die(&format!("a thread: {e}")))
    };
    for _ in 1..n {
        idle();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: plain integer argument; only this thread's file table is unshared.
        if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
            die(&format!("unshare: {}", std::io::Error::last_os_error()));
        }
        let file = std::fs::File::create(std::path::Path::new(&dir).join("held"))
            .unwrap_or_else(|e| die(&format!("open: {e}")));
        // Kept open for good, in this thread's table only.
        std::mem::forget(file);
        let _ = tx.send(());
        sleep_forever()
    });
    let _ = rx.recv();
    publish(ready, &[getpid()]);
    sleep_forever()
}

fn thread_hop(fs: bool, ready: &str) -> ! {
    ignore(libc::SIGTERM);
    let dir = std::env::var_os("HELPER_DIR").unwrap_or_else(|| die("no HELPER_DIR"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let what = if fs {
            libc::CLONE_FS
        } else {
            libc::CLONE_FILES
        };
        // SAFETY: plain integer argument; only this thread's tables are unshared.
        if unsafe { libc::unshare(what) } != 0 {
            die(&format!("unshare: {}", std::io::Error::last_os_error()));
        }
        if fs {
            if let Err(e) = std::env::set_current_dir(&dir) {
                die(&format!("chdir: {e}"));
            }
        } else {
            let file = std::fs::File::create(std::path::Path::new(&dir).join("held"))
                .unwrap_or_else(|e| die(&format!("open: {e}")));
            // Kept open for good, in the table only this thread and its successors share.
            std::mem::forget(file);
        }
        let _ = tx.send(());
        hop_thread()
    });
    let _ = rx.recv();
    publish(ready, &[getpid()]);
    sleep_forever()
}

/// Starts the next thread and returns (ending this one). pthread_create shares the calling
/// thread's file table and working directory (CLONE_FILES, CLONE_FS), so the unshared ones live
/// on in the chain, and only there.
fn hop_thread() {
    loop {
        match std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(hop_thread)
        {
            Ok(_) => return,
            // Out of threads for a moment: this one keeps the tables meanwhile.
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

fn pid_cycle(n: usize, ready: &str) -> ! {
    let dir = std::env::var_os("HELPER_DIR").unwrap_or_else(|| die("no HELPER_DIR"));
    let last = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/kernel/ns_last_pid")
        .unwrap_or_else(|e| die(&format!("ns_last_pid: {e}")));
    // Numbers above those the namespace's few processes hold.
    let base = getpid() + 200;
    // SAFETY: plain integer arguments: orphaned generations come to this process, which reaps
    // them, so their numbers are free again at once.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let (r, w) = pipe();
    if fork() == 0 {
        drop(r);
        ignore(libc::SIGTERM);
        if let Err(e) = std::env::set_current_dir(&dir) {
            die(&format!("chdir: {e}"));
        }
        let _ = std::fs::File::from(w).write_all(b"in\n");
        let until = Instant::now() + FORK_FOR;
        let mut k = 0;
        while Instant::now() < until {
            k = (k + 1) % n;
            // The next fork takes the number after this one, when it is free.
            use std::os::unix::fs::FileExt;
            let _ = last.write_at(format!("{}", base + k as i32 - 1).as_bytes(), 0);
            if fork() != 0 {
                quick_exit(0);
            }
        }
        sleep_forever()
    }
    drop(w);
    let mut text = String::new();
    let _ = std::fs::File::from(r).read_to_string(&mut text);
    publish(ready, &[getpid()]);
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        if unsafe { libc::waitpid(-1, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
        {
            exit(0)
        }
    }
}

/// A new io_uring ring with 4 entries, not mapped: registering files needs no more.
/// Maps `file` (shared, a page), closes its descriptor and leaves for `/`: the map is all that
/// holds it. Then, given `drop`, its own mount namespace stops listing that mount.
fn map_only(file: &str, ready: &str, dropped: Option<&String>) -> ! {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(file)
        .unwrap_or_else(|e| die(&format!("open {file}: {e}")));
    // SAFETY: a fresh shared map of an open file's first page, never unmapped or touched.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if at == libc::MAP_FAILED {
        die(&format!("mmap {file}: {}", std::io::Error::last_os_error()));
    }
    drop(f);
    std::env::set_current_dir("/").unwrap_or_else(|e| die(&format!("cd /: {e}")));
    if let Some(point) = dropped {
        let c = CString::new(point.as_str()).unwrap();
        let root = CString::new("/").unwrap();
        // SAFETY: plain syscalls on valid NUL-terminated strings; no memory is shared.
        let failed = unsafe {
            libc::unshare(libc::CLONE_NEWNS) != 0
                || libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                || libc::umount2(c.as_ptr(), libc::MNT_DETACH) != 0
        };
        if failed {
            die(&format!(
                "unshare, umount {point}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    publish(ready, &[getpid()]);
    sleep_forever()
}

fn uring_setup() -> std::io::Result<OwnedFd> {
    // struct io_uring_params: 120 bytes, all zero asks for the defaults; the kernel fills in
    // the ring's offsets, which are not needed here.
    let mut params = [0u32; 30];
    // SAFETY: params is writable and as large as the kernel's struct io_uring_params.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn uring_file(ready: &str) -> ! {
    const IORING_REGISTER_FILES: u32 = 2;
    let dir = std::env::var_os("HELPER_DIR").unwrap_or_else(|| die("no HELPER_DIR"));
    let file = std::fs::File::create(std::path::Path::new(&dir).join("registered"))
        .unwrap_or_else(|e| die(&format!("open: {e}")));
    let ring = uring_setup().unwrap_or_else(|e| die(&format!("io_uring_setup: {e}")));
    let fds = [file.as_raw_fd()];
    // SAFETY: fds is an array of one descriptor, as the count says; the kernel takes its own
    // reference to the file.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd(),
            IORING_REGISTER_FILES,
            fds.as_ptr(),
            1u32,
        )
    };
    if r != 0 {
        die(&format!(
            "io_uring_register: {}",
            std::io::Error::last_os_error()
        ));
    }
    // The ring holds the file from now on; the process has no descriptor of it.
    drop(file);
    std::mem::forget(ring);
    publish(ready, &[getpid()]);
    sleep_forever()
}

fn many(n: usize, ready: &str, then_exit: bool) -> ! {
    let mut pids = vec![getpid()];
    for _ in 0..n {
        let pid = fork();
        if pid == 0 {
            sleep_forever();
        }
        pids.push(pid);
    }
    publish(ready, &pids);
    if then_exit {
        exit(0);
    }
    reap_forever()
}

/// Reaps its own children as they die, then sleeps: a test that ends the children before their
/// parent leaves no zombies behind, even under an init that does not reap.
fn reap_forever() -> ! {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid out-pointer.
        if unsafe { libc::waitpid(-1, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
        {
            sleep_forever();
        }
    }
}

fn orphans(n: usize, ready: &str) -> ! {
    let (report_r, report_w) = pipe();
    let middle = fork();
    if middle == 0 {
        drop(report_r);
        // The gate's write end lives only in this process: its exit is what lets them go.
        let (gate_r, gate_w) = pipe();
        let mut pids = String::new();
        for _ in 0..n {
            let pid = fork();
            if pid == 0 {
                drop(gate_w);
                let mut byte = [0u8; 1];
                // Blocks until every write end is closed, that is, until the parent has exited.
                // SAFETY: a one-byte read into a valid buffer.
                unsafe {
                    libc::read(gate_r.as_raw_fd(), byte.as_mut_ptr().cast(), 1);
                }
                quick_exit(0);
            }
            pids.push_str(&format!("{pid}\n"));
        }
        let _ = std::fs::File::from(report_w).write_all(pids.as_bytes());
        quick_exit(0);
    }
    drop(report_w);
    let mut text = String::new();
    let _ = std::fs::File::from(report_r).read_to_string(&mut text);
    reap(middle);
    let mut pids = vec![getpid()];
    pids.extend(
        text.split_whitespace()
            .filter_map(|t| t.parse::<i32>().ok()),
    );
    publish(ready, &pids);
    sleep_forever()
}

fn zombie_parent(n: usize, ready: &str) -> ! {
    ignore(libc::SIGTERM);
    for _ in 0..n {
        let pid = fork();
        if pid == 0 {
            quick_exit(0);
        }
        let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
        // SAFETY: waitid writes one siginfo into valid memory; WNOWAIT leaves the zombie unreaped.
        if unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                info.as_mut_ptr(),
                libc::WEXITED | libc::WNOWAIT,
            )
        } < 0
        {
            die(&format!("waitid: {}", std::io::Error::last_os_error()));
        }
    }
    publish(ready, &[getpid()]);
    sleep_forever()
}

fn dying_group(n: usize, ready: &str, daemon: bool) -> ! {
    let daemon = daemon.then(|| setsid_daemon(false));
    let term = {
        let mut set = nix::sys::signal::SigSet::empty();
        set.add(nix::sys::signal::Signal::SIGTERM);
        set
    };
    // Blocked before the forks, so that no child can die of SIGTERM before it waits for it.
    term.thread_block()
        .unwrap_or_else(|e| die(&format!("sigprocmask: {e}")));
    let mut pids = vec![getpid()];
    for i in 0..n {
        let pid = fork();
        if pid == 0 {
            if term.wait().is_err() {
                die("sigwait");
            }
            std::thread::sleep(Duration::from_millis(5 * (i / (n / 20).max(1)) as u64));
            quick_exit(0);
        }
        pids.push(pid);
    }
    term.thread_unblock()
        .unwrap_or_else(|e| die(&format!("sigprocmask: {e}")));
    pids.extend(daemon);
    publish(ready, &pids);
    sleep_forever()
}

/// Appends `ready PID`, then each signal number received, to `out` (or, with `grand`, does so
/// in a forked child that writes to `grand`); exits 0 after `exit_on`.
fn record(out: &str, grand: Option<&String>, exit_on: i32) -> ! {
    // The kernel's own set, 1 to 64: glibc's sigset calls leave out 32 and 33. SIGALRM stays
    // deliverable so the lifetime limit still ends this process.
    let bit = |sig: i32| 1u64 << (sig - 1);
    let set: u64 = !(bit(libc::SIGKILL) | bit(libc::SIGSTOP) | bit(libc::SIGALRM));
    // SAFETY: rt_sigprocmask reads one 8-byte set; single-threaded, so the process mask is the
    // thread's.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_BLOCK,
            &set,
            std::ptr::null_mut::<u64>(),
            8,
        );
    }
    let path = match grand {
        Some(g) if fork() == 0 => g.as_str(),
        _ => out,
    };
    append(path, &format!("ready {}\n", getpid()));
    loop {
        // SAFETY: `set` is an 8-byte kernel set, every signal in it is blocked; no info, no timeout.
        let sig = unsafe {
            libc::syscall(
                libc::SYS_rt_sigtimedwait,
                &set,
                std::ptr::null_mut::<libc::siginfo_t>(),
                std::ptr::null::<libc::timespec>(),
                8,
            )
        };
        if sig < 0 {
            continue;
        }
        append(path, &format!("{sig}\n"));
        if sig == exit_on as libc::c_long {
            exit(0);
        }
    }
}

fn storm(ready: &str) -> ! {
    ignore(libc::SIGTERM);
    publish(ready, &[getpid()]);
    loop {
        // Children that died are reaped at once, so their slots under the limit come free and
        // are taken again by new children in the middle of a stop's kill round.
        // SAFETY: a null status pointer is allowed; WNOHANG never blocks.
        while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        // SAFETY: single-threaded; parent and child both go on with this same loop.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            arm_lifetime();
        } else if pid < 0 {
            // At the limit: try again at once, as a real fork bomb does.
            // SAFETY: sched_yield takes no arguments.
            unsafe {
                libc::sched_yield();
            }
        }
    }
}

fn zombies(n: usize, pause_at: usize, dir: &str) -> ! {
    const BATCH: usize = 100;
    let gone = |pids: &[i32]| {
        for pid in pids {
            // Zombies still have a /proc entry: this waits until the subreaper has reaped them.
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    };
    let mut made = 0;
    let mut in_flight: std::collections::VecDeque<Vec<i32>> = std::collections::VecDeque::new();
    let mut paused = false;
    loop {
        if (made >= pause_at && !paused) || made >= n {
            while let Some(batch) = in_flight.pop_front() {
                gone(&batch);
            }
            if made >= n {
                publish(&format!("{dir}/done"), &[made as i32]);
                sleep_forever();
            }
            paused = true;
            publish(&format!("{dir}/paused"), &[made as i32]);
            while !std::path::Path::new(&format!("{dir}/resume")).exists() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if in_flight.len() >= 2 {
            gone(&in_flight.pop_front().unwrap_or_default());
        }
        let k = BATCH.min(n - made);
        let (r, w) = pipe();
        let parent = fork();
        if parent == 0 {
            drop(r);
            let mut bytes = Vec::with_capacity(k * 4);
            for _ in 0..k {
                let pid = fork();
                if pid == 0 {
                    quick_exit(0);
                }
                bytes.extend_from_slice(&pid.to_ne_bytes());
            }
            let _ = std::fs::File::from(w).write_all(&bytes);
            // Its children, zombies by now or soon, go to the subreaper.
            quick_exit(0);
        }
        drop(w);
        let mut bytes = Vec::new();
        let _ = std::fs::File::from(r).read_to_end(&mut bytes);
        reap(parent);
        let pids: Vec<i32> = bytes
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        made += pids.len();
        if pids.is_empty() {
            die("zombies: a batch parent made no children");
        }
        in_flight.push_back(pids);
    }
}

fn parse_sig(s: &str) -> i32 {
    match s.trim_start_matches("SIG") {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "WINCH" => libc::SIGWINCH,
        n => n
            .parse()
            .unwrap_or_else(|_| die(&format!("unknown signal '{s}'"))),
    }
}

fn exec_with(args: &[String]) -> ! {
    let mut block = Vec::new();
    let mut ign = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--block" if i + 1 < args.len() => block.push(parse_sig(&args[i + 1])),
            "--ignore" if i + 1 < args.len() => ign.push(parse_sig(&args[i + 1])),
            "--" => break,
            other => die(&format!("exec: unexpected '{other}'")),
        }
        i += 2;
    }
    let argv: Vec<CString> = args
        .get(i + 1..)
        .unwrap_or_default()
        .iter()
        .map(|a| CString::new(a.as_str()).expect("no NUL in arguments"))
        .collect();
    if argv.is_empty() {
        die("exec: no command after --");
    }
    // SAFETY: the sets are initialised before use; signal() with SIG_IGN installs no handler.
    unsafe {
        let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(set.as_mut_ptr());
        let mut set = set.assume_init();
        for s in &block {
            libc::sigaddset(&mut set, *s);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        for s in &ign {
            libc::signal(*s, libc::SIG_IGN);
        }
        // The alarm survives exec; the command is not ours to time-limit.
        libc::alarm(0);
    }
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: `ptrs` is a NULL-terminated array of pointers into `argv`, which outlives the call.
    unsafe {
        libc::execvp(ptrs[0], ptrs.as_ptr());
    }
    die(&format!(
        "exec {:?}: {}",
        args[i + 1],
        std::io::Error::last_os_error()
    ))
}

/// The main thread starts a thread that forks a child ignoring SIGTERM, then calls
/// `pthread_exit`: /proc shows the process as a zombie (`Z`) while it runs on. Publishes its pid
/// and the child's.
fn pthread_exit_leader(ready: &str) -> ! {
    let ready = ready.to_string();
    let me = getpid();
    std::thread::spawn(move || {
        // SAFETY: the child only changes a disposition and waits; both are async-signal-safe.
        let child = unsafe { libc::fork() };
        if child == 0 {
            arm_lifetime();
            ignore(libc::SIGTERM);
            sleep_forever();
        }
        publish(&ready, &[me, child]);
        sleep_forever();
    });
    // glibc's pthread_exit unwinds through Rust's frames (and aborts); the raw exit(2) ends this
    // thread only, which is all the kernel sees of pthread_exit.
    // SAFETY: the other thread touches nothing on this thread's stack.
    unsafe {
        libc::syscall(libc::SYS_exit, 0);
    }
    unreachable!("exit(2) returned")
}

/// Execs CMD with pidfd_open and pidfd_send_signal refused (ENOSYS) by a seccomp filter, as on
/// a kernel before 5.3 or under a container profile that does not know them.
#[repr(C)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

/// Execs `argv` with pidfd_open and pidfd_send_signal answered ENOSYS, as before Linux 5.3.
fn no_pidfd(argv: &[String]) -> ! {
    seccomp_exec(
        &[
            op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
            op(JEQ_K, 2, 0, libc::SYS_pidfd_open as u32),
            op(JEQ_K, 1, 0, libc::SYS_pidfd_send_signal as u32),
            op(RET_K, 0, 0, RET_ALLOW),
            op(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
        ],
        argv,
    )
}

/// Execs `argv` with kcmp answered EPERM, as Docker's default profile answers it.
fn no_kcmp(argv: &[String]) -> ! {
    seccomp_exec(
        &[
            op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
            op(JEQ_K, 0, 1, libc::SYS_kcmp as u32),
            op(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
            op(RET_K, 0, 0, RET_ALLOW),
        ],
        argv,
    )
}

/// Execs `argv` with pidfd_send_signal's PIDFD_SIGNAL_PROCESS_GROUP answered EINVAL, as a kernel
/// before 6.9 answers an unknown flag.
fn no_group_signal(argv: &[String]) -> ! {
    const PIDFD_SIGNAL_PROCESS_GROUP: u32 = 1 << 2;
    seccomp_exec(
        &[
            op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
            op(JEQ_K, 0, 3, libc::SYS_pidfd_send_signal as u32),
            op(LD_W_ABS, 0, 0, 16 + 3 * 8), // the low half of args[3], the flags
            op(JEQ_K, 0, 1, PIDFD_SIGNAL_PROCESS_GROUP),
            op(RET_K, 0, 0, RET_ERRNO | libc::EINVAL as u32),
            op(RET_K, 0, 0, RET_ALLOW),
        ],
        argv,
    )
}

/// Installs `filter` for this process and what it execs, then execs `argv`.
fn seccomp_exec(filter: &[SockFilter], argv: &[String]) -> ! {
    #[repr(C)]
    struct SockFprog {
        len: u16,
        filter: *const SockFilter,
    }
    let prog = SockFprog {
        len: filter.len() as u16,
        filter: filter.as_ptr(),
    };
    // SAFETY: `prog` points to a valid filter that outlives the call; the kernel copies it.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_SECCOMP, 2, &prog as *const SockFprog) != 0
        {
            die(&format!("seccomp: {}", std::io::Error::last_os_error()));
        }
    }
    let mut args = vec!["--".to_string()];
    args.extend_from_slice(argv);
    exec_with(&args)
}

fn trace(pid: i32, ready: &str) -> ! {
    // SAFETY: PTRACE_SEIZE takes a pid and no address or data (no options).
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_void>(),
        )
    };
    if rc != 0 {
        die(&format!(
            "PTRACE_SEIZE {pid}: {}",
            std::io::Error::last_os_error()
        ));
    }
    publish(ready, &[getpid()]);
    sleep_forever()
}
