//! Reads of the /proc files that take the target's memory-map lock (`cmdline`, `environ`),
//! bounded in time. Such a read can block for as long as another task holds that lock (the
//! reason a `ps` hangs), and vloer-run's one loop must never wait on it.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// How long one read may take before it counts as unreadable.
const LIMIT: Duration = Duration::from_millis(200);

/// Readers stuck in the kernel at once, at most; past that a read fails at once.
const MAX_STUCK: usize = 4;

/// One read, done on the reader thread.
pub type Read = Box<dyn FnOnce() -> io::Result<Vec<u8>> + Send>;

/// Reads to do in order, where each result goes (one message per read), and the CPU the caller
/// waits on.
type Job = (Vec<Read>, mpsc::Sender<io::Result<Vec<u8>>>, Option<usize>);

/// The reader thread's queue, started on first use. A reader that did not answer in time is
/// left to finish on its own and replaced.
static QUEUE: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);
static STUCK: AtomicUsize = AtomicUsize::new(0);

/// Does `read`, or fails with `TimedOut` after `LIMIT`.
pub fn read(read: Read) -> io::Result<Vec<u8>> {
    read_all(vec![read])
        .pop()
        .unwrap_or_else(|| Err(io::Error::other("no answer")))
}

/// Does each of `reads`, in one hand-over to the reader thread (a `status` of a large tree would
/// otherwise wake it once per process). Each read has `LIMIT`; once one is late, the rest fail
/// with it.
pub fn read_all(reads: Vec<Read>) -> Vec<io::Result<Vec<u8>>> {
    let n = reads.len();
    let mut results = Vec::with_capacity(n);
    if n == 0 {
        return results;
    }
    let fail_rest = |results: &mut Vec<io::Result<Vec<u8>>>, kind: io::ErrorKind, why: &str| {
        while results.len() < n {
            results.push(Err(io::Error::new(kind, why.to_string())));
        }
    };
    let (tx, rx) = mpsc::channel();
    let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
    if queue.is_none() {
        if STUCK.load(Ordering::Relaxed) >= MAX_STUCK {
            let why = "earlier reads of /proc are still blocked";
            fail_rest(&mut results, io::ErrorKind::TimedOut, why);
            return results;
        }
        match start_reader() {
            Ok(q) => *queue = Some(q),
            Err(e) => {
                fail_rest(&mut results, e.kind(), &e.to_string());
                return results;
            }
        }
    }
    let cpu = crate::sys::current_cpu();
    let sent = queue
        .as_ref()
        .is_some_and(|q| q.send((reads, tx, cpu)).is_ok());
    if !sent {
        *queue = None;
        fail_rest(
            &mut results,
            io::ErrorKind::Other,
            "the /proc reader thread is gone",
        );
        return results;
    }
    while results.len() < n {
        match rx.recv_timeout(LIMIT) {
            Ok(result) => results.push(result),
            Err(_) => {
                // It still owns the job and ends after it; the next read gets a new reader.
                *queue = None;
                STUCK.fetch_add(1, Ordering::Relaxed);
                let why = format!("no answer within {} ms", LIMIT.as_millis());
                fail_rest(&mut results, io::ErrorKind::TimedOut, &why);
            }
        }
    }
    results
}

fn start_reader() -> io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel::<Job>();
    // Signals stay blocked in this thread too, so they all reach the signalfd of the main loop.
    let builder = std::thread::Builder::new()
        .name("proc-reader".into())
        .stack_size(64 * 1024);
    crate::sys::spawn_thread(builder, move || {
        let mut on = None;
        for (reads, reply, cpu) in rx {
            // The caller sleeps while we read, so its CPU is free: the next wake-up lands there,
            // not on an idle CPU, which a VM takes tens of microseconds to wake (36 µs measured
            // against 3 µs on one CPU). Only where our CPU differs from the caller's, and at no
            // cost to correctness when it fails (a CPU outside a changed cpuset).
            if cpu.is_some() && cpu != on && cpu.is_some_and(|c| crate::sys::run_on_cpu(c).is_ok())
            {
                on = cpu;
            }
            for read in reads {
                let result = read();
                // Only a caller that gave up waiting drops its end, and it counted us stuck:
                // we are free again, but a new reader has taken our place, so end.
                if reply.send(result).is_err() {
                    STUCK.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    })?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_batch_answers_in_order_and_a_stuck_read_fails_the_rest_in_time() {
        let dir = std::env::temp_dir().join(format!("vloer-slowread-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Opening a FIFO for reading blocks until a writer comes, as a read of a process whose
        // memory-map lock is held blocks until it is released.
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "first").unwrap();
        std::fs::write(&b, "second").unwrap();
        let path = |p: &std::path::Path| -> Read {
            let p = p.to_path_buf();
            Box::new(move || std::fs::read(p))
        };

        let got = read_all(vec![path(&b), path(&a)]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].as_ref().unwrap(), b"second");
        assert_eq!(got[1].as_ref().unwrap(), b"first");

        let started = Instant::now();
        let got = read_all(vec![path(&a), path(&fifo), path(&b)]);
        let took = started.elapsed();
        assert_eq!(got[0].as_ref().unwrap(), b"first");
        for late in &got[1..] {
            assert_eq!(late.as_ref().unwrap_err().kind(), io::ErrorKind::TimedOut);
        }
        assert!(took >= LIMIT && took < LIMIT * 10, "{took:?}");

        // A new reader serves the next batch.
        assert_eq!(read_all(vec![path(&a)])[0].as_ref().unwrap(), b"first");
        // Let the stuck reader go: a writer's open completes its open, and it ends.
        let _writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        drop(_writer);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
