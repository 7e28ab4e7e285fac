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

type Job = (String, mpsc::Sender<io::Result<Vec<u8>>>);

/// The reader thread's queue, started on first use. A reader that did not answer in time is
/// left to finish on its own and replaced.
static QUEUE: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);
static STUCK: AtomicUsize = AtomicUsize::new(0);

/// Reads `path` whole, or fails with `TimedOut` after `LIMIT`.
pub fn read(path: String) -> io::Result<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
    if queue.is_none() {
        if STUCK.load(Ordering::Relaxed) >= MAX_STUCK {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "earlier reads of /proc are still blocked",
            ));
        }
        *queue = Some(start_reader()?);
    }
    let sent = queue.as_ref().is_some_and(|q| q.send((path, tx)).is_ok());
    if !sent {
        *queue = None;
        return Err(io::Error::other("the /proc reader thread is gone"));
    }
    match rx.recv_timeout(LIMIT) {
        Ok(result) => result,
        Err(_) => {
            // It still owns the job and ends after it; the next read gets a new reader.
            *queue = None;
            STUCK.fetch_add(1, Ordering::Relaxed);
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer within {} ms", LIMIT.as_millis()),
            ))
        }
    }
}

fn start_reader() -> io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel::<Job>();
    // Signals stay blocked in this thread too (it inherits the mask), so they all reach the
    // signalfd of the main loop.
    std::thread::Builder::new()
        .name("proc-reader".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            for (path, reply) in rx {
                let result = crate::proctable::read_proc_file(&path);
                // Only a caller that gave up waiting drops its end, and it counted us stuck: we
                // are free again, but a new reader has taken our place, so end.
                if reply.send(result).is_err() {
                    STUCK.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            }
        })?;
    Ok(tx)
}
