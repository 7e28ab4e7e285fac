//! The only other program in the empty root of scripts/static-check.sh, built static with rustc
//! alone (no crates). Run with no argument: prints its parent's pid (1 when vloer-run is PID 1),
//! starts two children that ignore SIGTERM (one in a session of its own), waits until both do,
//! prints "ready" and exits 7, leaving both to vloer-run. `static-helper stubborn [setsid]` is
//! such a child.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

extern "C" {
    fn signal(sig: i32, handler: usize) -> usize;
    fn setsid() -> i32;
    fn getppid() -> i32;
}

const SIGTERM: i32 = 15;
const SIG_IGN: usize = 1;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("stubborn") {
        // SAFETY: plain libc calls with valid arguments; no handler code runs.
        unsafe {
            signal(SIGTERM, SIG_IGN);
            if args.get(2).map(String::as_str) == Some("setsid") {
                setsid();
            }
        }
        // Tell the parent that SIGTERM is ignored now.
        let mut out = std::io::stdout();
        let _ = writeln!(out, "stubborn");
        let _ = out.flush();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    // SAFETY: getppid cannot fail.
    println!("ppid={}", unsafe { getppid() });
    for extra in [&[][..], &["setsid"][..]] {
        let mut child = Command::new(&args[0]).arg("stubborn").args(extra).stdout(Stdio::piped()).spawn().expect("spawning a stubborn child");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("reading the child's ready line");
        assert_eq!(line.trim(), "stubborn");
    }
    println!("ready");
    std::process::exit(7);
}
