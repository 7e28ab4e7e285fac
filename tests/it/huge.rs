//! Huge and hostile inputs: an argv near ARG_MAX, 10,000 environment variables, a
//! COMMAND path with spaces and bytes that are not UTF-8, and a control socket under a
//! fuzzer-style barrage that must never stop serving.

use crate::harness::{self, path_str, wait_for_pids, wait_until, Finished, Run, Running};
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// ARG_MAX as the C library reports it (the kernel's limit for argv and environment together).
fn arg_max() -> usize {
    let out = std::process::Command::new("getconf")
        .arg("ARG_MAX")
        .output()
        .expect("getconf ARG_MAX");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("ARG_MAX is a number")
}

/// What the kernel charges for an environment: every `NAME=VALUE\0` and a pointer to it.
fn env_cost<'a>(vars: impl Iterator<Item = (&'a OsStr, &'a OsStr)>) -> usize {
    vars.map(|(k, v)| k.len() + 1 + v.len() + 1 + std::mem::size_of::<usize>())
        .sum()
}

/// The shell script a child runs to report how many arguments it got and how many bytes.
const COUNT_ARGS: &str = r#"n=0; for a; do n=$((n + ${#a})); done; echo "$# $n""#;

/// Big arguments that, after the arguments `fixed` and an environment costing `env`, come within
/// 16 KiB of `limit` (ARG_MAX; a little room for the pointers of the big arguments); returns them
/// and how many bytes they hold.
fn near_arg_max(limit: usize, env: usize, fixed: &[&str]) -> (Vec<String>, usize) {
    let fixed_cost: usize = fixed.iter().map(|a| a.len() + 1 + 8).sum();
    let payload = limit - env - fixed_cost - 16 * 1024;
    (big_args(payload), payload)
}

/// The child (`COUNT_ARGS`) got every one of `args`, `payload` bytes in all.
fn assert_all_counted(out: &Finished, args: &[String], payload: usize) {
    assert_eq!(
        out.code(),
        Some(0),
        "status {:?}: {}",
        out.status,
        out.stderr
    );
    assert_eq!(
        out.stdout.trim(),
        format!("{} {payload}", args.len()),
        "stderr: {}",
        out.stderr
    );
}

/// Big arguments (at most 128 KiB each, the kernel's limit for one string) adding up to `total`.
fn big_args(total: usize) -> Vec<String> {
    let mut args = Vec::new();
    let mut left = total;
    let mut i = 0u8;
    while left > 0 {
        let n = left.min(100_000);
        args.push(std::iter::repeat((b'a' + i % 26) as char).take(n).collect());
        left -= n;
        i += 1;
    }
    args
}

#[test]
fn an_argv_near_arg_max_reaches_the_child_whole() {
    let limit = arg_max();
    let env = env_cost(
        std::env::vars_os()
            .collect::<Vec<_>>()
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str())),
    );
    let fixed: Vec<&str> = vec![harness::bin(), "--", "sh", "-c", COUNT_ARGS, "sh"];
    let (args, payload) = near_arg_max(limit, env, &fixed);
    let out = Run::new(
        fixed[1..]
            .iter()
            .map(|s| s.to_string())
            .chain(args.iter().cloned()),
    )
    .finish();
    assert_all_counted(&out, &args, payload);
    assert_eq!(out.verdict()["stopped"], true);
    eprintln!(
        "argv of {payload} bytes in {} arguments; ARG_MAX {limit}, environment {env}",
        args.len()
    );
}

#[test]
fn ten_thousand_environment_variables_reach_the_child() {
    let mut run = Run::new(["--", "env"]);
    for i in 0..10_000 {
        run.cmd.env(format!("HUGE_ENV_{i}"), format!("value {i} ="));
    }
    let out = run.finish();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let ours: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("HUGE_ENV_"))
        .collect();
    assert_eq!(ours.len(), 10_000);
    assert!(ours.contains(&"HUGE_ENV_9999=value 9999 ="));
    assert_eq!(out.verdict()["stopped"], true);
}

/// A folder and a program name with spaces, a byte that is not UTF-8 and a control character.
/// The program is a script (a Rust program would refuse such an argv[0]): `check` exits 0,
/// anything else is a pid file to publish before sleeping.
fn weird_program(dir: &Path) -> (PathBuf, OsString) {
    let folder = dir.join(OsStr::from_bytes(b"dir with spaces \xff\xfe"));
    std::fs::create_dir(&folder).unwrap();
    let name = OsString::from_vec(b"my child \xe9\x01".to_vec());
    let script =
        "#!/bin/sh\n[ \"$1\" = check ] && exit 0\necho $$ > \"$1\"\nwhile :; do sleep 1; done\n";
    let path = folder.join(&name);
    harness::write_file(&path, script, 0o755);
    (folder, name)
}

#[test]
fn a_command_path_with_spaces_and_non_utf8_bytes_runs_and_is_stopped() {
    let dir = harness::tempdir();
    let (folder, name) = weird_program(dir.path());
    let program = folder.join(&name);
    let ready = dir.path().join("ready");
    let sock = dir.path().join("ctl");

    // By path, inspected through the control socket (its comm and command line are not UTF-8
    // either) and stopped.
    let args: Vec<OsString> = vec![
        "--control".into(),
        sock.clone().into(),
        "--".into(),
        program.clone().into(),
        ready.clone().into(),
    ];
    let run = Run::new(&args).start();
    let pid = wait_for_pids(&ready)[0];
    wait_until("the control socket", || sock.exists());
    let status: serde_json::Value =
        serde_json::from_str(&request(&sock, b"{\"op\":\"status\"}\n")).expect("status is JSON");
    let me = status["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        me["comm"].as_str().unwrap().starts_with("my child "),
        "{status}"
    );
    assert!(
        me["cmdline"].as_str().unwrap().contains("dir with spaces "),
        "{status}"
    );
    let client = Run::new(["stop", "--control", &path_str(&sock)]).finish();
    assert_eq!(client.code(), Some(0), "{client}");
    let out = run.finish();
    assert_eq!(out.verdict()["stopped"], true, "{out}");
    // The control stop's own SIGTERM: a plain 143.
    assert_eq!(out.code(), Some(143), "{out}");
    assert!(!harness::alive(pid));

    // Through PATH, by name alone.
    let mut path = folder.clone().into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let mut run = Run::new([OsStr::new("--"), &name, OsStr::new("check")]);
    run.cmd.env("PATH", &path);
    let out = run.finish();
    assert_eq!(out.code(), Some(0), "{out}");

    // A missing one is named in the message, and is 127.
    let missing = folder.join(OsStr::from_bytes(b"no such \xff"));
    let out = Run::new([OsStr::new("--"), missing.as_os_str()]).finish();
    assert_eq!(out.code(), Some(127), "{out}");
    assert!(
        out.messages().iter().any(|m| m.contains("no such")),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// The control socket under a barrage.

/// An instance serving a control socket around a sleeping helper.
struct Instance {
    run: Running,
    sock: PathBuf,
    child: i32,
    _dir: tempfile::TempDir,
}

impl Instance {
    fn start() -> Instance {
        let dir = harness::tempdir();
        let sock = dir.path().join("ctl");
        let ready = dir.path().join("ready");
        let (run, pids) = Run::helper(
            &["--control", &path_str(&sock)],
            &["sleep", &path_str(&ready)],
        )
        .start_until_ready(&ready);
        harness::wait_for_socket(&sock);
        Instance {
            run,
            sock,
            child: pids[0],
            _dir: dir,
        }
    }

    /// An instance that answers a status request, and its descriptors while it serves nobody:
    /// the baseline they must come back to.
    fn start_serving() -> (Instance, usize) {
        let inst = Instance::start();
        inst.assert_serving();
        let baseline = inst.idle_fds();
        (inst, baseline)
    }

    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.run.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// vloer-run's descriptors once it serves nobody (the listening socket is then its only
    /// socket): a served connection is closed a moment after its reply.
    fn idle_fds(&self) -> usize {
        let sockets = || {
            std::fs::read_dir(format!("/proc/{}/fd", self.run.pid()))
                .map(|d| {
                    d.flatten()
                        .filter(|e| {
                            std::fs::read_link(e.path())
                                .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                        })
                        .count()
                })
                .unwrap_or(0)
        };
        wait_until("vloer-run to close its client connections", || {
            sockets() == 1
        });
        self.fds()
    }

    /// A status request must still get a running, unchanged run.
    fn assert_serving(&self) {
        let reply = request(&self.sock, b"{\"op\":\"status\"}\n");
        let v: serde_json::Value =
            serde_json::from_str(&reply).unwrap_or_else(|e| panic!("status reply {reply:?}: {e}"));
        assert_eq!(v["state"], "running", "{v}");
        assert_eq!(v["child"]["pid"], self.child, "{v}");
    }

    /// Waits (bounded) until vloer-run holds `baseline` descriptors again.
    fn assert_fds_back_to(&self, baseline: usize) {
        let deadline = Instant::now() + harness::LIMIT;
        while self.fds() != baseline {
            assert!(
                Instant::now() < deadline,
                "vloer-run holds {} descriptors, {baseline} before",
                self.fds()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stop(self) {
        let client = Run::new(["stop", "--control", &path_str(&self.sock)]).finish();
        assert_eq!(client.code(), Some(0), "{client}");
        let out = self.run.finish();
        assert_eq!(out.verdict()["stopped"], true, "{out}");
    }
}

/// One request on a fresh connection; the reply line (empty when the server just closed).
fn request(sock: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(harness::LIMIT)).unwrap();
    s.write_all(bytes).expect("write");
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .expect("read the reply");
    line
}

/// xorshift64*: reproducible noise without a dependency.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Random bytes, truncated requests of every kind, broken UTF-8, deep nesting, oversized lines:
/// every one gets an error reply or is dropped, nothing starts or stops, and the server is left
/// as it was.
#[test]
fn the_control_socket_survives_random_bytes_and_truncated_json() {
    let (inst, baseline) = Instance::start_serving();
    let seed = 0x5eed_0f7a_11ed_u64;
    let mut noise = Noise(seed);
    let valid: [&[u8]; 4] = [
        br#"{"op":"status"}"#,
        br#"{"op":"stop","grace_ms":100}"#,
        br#"{"op":"exec","argv":["/nonexistent/vloer-fuzz"],"cwd":"/","env":[["A","B"]],"timeout_ms":5}"#,
        br#"{"op":"cancel"}"#,
    ];
    for i in 0..1500 {
        let mut payload = match i % 4 {
            0 => {
                let n = noise.below(2000);
                noise.bytes(n)
            }
            // A strict prefix of a valid request is never valid JSON: a truncated stop never stops.
            1 | 2 => {
                let v = valid[noise.below(valid.len())];
                v[..noise.below(v.len())].to_vec()
            }
            _ => {
                let mut v = valid[0].to_vec();
                let at = noise.below(v.len());
                v.insert(at, 0x80 | noise.next() as u8);
                v
            }
        };
        let newline = noise.below(2) == 0;
        if newline {
            payload.push(b'\n');
        }
        let mut s = UnixStream::connect(&inst.sock).expect("connect");
        s.set_read_timeout(Some(harness::LIMIT)).unwrap();
        s.write_all(&payload).expect("write");
        if !newline {
            // Half of them just hang up, half close their side and wait for the server to.
            if noise.below(2) == 0 {
                continue;
            }
            s.shutdown(std::net::Shutdown::Write).unwrap();
        }
        let mut reply = String::new();
        s.read_to_string(&mut reply)
            .unwrap_or_else(|e| panic!("reading the reply to {payload:?}: {e}"));
        let first_line = payload.split(|b| *b == b'\n').next().unwrap_or_default();
        if newline || payload.contains(&b'\n') {
            let v: serde_json::Value = serde_json::from_str(reply.trim())
                .unwrap_or_else(|e| panic!("reply {reply:?} to {first_line:?}: {e}"));
            assert!(
                v.get("error").is_some() && v.get("code").is_some(),
                "{first_line:?} got {reply}"
            );
        } else {
            assert_eq!(
                reply, "",
                "a request without its newline gets no reply: {payload:?}"
            );
        }
    }
    // Nesting deeper than any parser should recurse, and a line over the size limit.
    for payload in ["[".repeat(50_000) + "\n", "x".repeat(20 << 20)] {
        let mut s = UnixStream::connect(&inst.sock).expect("connect");
        s.set_read_timeout(Some(harness::LIMIT)).unwrap();
        // The server may refuse and close before all of it is written.
        let _ = s.write_all(payload.as_bytes());
        let mut reply = String::new();
        let _ = BufReader::new(s).read_line(&mut reply);
        assert!(
            reply.contains("\"error\""),
            "{} bytes got {reply:?}",
            payload.len()
        );
    }
    inst.assert_serving();
    inst.assert_fds_back_to(baseline);
    inst.stop();
}

/// 10,000 connections opened and dropped at once, then 600 that hold a slot without a word:
/// a status request is still answered, and every descriptor is given back.
#[test]
fn the_control_socket_survives_10k_dropped_and_600_silent_connections() {
    let (inst, baseline) = Instance::start_serving();
    for _ in 0..10_000 {
        drop(UnixStream::connect(&inst.sock).expect("connect"));
    }
    inst.assert_serving();
    inst.assert_fds_back_to(baseline);

    let silent: Vec<UnixStream> = (0..600)
        .map(|_| UnixStream::connect(&inst.sock).expect("connect"))
        .collect();
    let asked = Instant::now();
    inst.assert_serving();
    // Silent clients are dropped after 5 s, so the answer may wait for that, and no longer.
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "status took {:?}",
        asked.elapsed()
    );
    drop(silent);
    inst.assert_fds_back_to(baseline);
    inst.stop();
}

/// A client that sends descriptors with every byte of an endless request: vloer-run must not
/// hoard them (it would run out of descriptors, and then of /proc, which is its proof).
#[test]
fn the_control_socket_does_not_hoard_passed_descriptors() {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let (inst, baseline) = Instance::start_serving();
    let devnull: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
    let fds = [devnull.as_raw_fd(); 3];
    let s = UnixStream::connect(&inst.sock).expect("connect");
    s.set_write_timeout(Some(harness::LIMIT)).unwrap();
    for _ in 0..3000 {
        sendmsg::<()>(
            s.as_raw_fd(),
            &[std::io::IoSlice::new(b" ")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .expect("sendmsg");
    }
    // Everything sent so far has been read once the server answers another client.
    inst.assert_serving();
    let held = inst.fds();
    // At most: the flood's connection and the three descriptors a request may bring, and the
    // status connection, closed a moment after its reply.
    assert!(
        held <= baseline + 5,
        "vloer-run holds {held} descriptors for one client ({baseline} before)"
    );
    drop(s);
    inst.assert_fds_back_to(baseline);
    inst.assert_serving();
    inst.stop();
}

/// `vloer-run exec` carries its argv and environment in the request: one near ARG_MAX, with
/// 10,000 variables, still runs.
#[test]
fn exec_with_a_huge_argv_and_environment_runs() {
    let inst = Instance::start();
    let limit = arg_max();
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    vars.extend((0..10_000).map(|i| {
        (
            OsString::from(format!("HUGE_ENV_{i}")),
            OsString::from(format!("value {i}")),
        )
    }));
    let env = env_cost(vars.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())));
    let sock = path_str(&inst.sock);
    let fixed: Vec<&str> = vec![
        harness::bin(),
        "exec",
        "--control",
        &sock,
        "--",
        "sh",
        "-c",
        COUNT_ARGS,
        "sh",
    ];
    let (args, payload) = near_arg_max(limit, env, &fixed);
    let mut run = Run::new(
        fixed[1..]
            .iter()
            .map(|s| s.to_string())
            .chain(args.iter().cloned()),
    );
    run.cmd.env_clear().envs(vars);
    let out = run.finish();
    assert_all_counted(&out, &args, payload);
    inst.assert_serving();
    inst.stop();
}
