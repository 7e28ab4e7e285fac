//! Reads of the /proc files that take the target's memory-map lock (`cmdline`, `environ`),
//! bounded in time. Such a read can block for as long as another task holds that lock (the
//! reason a `ps` hangs), and vloer-run's one loop must never wait on it.
//!
//! The reader thread is kept on the CPU of the loop that waits for it, and the loop yields that
//! CPU to it rather than sleeping at first: a sleeping loop is woken on whichever CPU is idle,
//! and waking an idle CPU costs tens of microseconds on a VM (36 µs measured here, against 2 µs
//! for the hand-over on one CPU).

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one read may take before it counts as unreadable.
const LIMIT: Duration = Duration::from_millis(200);

/// How long the loop yields its CPU to the reader before it sleeps instead: enough for a status
/// of a few hundred processes; a reader stuck in the kernel costs at most this in busy waiting.
const SPIN: Duration = Duration::from_micros(500);

/// Readers stuck in the kernel at once, at most; past that a read fails at once.
const MAX_STUCK: usize = 4;

/// One read, done on the reader thread.
pub type Read = Box<dyn FnOnce() -> io::Result<Vec<u8>> + Send>;

/// What the loop and one reader thread share.
#[derive(Default)]
struct Shared {
    slot: Mutex<Slot>,
    /// The reader sleeps here until a batch comes.
    work: Condvar,
    /// The loop sleeps here once it stopped yielding.
    done: Condvar,
    /// Results written for the current batch, read without the lock while yielding.
    ready: AtomicUsize,
}

#[derive(Default)]
struct Slot {
    reads: Vec<Read>,
    results: Vec<io::Result<Vec<u8>>>,
    /// The loop gave up on this reader: it ends after the read it is stuck in.
    abandoned: bool,
}

/// The reader thread, and the CPU it is kept on.
struct Reader {
    shared: Arc<Shared>,
    thread: JoinHandle<()>,
    on: Option<usize>,
}

/// Started on first use. A reader that did not answer in time is left to finish on its own and
/// replaced.
static READER: Mutex<Option<Reader>> = Mutex::new(None);
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
    if n == 0 {
        return Vec::new();
    }
    let fail = |mut results: Vec<io::Result<Vec<u8>>>, kind: io::ErrorKind, why: &str| {
        while results.len() < n {
            results.push(Err(io::Error::new(kind, why.to_string())));
        }
        results
    };
    let mut reader = lock(&READER);
    if reader.is_none() {
        if STUCK.load(Ordering::Relaxed) >= MAX_STUCK {
            let why = "earlier reads of /proc are still blocked";
            return fail(Vec::new(), io::ErrorKind::TimedOut, why);
        }
        match start_reader() {
            Ok(r) => *reader = Some(r),
            Err(e) => return fail(Vec::new(), e.kind(), &e.to_string()),
        }
    }
    let r = reader.as_mut().expect("a reader");
    // Where the loop runs now, the reader wakes: no other CPU needs waking.
    let cpu = crate::sys::current_cpu();
    if cpu.is_some() && cpu != r.on {
        r.on = cpu.filter(|c| crate::sys::pin_thread(&r.thread, *c).is_ok());
    }
    let shared = Arc::clone(&r.shared);
    {
        let mut slot = lock(&shared.slot);
        slot.reads = reads;
        slot.results.clear();
        shared.ready.store(0, Ordering::Release);
    }
    shared.work.notify_one();
    if wait(&shared, n) {
        return std::mem::take(&mut lock(&shared.slot).results);
    }
    // It still does the late read, and ends after it; the next batch gets a new reader.
    let late = {
        let mut slot = lock(&shared.slot);
        if slot.results.len() == n {
            // Done after all, in the moment since the last look.
            return std::mem::take(&mut slot.results);
        }
        slot.abandoned = true;
        std::mem::take(&mut slot.results)
    };
    *reader = None;
    STUCK.fetch_add(1, Ordering::Relaxed);
    let why = format!("no answer within {} ms", LIMIT.as_millis());
    fail(late, io::ErrorKind::TimedOut, &why)
}

/// Waits until the batch of `n` is done (true), or a read took longer than `LIMIT` (false):
/// yielding the CPU for up to `SPIN`, then asleep.
fn wait(shared: &Shared, n: usize) -> bool {
    let start = Instant::now();
    let (mut got, mut since) = (0, start);
    loop {
        let ready = shared.ready.load(Ordering::Acquire);
        if ready == n {
            return true;
        }
        let now = Instant::now();
        if ready > got {
            (got, since) = (ready, now);
        }
        let deadline = since + LIMIT;
        if now >= deadline {
            return false;
        }
        if now < start + SPIN {
            std::thread::yield_now();
            continue;
        }
        let slot = lock(&shared.slot);
        // Checked under the lock the reader writes under: its notice cannot come in between.
        if shared.ready.load(Ordering::Acquire) != n {
            let _ = shared.done.wait_timeout(slot, deadline - now);
        }
    }
}

fn start_reader() -> io::Result<Reader> {
    let shared = Arc::new(Shared::default());
    let theirs = Arc::clone(&shared);
    // Signals stay blocked in this thread too, so they all reach the signalfd of the main loop.
    let builder = std::thread::Builder::new()
        .name("proc-reader".into())
        .stack_size(64 * 1024);
    let thread = crate::sys::spawn_thread(builder, move || serve(&theirs))?;
    Ok(Reader {
        shared,
        thread,
        on: None,
    })
}

/// The reader thread: each batch in order, each result as soon as it is read.
fn serve(shared: &Shared) {
    loop {
        let reads = {
            let mut slot = lock(&shared.slot);
            while slot.reads.is_empty() {
                slot = shared.work.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::take(&mut slot.reads)
        };
        for read in reads {
            let result = read();
            let mut slot = lock(&shared.slot);
            // The loop gave up waiting and counted us stuck: we are free again, but a new reader
            // has taken our place, so end.
            if slot.abandoned {
                STUCK.fetch_sub(1, Ordering::Relaxed);
                return;
            }
            slot.results.push(result);
            shared.ready.store(slot.results.len(), Ordering::Release);
        }
        shared.done.notify_one();
    }
}

/// A lock that a panic elsewhere does not make unusable: the data stays consistent under it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
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
        // The reader is kept on one CPU, the one its caller ran on.
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            let mut readers = 0;
            for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if comm.trim() != "proc-reader" {
                    continue;
                }
                readers += 1;
                let status = std::fs::read_to_string(task.path().join("status")).unwrap();
                let list = status
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .unwrap_or_default()
                    .trim();
                assert!(
                    list.parse::<usize>().is_ok(),
                    "a reader may run on {list:?}"
                );
            }
            assert!(readers > 0);
        } else {
            eprintln!("skipped: one CPU, nothing to keep the reader on");
        }

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
