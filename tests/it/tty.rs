//! Interactive use through a real pseudo-terminal (SPEC "Running a command" 1 and 3):
//! the terminal goes to the child's group and comes back, Ctrl-C, Ctrl-Z, `fg`, `bg` and window
//! size changes behave as if vloer-run were not there, `--session` leaves the terminal alone, and
//! without a terminal none of it is tried.
//!
//! Each test opens a fresh pty and starts one shell on it as session leader (the pty is its
//! controlling terminal), then types into it like a user. Every wait is for output or for the
//! terminal's foreground group to change, with a deadline; every process is ended by pid
//! (`harness::Running` kills the leader's tree when dropped).

use crate::harness::{self, Running};
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt, PtyMaster};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one expectation may take before the test fails and prints the transcript.
const WAIT: Duration = Duration::from_secs(30);

/// Reads lines until one is `end`, so a read that a trapped signal interrupts (dash) is retried;
/// bounded so that a hung-up terminal cannot make it spin.
const READ_UNTIL_END: &str =
    r#"i=0; until read -r line && [ "$line" = end ]; do i=$((i+1)); [ $i -gt 20 ] && exit 9; done"#;

/// The master side of a pty, with everything read from it so far.
pub(crate) struct Pty {
    master: PtyMaster,
    slave: Option<OwnedFd>,
    out: Vec<u8>,
    /// Where the next `expect` starts looking.
    pos: usize,
    eof: bool,
}

impl Pty {
    /// A new pty of 24 rows and 80 columns; both ends are close-on-exec from the start, so no
    /// process started by a parallel test inherits them.
    pub(crate) fn open() -> Pty {
        let master =
            posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("posix_openpt");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let name = ptsname_r(&master).expect("ptsname_r");
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&name)
            .unwrap_or_else(|e| panic!("opening {name}: {e}"));
        let pty = Pty {
            master,
            slave: Some(slave.into()),
            out: Vec::new(),
            pos: 0,
            eof: false,
        };
        pty.set_size(24, 80);
        pty
    }

    /// Starts `argv` as a session leader with this pty as its controlling terminal and stdio, in a
    /// clean environment: `VR` is the binary under test, plus `env`.
    pub(crate) fn spawn(&mut self, argv: &[&str], env: &[(&str, &str)]) -> Running {
        let slave = self.slave.take().expect("one session per pty");
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("TERM", "dumb")
            .env("LC_ALL", "C")
            .env("VR", harness::bin());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::from(slave.try_clone().expect("dup slave")))
            .stdout(Stdio::from(slave.try_clone().expect("dup slave")))
            .stderr(Stdio::from(slave));
        // SAFETY: the hook runs between fork and exec and calls only setsid and ioctl, both
        // async-signal-safe, with no allocation. fd 0 is already the pty slave when it runs, and
        // the child is not a group leader (it is in the test's group), so setsid succeeds.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawning the session leader");
        // Drop our copies of the slave, so the master sees a hang-up when the session is gone.
        drop(cmd);
        Running::of(child)
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }

    pub(crate) fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\n--- terminal transcript\n{}\n---",
            self.text().replace('\r', "")
        );
    }

    /// Reads what is there, waiting at most until `until`; false when nothing came.
    pub(crate) fn read_some(&mut self, until: Instant) -> bool {
        if self.eof {
            return false;
        }
        let left = until
            .saturating_duration_since(Instant::now())
            .as_millis()
            .min(u16::MAX as u128) as u16;
        let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, PollTimeout::from(left)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => return false,
            Ok(_) => {}
            Err(e) => self.fail(&format!("poll on the pty master: {e}")),
        }
        let mut buf = [0u8; 4096];
        match nix::unistd::read(self.master.as_fd(), &mut buf) {
            Ok(n) if n > 0 => {
                self.out.extend_from_slice(&buf[..n]);
                true
            }
            // EIO: every slave descriptor is closed, the session is gone.
            Ok(_) | Err(nix::errno::Errno::EIO) => {
                self.eof = true;
                false
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => false,
            Err(e) => self.fail(&format!("read from the pty master: {e}")),
        }
    }

    /// Waits for `needle` after the previous match and returns the text up to its end.
    pub(crate) fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let hay = &self.out[self.pos..];
            if let Some(i) = hay
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
            {
                let got = String::from_utf8_lossy(&hay[..i + needle.len()]).into_owned();
                self.pos += i + needle.len();
                return got;
            }
            if self.eof || Instant::now() >= deadline {
                self.fail(&format!("did not see {needle:?} within {WAIT:?}"));
            }
            self.read_some(deadline);
        }
    }

    /// Waits for `prefix` followed by a whole decimal number and returns the number. An echoed
    /// `pid=$$` does not match: a digit must follow the prefix.
    pub(crate) fn expect_number(&mut self, prefix: &str) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = String::from_utf8_lossy(&self.out[self.pos..]).into_owned();
            let mut from = 0;
            while let Some(i) = text[from..].find(prefix) {
                let start = from + i + prefix.len();
                let digits = text[start..].bytes().take_while(u8::is_ascii_digit).count();
                // The number is whole once a non-digit follows it.
                if digits > 0 && start + digits < text.len() {
                    self.pos += text[..start + digits].len();
                    return text[start..start + digits].parse().expect("a number");
                }
                from = start;
            }
            if self.eof || Instant::now() >= deadline {
                self.fail(&format!("did not see {prefix:?}<number> within {WAIT:?}"));
            }
            self.read_some(deadline);
        }
    }

    pub(crate) fn send(&self, text: &str) {
        let mut bytes = text.as_bytes();
        while !bytes.is_empty() {
            match nix::unistd::write(self.master.as_fd(), bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
                Err(e) => self.fail(&format!("write to the pty master: {e}")),
            }
        }
    }

    /// The terminal's foreground process group, asked through the master.
    pub(crate) fn fg(&self) -> i32 {
        nix::unistd::tcgetpgrp(self.master.as_fd())
            .map(|p| p.as_raw())
            .unwrap_or(-1)
    }

    /// Waits until the terminal's foreground group is `pgid`, reading output meanwhile.
    pub(crate) fn wait_fg(&mut self, pgid: i32, what: &str) {
        self.wait_for(what, |pty| pty.fg() == pgid);
    }

    /// Waits until `cond` holds, checking every 20 ms while reading output, for at most WAIT.
    pub(crate) fn wait_for(&mut self, what: &str, mut cond: impl FnMut(&Pty) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !cond(self) {
            if Instant::now() >= deadline {
                let fg = self.fg();
                self.fail(&format!(
                    "timed out waiting for {what} (foreground group now {fg})"
                ));
            }
            if !self.read_some(Instant::now() + Duration::from_millis(20)) && self.eof {
                // Nothing more will come; keep checking the condition until the deadline.
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Waits for the session leader (`what`) to exit, reading output meanwhile, and checks that
    /// it succeeded.
    pub(crate) fn assert_leader_succeeds(&mut self, mut leader: Running, what: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = leader.child.try_wait().expect("try_wait") {
                assert!(status.success(), "{what} failed: {status:?}");
                return;
            }
            if Instant::now() >= deadline {
                self.fail("the session leader did not exit");
            }
            if !self.read_some(Instant::now() + Duration::from_millis(20)) && self.eof {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// TIOCSWINSZ on the master: the kernel sends SIGWINCH to the foreground group.
    pub(crate) fn set_size(&self, rows: u16, cols: u16) {
        let ws = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one `struct winsize` from the pointer, which points to a live,
        // initialised value on our stack; the descriptor is our open pty master.
        let rc = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
        assert_eq!(rc, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
    }

    /// How often `needle` occurs in the whole transcript.
    pub(crate) fn count(&self, needle: &str) -> usize {
        self.text().matches(needle).count()
    }

    /// The verdict line vloer-run wrote to the terminal (its stderr).
    pub(crate) fn verdict(&self) -> serde_json::Value {
        harness::parse_verdict(&self.text())
            .unwrap_or_else(|| self.fail("no verdict in the transcript"))
    }
}

/// Fields of /proc/PID/stat after the command name.
#[derive(Debug)]
pub(crate) struct Stat {
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) session: i32,
    pub(crate) tty_nr: i32,
}

pub(crate) fn stat(pid: i32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        tty_nr: f.get(4)?.parse().ok()?,
    })
}

fn state(pid: i32) -> char {
    stat(pid).map(|s| s.state).unwrap_or('-')
}

/// A FIFO in `dir`: a child that runs `read -r _ < "$FIFO"` waits there, away from the terminal,
/// until the test calls `release`.
fn gate(dir: &tempfile::TempDir) -> String {
    let fifo = harness::tmp_path(dir, "gate");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    harness::path_str(&fifo)
}

/// Lets the child through the gate. The open does not block: it fails (ENXIO) until the child has
/// opened the FIFO for reading, so it is retried until then, for at most WAIT.
fn release(fifo: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
        {
            Ok(mut f) => {
                std::io::Write::write_all(&mut f, b"go\n").expect("writing the gate");
                return;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("opening the gate {fifo}: {e}"),
        }
    }
}

/// Starts a non-interactive `sh` as session leader that runs `"$VR" REST` in the terminal's
/// foreground group, prints vloer-run's status as `vloer-exit=N` and then reads one line from the
/// terminal (`outer-read=LINE`). `sh -c` has no job control, so nothing but vloer-run moves the
/// terminal's foreground group, and the test can look at it after vloer-run has exited. The
/// `trap : INT` keeps this sh alive through a Ctrl-C meant for the run; a trap is reset at exec,
/// so vloer-run still starts with SIGINT at default.
fn start_wrapped(pty: &mut Pty, rest: &str, env: &[(&str, &str)]) -> Running {
    let script = format!(
        r#"trap : INT; "$VR" {rest}; echo "vloer-exit=$?"; read -r line && echo "outer-read=$line""#
    );
    pty.spawn(&["sh", "-c", &script], env)
}

/// `start_wrapped` with job control on in that sh (`set -m`): vloer-run leads a job of its own in
/// the foreground, as when typed at an interactive prompt. Without it, vloer-run is part of the
/// script's job, and its child shares that group so that the script's shell sees Ctrl-C too
/// (SPEC, "Running a command", 1 and 5).
fn start_job_wrapped(pty: &mut Pty, rest: &str, env: &[(&str, &str)]) -> Running {
    let script = format!(
        r#"set -m; trap : INT; "$VR" {rest}; echo "vloer-exit=$?"; read -r line && echo "outer-read=$line""#
    );
    pty.spawn(&["sh", "-c", &script], env)
}

/// After vloer-run exited, the leader's sh reads a line: the terminal is usable by the caller.
fn finish_wrapped(pty: &mut Pty, leader: Running) {
    pty.send("bye\n");
    pty.expect("outer-read=bye");
    pty.assert_leader_succeeds(leader, "the outer sh");
}

#[test]
fn ctrl_c_reaches_the_child_once_and_exit_hands_the_terminal_back() {
    ctrl_c_once_then_hand_back(true);
}

/// Inside a script's job (no job control), a child that cannot share the group (`--scope group`
/// needs one of its own) gets the terminal, and vloer-run itself hands it back.
#[test]
fn inside_a_scripts_job_with_scope_group_the_terminal_still_comes_back() {
    ctrl_c_once_then_hand_back(false);
}

fn ctrl_c_once_then_hand_back(job_control: bool) {
    let dir = harness::tempdir();
    let fifo = gate(&dir);
    let mut pty = Pty::open();
    let inner = format!(
        r#"trap 'n=$((n+1)); echo "got-int $n"' INT; echo "pid=$$"; read -r _ < "$FIFO"; echo "reading"; {READ_UNTIL_END}; echo "after n=$n"; exit 3"#
    );
    let env = [("INNER", inner.as_str()), ("FIFO", fifo.as_str())];
    let leader = if job_control {
        start_job_wrapped(&mut pty, r#"-- sh -c "$INNER""#, &env)
    } else {
        start_wrapped(&mut pty, r#"--scope group -- sh -c "$INNER""#, &env)
    };
    let outer = leader.pid();
    let child = pty.expect_number("pid=");
    // Before its exec (and before it touches the terminal) the child's own group became the
    // terminal's foreground group; vloer-run stays in the caller's.
    assert_eq!(
        pty.fg(),
        child,
        "the terminal was not handed to the child's group at start"
    );
    let vr = stat(child).expect("child stat").ppid;
    assert_eq!(
        stat(child).unwrap().pgrp,
        child,
        "the child leads its own group"
    );
    let vr_group = stat(vr).expect("vloer-run stat").pgrp;
    if job_control {
        assert_eq!(vr_group, vr, "vloer-run leads its job");
    } else {
        assert_eq!(vr_group, outer, "vloer-run stays in the caller's group");
    }
    release(&fifo);
    pty.expect("reading");

    pty.send("\x03");
    pty.expect("got-int 1");
    pty.send("end\n");
    pty.expect("after n=1");
    pty.expect("vloer-exit=3");
    assert_eq!(
        pty.count("got-int"),
        1,
        "SIGINT reached the child more than once"
    );
    assert_eq!(
        pty.fg(),
        outer,
        "the terminal was not handed back to the caller's group"
    );
    let v = pty.verdict();
    assert_eq!(v["stopped"], true, "{v}");
    assert_eq!(v["child"]["exit_code"], 3, "{v}");
    finish_wrapped(&mut pty, leader);
}

#[test]
fn interactive_bash_gets_the_terminal_and_exit_hands_it_back() {
    let mut pty = Pty::open();
    let leader = start_wrapped(
        &mut pty,
        "-- bash --norc --noprofile --noediting -i",
        &[("PS1", "inner$ ")],
    );
    let outer = leader.pid();
    pty.expect("inner$ ");
    pty.send("echo \"pid=$$ flags=$- sum=$((40+2))\"\n");
    let bash = pty.expect_number("pid=");
    let line = pty.expect("sum=42");
    // `m`: bash found itself in the foreground and turned job control on.
    assert!(
        line.contains("flags=") && line.split("flags=").nth(1).is_some_and(|f| f.contains('m')),
        "no job control: {line:?}"
    );
    assert_eq!(pty.fg(), bash, "the inner bash is not the foreground group");
    // A foreground job of the inner shell, then the prompt again.
    pty.expect("inner$ ");
    pty.send("sh -c 'echo \"job=$$\"'\n");
    pty.expect_number("job=");
    pty.expect("inner$ ");
    pty.send("exit 5\n");
    pty.expect("vloer-exit=5");
    assert_eq!(
        pty.fg(),
        outer,
        "the terminal still points at the exited child's group"
    );
    let text = pty.text();
    assert!(
        !text.contains("no job control") && !text.contains("cannot set terminal"),
        "bash complained:\n{text}"
    );
    assert_eq!(pty.verdict()["child"]["exit_code"], 5);
    finish_wrapped(&mut pty, leader);
}

/// Starts an interactive bash on the pty (as a user's login terminal would) and runs vloer-run in
/// it as a job; returns the leader, the child's pid and vloer-run's pid.
fn start_job(pty: &mut Pty, inner: &str, env: &[(&str, &str)]) -> (Running, i32, i32) {
    let mut all = vec![("PS1", "outer$ "), ("INNER", inner)];
    all.extend_from_slice(env);
    let leader = pty.spawn(
        &["bash", "--norc", "--noprofile", "--noediting", "-i"],
        &all,
    );
    pty.expect("outer$ ");
    pty.send("\"$VR\" -- sh -c \"$INNER\"\n");
    let child = pty.expect_number("pid=");
    pty.wait_fg(child, "the child's group to become the foreground group");
    let vr = stat(child).expect("child stat").ppid;
    (leader, child, vr)
}

/// The job's status is checked in the outer shell, then the shell exits.
fn finish_job(pty: &mut Pty, leader: Running, code: i32) {
    pty.expect("outer$ ");
    pty.send("echo \"rc=$?\"\n");
    pty.expect(&format!("rc={code}\r\n"));
    let v = pty.verdict();
    assert_eq!(v["stopped"], true, "{v}");
    assert_eq!(v["exit_code"], code, "{v}");
    pty.send("exit\n");
    pty.assert_leader_succeeds(leader, "the outer bash");
}

#[test]
fn ctrl_z_stops_the_job_and_fg_resumes_it() {
    let dir = harness::tempdir();
    let fifo = gate(&dir);
    let mut pty = Pty::open();
    // The child waits at the gate, away from the terminal, until after `fg`: so the terminal must
    // come to its group from vloer-run's SIGCONT handling, not from a read that fails.
    let inner = format!(
        r#"echo "pid=$$"; read -r _ < "$FIFO"; echo "reading"; {READ_UNTIL_END}; echo "resumed"; exit 7"#
    );
    let (leader, child, vr) = start_job(&mut pty, &inner, &[("FIFO", &fifo)]);
    let outer = leader.pid();

    pty.send("\x1a");
    pty.expect("Stopped");
    pty.wait_for("the child and vloer-run to be stopped", |_| {
        state(child) == 'T' && state(vr) == 'T'
    });
    pty.wait_fg(outer, "the outer shell to take the terminal");
    pty.expect("outer$ ");
    // vloer-run stopped with the child's signal, so the shell shows what it would for the child.
    pty.send("jobs -l\n");
    let jobs = pty.expect("outer$ ");
    assert!(
        jobs.contains(&format!("{vr} Stopped")) && !jobs.contains("Stopped ("),
        "jobs -l: {jobs:?}"
    );

    pty.send("fg\n");
    pty.wait_fg(child, "fg to give the terminal to the child's group again");
    pty.wait_for("the child and vloer-run to run again", |_| {
        state(child) != 'T' && state(vr) != 'T'
    });
    release(&fifo);
    pty.expect("reading");
    pty.send("end\n");
    pty.expect("resumed");
    finish_job(&mut pty, leader, 7);
}

#[test]
fn bg_runs_the_job_until_it_reads_the_terminal_and_fg_finishes_it() {
    let mut pty = Pty::open();
    let inner = r#"echo "pid=$$"; read -r a; echo "first=$a"; read -r b; echo "second=$b"; exit 6"#;
    let (leader, child, vr) = start_job(&mut pty, inner, &[]);
    let outer = leader.pid();
    pty.send("first\n");
    pty.expect("first=first");

    pty.send("\x1a");
    pty.expect("Stopped");
    pty.expect("outer$ ");
    // In the background the child's read gets SIGTTIN; vloer-run stops along, and bash reports it
    // at once (`set -b`).
    pty.send("set -b; bg\n");
    pty.expect(" &");
    pty.expect("Stopped");
    pty.wait_for("the child and vloer-run to be stopped again", |_| {
        state(child) == 'T' && state(vr) == 'T'
    });
    assert_eq!(
        pty.fg(),
        outer,
        "a background job must not take the terminal"
    );
    pty.send("jobs -l\n");
    // The listing itself, which has the pid (the `set -b` notice has none): on a busy machine the
    // notice, and the prompt bash prints after it, can still arrive after `jobs -l` was typed.
    pty.expect(&format!("{vr} Stopped (tty input)"));

    pty.send("fg\n");
    pty.wait_fg(child, "fg to give the terminal to the child's group");
    pty.send("second\n");
    pty.expect("second=second");
    finish_job(&mut pty, leader, 6);
}

#[test]
fn started_in_the_background_then_fg_gives_the_child_the_terminal() {
    let dir = harness::tempdir();
    let fifo = gate(&dir);
    let mut pty = Pty::open();
    // The child waits on the FIFO (not on the terminal) until the test has moved the job to the
    // front, and only then reads the terminal.
    let inner = r#"echo "pid=$$"; read -r _ < "$FIFO"; read -r a; echo "got=$a"; exit 8"#;
    let leader = pty.spawn(
        &["bash", "--norc", "--noprofile", "--noediting", "-i"],
        &[("PS1", "outer$ "), ("INNER", inner), ("FIFO", &fifo)],
    );
    let outer = leader.pid();
    pty.expect("outer$ ");
    pty.send("set -b; \"$VR\" -- sh -c \"$INNER\" &\n");
    let child = pty.expect_number("pid=");
    let vr = stat(child).expect("child stat").ppid;
    assert_eq!(pty.fg(), outer, "a job started with & took the terminal");

    // `fg` on a running job moves the terminal to vloer-run's group and sends no SIGCONT.
    pty.send("fg\n");
    pty.wait_fg(vr, "fg to give the terminal to vloer-run's group");
    release(&fifo);
    // The child's read from the terminal stops it with SIGTTIN; vloer-run, in front, hands the
    // terminal over and continues it instead of stopping the job.
    pty.wait_fg(child, "vloer-run to give the terminal to the child's group");
    pty.send("typed\n");
    pty.expect("got=typed");
    finish_job(&mut pty, leader, 8);
    assert_eq!(pty.count("Stopped"), 0, "the outer shell saw the job stop");
}

#[test]
fn window_size_change_reaches_the_child() {
    let mut pty = Pty::open();
    let inner = format!(
        r#"trap 'echo "winch $(stty size)"' WINCH; echo "pid=$$ size $(stty size)"; {READ_UNTIL_END}; exit 0"#
    );
    let leader = start_job_wrapped(&mut pty, r#"-- sh -c "$INNER""#, &[("INNER", &inner)]);
    let child = pty.expect_number("pid=");
    pty.expect("size 24 80");
    pty.wait_fg(child, "the child's group to become the foreground group");
    pty.set_size(40, 100);
    pty.expect("winch 40 100");
    pty.send("end\n");
    pty.expect("vloer-exit=0");
    assert_eq!(
        pty.count("winch"),
        1,
        "SIGWINCH reached the child more than once"
    );
    finish_wrapped(&mut pty, leader);
}

#[test]
fn session_leaves_the_terminal_alone_and_forwards_ctrl_c_and_winch() {
    let help = harness::Run::new(["--help"]).finish();
    assert_eq!(help.code(), Some(0), "{help}");
    let session_help: String = help
        .stdout
        .split("--session")
        .nth(1)
        .unwrap_or_default()
        .split("[env:")
        .next()
        .unwrap_or_default()
        .into();
    assert!(
        session_help.contains("terminal"),
        "--help does not say what --session does to the terminal:\n{help}"
    );

    let mut pty = Pty::open();
    let inner = format!(
        r#"trap 'n=$((n+1)); echo "got-int $n"' INT; trap 'echo "winch $(stty size)"' WINCH; echo "pid=$$"; {READ_UNTIL_END}; echo "after n=$n"; exit 0"#
    );
    let leader = start_wrapped(
        &mut pty,
        r#"--session -- sh -c "$INNER""#,
        &[("INNER", &inner)],
    );
    let outer = leader.pid();
    let child = pty.expect_number("pid=");
    let st = stat(child).expect("child stat");
    assert_eq!(
        st.session, child,
        "the child is not in a session of its own: {st:?}"
    );
    assert_eq!(st.tty_nr, 0, "the child has a controlling terminal: {st:?}");

    // The terminal stays with the caller's group, where vloer-run is; vloer-run forwards.
    pty.send("\x03");
    pty.expect("got-int 1");
    pty.set_size(40, 100);
    pty.expect("winch 40 100");
    assert_eq!(
        pty.fg(),
        outer,
        "--session moved the terminal's foreground group"
    );
    pty.send("end\n");
    pty.expect("after n=1");
    pty.expect("vloer-exit=0");
    assert_eq!(
        pty.count("got-int"),
        1,
        "SIGINT reached the child more than once"
    );
    assert_eq!(
        pty.count("winch"),
        1,
        "SIGWINCH reached the child more than once"
    );
    assert_eq!(pty.fg(), outer);
    finish_wrapped(&mut pty, leader);
}

#[test]
fn no_terminal_no_attempt_and_no_messages() {
    // No terminal anywhere: stdin /dev/null, output to pipes.
    let f = harness::Run::new(["--", "sh", "-c", "echo out; exit 4"]).finish();
    assert_eq!(f.code(), Some(4), "{f}");
    assert_eq!(f.stdout, "out\n", "{f}");
    assert!(
        f.stderr
            .lines()
            .all(|l| harness::parse_verdict(l).is_some()),
        "stderr has more than the verdict:\n{f}"
    );
    assert_eq!(f.stderr.lines().count(), 1, "{f}");

    // A terminal, but stdin is /dev/null (`vloer-run ... </dev/null` typed at a prompt): the
    // terminal is not handed over, and nothing is said about it.
    let mut pty = Pty::open();
    let leader = start_wrapped(
        &mut pty,
        r#"-- sh -c 'echo "pid=$$"; exec sleep 1000' </dev/null"#,
        &[],
    );
    let outer = leader.pid();
    let child = pty.expect_number("pid=");
    pty.wait_for("the child to exec sleep", |_| harness::runs(child, "sleep"));
    assert_eq!(
        pty.fg(),
        outer,
        "the terminal was handed over although stdin is not a terminal"
    );
    assert_ne!(
        stat(child).expect("child stat").pgrp,
        outer,
        "the child is not in a group of its own"
    );
    // End the child by its pid; vloer-run reports 128+15.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("kill child");
    pty.expect("vloer-exit=143");
    let text = pty.text();
    assert!(
        !text.contains("vloer-run:"),
        "vloer-run printed a message:\n{text}"
    );
    assert_eq!(pty.verdict()["stopped"], true);
    finish_wrapped(&mut pty, leader);
}

#[test]
fn as_pid_1_a_ctrl_z_does_not_hang_the_terminal() {
    // `docker run -t` without a shell around it: vloer-run is PID 1 with the terminal, and no one
    // could `fg` a job that Ctrl-Z stopped, so vloer-run continues the child at once.
    if !harness::works_here(
        &["unshare", "--pid", "--fork", "--mount-proc"],
        "unshare --pid --fork --mount-proc",
    ) {
        return;
    }
    let dir = harness::tempdir();
    let fifo = gate(&dir);
    let mut pty = Pty::open();
    let inner = format!(
        r#"read -r _ < "$FIFO"; echo "reading"; {READ_UNTIL_END}; echo "inner-done"; exit 4"#
    );
    // Inside the pid namespace vloer-run is PID 1, session leader and owner of the terminal
    // (setsid --ctty), as in a container started with -t.
    let script = r#"trap : INT; unshare --pid --fork --mount-proc --kill-child setsid --ctty "$VR" -v -- sh -c "$INNER"; echo "vloer-exit=$?""#;
    let leader = pty.spawn(&["sh", "-c", script], &[("INNER", &inner), ("FIFO", &fifo)]);
    release(&fifo);
    pty.expect("reading");
    pty.send("\x1a");
    pty.expect("nobody could resume it");
    pty.send("end\n");
    pty.expect("inner-done");
    pty.expect("vloer-exit=4");
    // The terminal now belongs to the namespace's session, so the outer sh is only waited for.
    pty.assert_leader_succeeds(leader, "the outer sh");
}

#[test]
fn leading_the_terminals_session_a_ctrl_z_is_discarded_as_for_the_bare_command() {
    // `script -c`, `ssh -t host vloer-run ...`, `docker exec -it`: vloer-run leads the session
    // of its terminal, so its group is orphaned. The kernel discards ^Z for the bare command
    // there, and nobody could continue a vloer-run that stopped itself: the child goes on.
    let dir = harness::tempdir();
    let fifo = gate(&dir);
    let mut pty = Pty::open();
    let inner = format!(
        r#"read -r _ < "$FIFO"; echo "reading"; {READ_UNTIL_END}; echo "inner-done"; exit 4"#
    );
    let leader = pty.spawn(
        &[harness::bin(), "-v", "--", "sh", "-c", &inner],
        &[("FIFO", &fifo)],
    );
    release(&fifo);
    pty.expect("reading");
    pty.send("\x1a");
    pty.expect("nobody could resume, so continuing it");
    pty.send("end\n");
    pty.expect("inner-done");
    let mut leader = leader;
    let status = leader.child.wait().expect("waiting for vloer-run");
    assert_eq!(status.code(), Some(4), "{}", pty.text());
}

#[test]
fn in_the_sessions_orphaned_group_vloer_run_does_not_stop_itself_on_ctrl_z() {
    // `script -c 'sh -c "vloer-run ...; ..."'`: vloer-run and its child share the session
    // leader's group, which is orphaned. The terminal's SIGTSTP reaches vloer-run through its
    // signalfd, where the kernel cannot discard it; vloer-run must not stop itself for it.
    let dir = harness::tempdir();
    let fifo = gate(&dir);
    let mut pty = Pty::open();
    let inner = format!(
        r#"read -r _ < "$FIFO"; echo "reading"; {READ_UNTIL_END}; echo "inner-done"; exit 4"#
    );
    let script = r#""$VR" -v -- sh -c "$INNER"; echo "vloer-exit=$?""#;
    let leader = pty.spawn(&["sh", "-c", script], &[("INNER", &inner), ("FIFO", &fifo)]);
    release(&fifo);
    pty.expect("reading");
    pty.send("\x1a");
    // What vloer-run does with the SIGTSTP it read: the terminal gave it to the group already.
    pty.expect("not forwarded");
    pty.send("end\n");
    pty.expect("inner-done");
    pty.expect("vloer-exit=4");
    assert!(
        !pty.text().contains("stopping vloer-run itself"),
        "{}",
        pty.text()
    );
    pty.assert_leader_succeeds(leader, "the outer sh");
}
