//! Workloads for `benches/compare.py` (an example target: `cargo build --release --example vloer-bench-helper`).
//!
//! ```text
//! vloer-bench-helper usr1
//!     a SIGUSR1 handler writes CLOCK_MONOTONIC nanoseconds as one line to stdout each time it
//!     runs; prints `ready` first, then waits on stdin
//! vloer-bench-helper tree N [--daemon]
//!     N processes in all (itself, sqrt(N) subtree roots, the rest their leaves), every one with
//!     SIGTERM at default, waiting on stdin; --daemon adds one grandchild that left the tree's
//!     session with setsid() (double fork); prints `ready PID...` (every process) when all are up
//! vloer-bench-helper storm N
//!     meant to run under a wrapper that is PID 1 of its own pid namespace (with /proc mounted for
//!     it): makes N grandchildren, orphans them (their parent exits, so PID 1 inherits them), then
//!     lets them all exit at once and samples until PID 1 has reaped every one; prints
//!     `storm NS MAX_ZOMBIES SAMPLES` (NS from the release to the last reap)
//! vloer-bench-helper idle N [K DIR]
//!     N bystanders waiting on stdin; prints `ready` when all are up; when stdin closes, reaps them
//!     and exits. With K and DIR, each holds K files open, DIR/0 to DIR/K-1 (made if missing)
//! vloer-bench-helper reply-server PATH
//!     the least a control socket server can do, as a reference for the status round trip: a
//!     Unix stream socket at PATH; for each connection one accept, one read, one fixed reply line,
//!     close; prints `ready` once listening, exits when stdin closes
//! vloer-bench-helper proc-reads PID N
//!     the /proc reads a `status` reply needs for one process, N times: open, read to the end and
//!     close /proc/PID/stat, /proc/PID/task/PID/children and /proc/PID/cmdline; prints the median
//!     microseconds of one round
//! ```
//!
//! stdin is the lifeline: every process made here blocks reading it (or exits when it reads EOF),
//! so when the benchmark closes its end, or dies, everything it started goes too. Every process
//! also ends itself after LIFETIME (SIGALRM at default), so nothing can linger for long.
#![allow(unsafe_code)]

use std::io::Write;
use std::time::{Duration, Instant};

const LIFETIME_SECS: u32 = 180;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // SAFETY: alarm only arms a timer; SIGALRM at its default action ends the process.
    unsafe {
        libc::signal(libc::SIGALRM, libc::SIG_DFL);
        libc::alarm(LIFETIME_SECS);
        // Whatever the wrapper left us with: these must end the process or be handled by us.
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["usr1"] => usr1(),
        ["tree", n] => tree(parse(n), false),
        ["tree", n, "--daemon"] => tree(parse(n), true),
        ["storm", n] => storm(parse(n)),
        ["idle", n] => idle(parse(n)),
        ["idle", n, k, dir] => {
            hold_files(parse(k), dir);
            idle(parse(n))
        }
        ["reply-server", path] => reply_server(path),
        ["proc-reads", pid, n] => proc_reads(parse(pid), parse(n)),
        _ => die(
            "usage: vloer-bench-helper usr1 | tree N [--daemon] | storm N | idle N [K DIR] \
             | reply-server PATH | proc-reads PID N",
        ),
    }
}

fn parse(s: &str) -> usize {
    s.parse().unwrap_or_else(|_| die("N must be a number"))
}

fn die(msg: &str) -> ! {
    eprintln!("vloer-bench-helper: {msg}");
    std::process::exit(2)
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec; it is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Blocks on stdin until EOF (the lifeline), then exits 0. Signals at default end it earlier.
fn wait_lifeline() -> ! {
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reading into a stack buffer of the given size.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n == 0 || (n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
        {
            // SAFETY: _exit skips atexit handlers, as a forked copy must.
            unsafe { libc::_exit(0) }
        }
    }
}

/// In a forked member: reports its pid on `w`, lets go of the pipe, and waits on the lifeline.
fn report_and_wait(w: i32) -> ! {
    write_pid(w);
    // SAFETY: closing our copy of the report pipe.
    unsafe { libc::close(w) };
    wait_lifeline()
}

fn fork() -> libc::pid_t {
    // SAFETY: this program is single-threaded, so the child may do anything after fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        die(&format!("fork: {}", std::io::Error::last_os_error()));
    }
    pid
}

fn pipe() -> (i32, i32) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        die("pipe");
    }
    (fds[0], fds[1])
}

fn write_pid(fd: i32) {
    // SAFETY: getpid cannot fail; 4 bytes to a pipe are written atomically.
    unsafe {
        let pid = libc::getpid();
        libc::write(fd, (&pid as *const libc::pid_t).cast(), 4);
    }
}

fn read_pids(fd: i32, n: usize) -> Vec<i32> {
    let mut out = Vec::with_capacity(n);
    let mut buf = vec![0u8; 4 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    while out.len() < n {
        // SAFETY: reading into a heap buffer of the given size.
        let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if got < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if got <= 0 {
            die(&format!("only {} of {n} processes reported", out.len()));
        }
        pending.extend_from_slice(&buf[..got as usize]);
        let whole = pending.len() / 4 * 4;
        out.extend(
            pending[..whole]
                .chunks(4)
                .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]])),
        );
        pending.drain(..whole);
    }
    out
}

// ---------------------------------------------------------------------------------------------

extern "C" fn on_usr1(_: libc::c_int) {
    // Format the time into a stack buffer: no allocation, only async-signal-safe calls.
    let mut t = now_ns();
    let mut buf = [0u8; 24];
    let mut i = buf.len() - 1;
    buf[i] = b'\n';
    loop {
        i -= 1;
        buf[i] = b'0' + (t % 10) as u8;
        t /= 10;
        if t == 0 {
            break;
        }
    }
    // SAFETY: write(2) is async-signal-safe; the buffer lives on this stack frame.
    unsafe { libc::write(1, buf[i..].as_ptr().cast(), buf.len() - i) };
}

fn usr1() -> ! {
    // SAFETY: the handler only calls clock_gettime and write.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    println!("ready");
    let _ = std::io::stdout().flush();
    wait_lifeline()
}

// ---------------------------------------------------------------------------------------------

fn tree(n: usize, daemon: bool) -> ! {
    let n = n.max(1);
    let (r, w) = pipe();
    let rest = n - 1;
    let roots = if rest == 0 {
        0
    } else {
        ((rest as f64).sqrt().ceil() as usize).min(rest)
    };
    let leaves = rest - roots;
    for i in 0..roots {
        let mine = leaves / roots + usize::from(i < leaves % roots);
        if fork() == 0 {
            for _ in 0..mine {
                if fork() == 0 {
                    report_and_wait(w);
                }
            }
            report_and_wait(w);
        }
    }
    let mut expected = rest;
    if daemon {
        expected += 1;
        let mid = fork();
        if mid == 0 {
            // SAFETY: setsid in a fresh child (not a group leader) cannot fail.
            unsafe { libc::setsid() };
            if fork() == 0 {
                report_and_wait(w);
            }
            // SAFETY: the daemon is orphaned; the wrapper (subreaper or PID 1) inherits it.
            unsafe { libc::_exit(0) };
        }
        let mut st = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(mid, &mut st, 0) };
    }
    // SAFETY: our copy of the write end; the children hold theirs until they reported.
    unsafe { libc::close(w) };
    let mut pids = read_pids(r, expected);
    // SAFETY: getpid cannot fail.
    pids.insert(0, unsafe { libc::getpid() });
    let mut line = String::from("ready");
    for p in &pids {
        line.push(' ');
        line.push_str(&p.to_string());
    }
    line.push('\n');
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
    drop(out);
    wait_lifeline()
}

// ---------------------------------------------------------------------------------------------

/// The number of processes /proc lists (pid directories).
fn count_proc() -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return usize::MAX;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .as_encoded_bytes()
                .first()
                .is_some_and(u8::is_ascii_digit)
        })
        .count()
}

fn raise_nofile(need: usize) -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if (lim.rlim_cur as usize) < need {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    lim.rlim_cur as usize >= need
}

fn storm(n: usize) -> ! {
    let (gate_r, gate_w) = pipe();
    let (rep_r, rep_w) = pipe();
    let mid = fork();
    if mid == 0 {
        for _ in 0..n {
            if fork() == 0 {
                // SAFETY: plain descriptor work and a blocking read in the grandchild.
                unsafe {
                    libc::close(gate_w);
                    write_pid(rep_w);
                    libc::close(rep_w);
                    let mut b = 0u8;
                    while libc::read(gate_r, (&mut b as *mut u8).cast(), 1) < 0 {}
                    libc::_exit(0);
                }
            }
        }
        // SAFETY: the grandchildren are orphaned now; PID 1 inherits them.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: closing our copies; the grandchildren keep the gate's read end.
    unsafe {
        libc::close(rep_w);
        libc::close(gate_r);
    }
    let pids = read_pids(rep_r, n);
    let mut st = 0;
    // SAFETY: waiting for our own child, so every grandchild is PID 1's before the release.
    unsafe { libc::waitpid(mid, &mut st, 0) };
    // Exits are seen through pidfds (readable once a process has exited, reaped or not).
    let mut fds: Vec<libc::pollfd> = Vec::new();
    if raise_nofile(n + 64) {
        for p in &pids {
            // SAFETY: pidfd_open takes a pid and flags.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, *p, 0) } as i32;
            if fd >= 0 {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
    }
    let have_pidfds = fds.len() == n;
    let before = count_proc();
    let floor = before - n; // PID 1 and this process
    let start = Instant::now();
    let t0 = now_ns();
    // SAFETY: the last write end: every grandchild reads EOF now.
    unsafe { libc::close(gate_w) };
    let mut max_zombies = 0usize;
    let mut samples = 0u64;
    let t_end = loop {
        let left = count_proc().saturating_sub(floor);
        let t = now_ns();
        samples += 1;
        let exited = if have_pidfds {
            // SAFETY: polling our own pollfd array without waiting.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
            ready.max(0) as usize
        } else {
            n
        };
        // Zombies: exited but still listed (not yet reaped by PID 1).
        let zombies = left.saturating_sub(n - exited.min(n));
        max_zombies = max_zombies.max(zombies);
        if left == 0 {
            break t;
        }
        if start.elapsed() > Duration::from_secs(30) {
            println!("storm-timeout {left}");
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    println!(
        "storm {} {} {} {}",
        t_end - t0,
        if have_pidfds {
            max_zombies.to_string()
        } else {
            "-".into()
        },
        samples,
        before
    );
    std::process::exit(0)
}

// ---------------------------------------------------------------------------------------------

/// Opens DIR/0 .. DIR/K-1 and keeps them open, for the bystanders forked next to inherit: a
/// sweep has K descriptors per bystander to look at.
fn hold_files(k: usize, dir: &str) {
    for i in 0..k {
        let path = format!("{dir}/{i}");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| die(&format!("open {path}: {e}")));
        std::mem::forget(file);
    }
}

fn idle(n: usize) -> ! {
    let (r, w) = pipe();
    for _ in 0..n {
        if fork() == 0 {
            report_and_wait(w);
        }
    }
    // SAFETY: our copy of the write end.
    unsafe { libc::close(w) };
    read_pids(r, n);
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut buf = [0u8; 64];
    loop {
        // SAFETY: reading stdin into a stack buffer until EOF.
        let got = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if got == 0
            || (got < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
        {
            break;
        }
    }
    let mut st = 0;
    // SAFETY: reaping our own children until none is left.
    while unsafe { libc::waitpid(-1, &mut st, 0) } > 0 {}
    std::process::exit(0)
}

fn reply_server(path: &str) -> ! {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path)
        .unwrap_or_else(|e| die(&format!("bind {path}: {e}")));
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut buf = [0u8; 65536];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two initialised pollfd records in a local array.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            continue;
        }
        if fds[0].revents != 0 {
            let _ = std::fs::remove_file(path);
            std::process::exit(0);
        }
        if let Ok((mut conn, _)) = listener.accept() {
            // A bare connect-and-close reads EOF here; its reply then fails, which is fine.
            let _ = conn.read(&mut buf);
            const REPLY: &[u8] = b"{\"code\":\"unknown_op\",\"error\":\"none\"}\n";
            // SAFETY: sending from a static buffer; MSG_NOSIGNAL keeps a gone peer from killing us.
            unsafe {
                libc::send(
                    conn.as_raw_fd(),
                    REPLY.as_ptr().cast(),
                    REPLY.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
        }
    }
}

fn proc_reads(pid: usize, n: usize) -> ! {
    use std::io::Read;
    let paths = [
        format!("/proc/{pid}/stat"),
        format!("/proc/{pid}/task/{pid}/children"),
        format!("/proc/{pid}/cmdline"),
    ];
    let mut buf = [0u8; 4096];
    let mut rounds = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let t = Instant::now();
        for path in &paths {
            let mut f =
                std::fs::File::open(path).unwrap_or_else(|e| die(&format!("open {path}: {e}")));
            while f.read(&mut buf).unwrap_or(0) > 0 {}
        }
        rounds.push(t.elapsed());
    }
    rounds.sort();
    println!("{:.1}", rounds[rounds.len() / 2].as_secs_f64() * 1e6);
    std::process::exit(0)
}
