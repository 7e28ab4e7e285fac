//! One pass over every process `/proc` shows: who holds or names a swept folder, and who could
//! not be looked at. Each mount namespace's table is read once per pass.

use super::holds::{Held, Look};
use super::listing::{self, Seen, RELISTS};
use super::mounts::{self, Table};
use super::pass::Pass;
use super::pids::Mark;
use super::proc::{self, Got, Stat};
use super::target::Targets;
use super::{Scan, Sweep};
use crate::slowread;
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

/// Processes whose slow reads go to the reader thread in one hand-over.
const BATCH: usize = 128;

/// As many processes as are read on the scan's own thread, without the link threads.
const FEW: usize = 32;

/// How far up a chroot'ed process's ancestors a whole table of its namespace is looked for.
const ANCESTORS: usize = 8;

pub fn scan(sweep: &Sweep) -> Scan {
    let mut scan = Scan::default();
    let ours = match proc::read("self/mountinfo") {
        Got::Text(t) => Table::parse(&t, Path::new("/")),
        Got::Gone | Got::Denied(_) => {
            scan.error = Some("cannot read /proc/self/mountinfo".into());
            return scan;
        }
    };
    // An answer that cannot see every process proves nothing.
    scan.error = crate::proctable::files::hides_processes();
    let before = Mark::now();
    let mut seen = Seen::default();
    let names = match listing::pids() {
        Ok(n) => seen.news(n),
        Err(why) => {
            scan.error = Some(why);
            return scan;
        }
    };
    let stats = listing::stats_of(&names);
    let skip = own_line(&stats);
    let dirs = sweep.targets(&ours);
    if let Some(why) = &dirs.unknown {
        scan.error.get_or_insert(why.clone());
    }
    let own_ns = proc::link("self/ns/mnt").ok();
    let mut pass = Pass {
        own_start: sweep.own_start,
        scan,
        looks_unsettled: None,
    };
    let mut batch = stats;
    let mut settled = false;
    for _ in 0..RELISTS {
        let looked: Vec<&Stat> = batch
            .iter()
            .filter(|s| !s.kernel_thread && s.is_live())
            .filter(|s| !skip.contains(&s.pid))
            .collect();
        let (linked, others, slow) = inspect(&looked, own_ns.as_ref(), &ours, &dirs);
        // A view of a folder in another namespace is known to the processes looked at after it
        // was read: one looked at before may hold a file through it, so this scan does not count.
        if sweep.mounts.remember(others.values(), &dirs.dirs) {
            pass.looks_unsettled.get_or_insert(
                "a view of a swept folder in another mount namespace was first seen while a \
                 scan looked"
                    .into(),
            );
        }
        for ((stat, linked), (cmdline, maps)) in looked.iter().zip(linked).zip(slow) {
            pass.finish(stat, linked, &ours, &others, &dirs, cmdline, maps);
        }
        // A link is taken at its text when its mount id is in a table read before it: a mount
        // unmounted since frees its id, which a mount made and detached at once may take.
        if let Some(why) = lost_since(&ours, &others) {
            pass.looks_unsettled.get_or_insert(why);
        }
        // What appeared while this pass looked: a process that keeps forking away from its pid
        // is only ever in a listing made after it moved, so the scan follows until a listing
        // shows nothing new. Then every process that held a folder all along was read: the
        // last listing showed it (see `pids`), and it was not new, so it was read while alive.
        // New is by pid and inode (see `listing`): a process on a number already read is new.
        let newer = match listing::pids() {
            Ok(n) => seen.news(n),
            Err(why) => {
                pass.scan.error = Some(why);
                break;
            }
        };
        if newer.is_empty() {
            settled = true;
            break;
        }
        batch = listing::stats_of(&newer);
    }
    pass.scan.unsettled =
        listing::unsettled(settled, before, Mark::now()).or(pass.looks_unsettled.take());
    pass.scan
}

/// Why a mount of `ours` or of `others` (each read again from the process that showed it) may
/// no longer be the one its id named when the table was read, when one may: it is gone or
/// another now. A table that cannot be read again (its process ended) is not asked.
fn lost_since(ours: &Table, others: &Others) -> Option<String> {
    let again = |from: Option<i32>| -> Option<Vec<u8>> {
        let name = match from {
            None => "self/mountinfo".to_string(),
            Some(pid) => format!("{pid}/mountinfo"),
        };
        proc::read(&name).ok()
    };
    let lost = |table: &Table, base: &Path| {
        again(table.from)
            .is_some_and(|text| text != table.text && table.lost_since(&Table::parse(&text, base)))
    };
    let theirs = others.iter().any(|((_, root), t)| lost(t, root));
    (lost(ours, Path::new("/")) || theirs).then(|| {
        "a mount was unmounted while a scan looked: its id may have passed to another mount, so \
         a link on it proves nothing"
            .into()
    })
}

/// The links of `looked` on two threads of their own (they are most of a pass's work, nearly all
/// of it in the kernel) while this one has the reader thread read command lines and maps.
fn inspect(
    looked: &[&Stat],
    own_ns: Option<&Vec<u8>>,
    ours: &Table,
    dirs: &Targets,
) -> (Vec<Linked>, Others, Vec<Slow>) {
    if looked.len() <= FEW {
        // A few processes that appeared while the scan looked: read at once, on this thread,
        // links first (a process that keeps forking away from its pid lives for microseconds).
        let (linked, others) = link_pass(looked, own_ns, ours, dirs);
        let slow = looked.chunks(BATCH).flat_map(slow_reads).collect();
        return (linked, others, slow);
    }
    let half = looked.len().div_ceil(2);
    // A thread that cannot be made (a fork storm at the pids limit) leaves its part to the
    // end, on this thread.
    std::thread::scope(|s| {
        let pass = |part| link_pass(part, own_ns, ours, dirs);
        let parts: Vec<_> = looked
            .chunks(half.max(1))
            .map(|part| {
                (
                    part,
                    std::thread::Builder::new().spawn_scoped(s, move || pass(part)),
                )
            })
            .collect();
        let slow: Vec<Slow> = looked.chunks(BATCH).flat_map(slow_reads).collect();
        let (mut linked, mut others) = (Vec::new(), Others::new());
        for (part, thread) in parts {
            let (l, o) = match thread {
                Ok(t) => t.join().expect("the link pass does not panic"),
                Err(_) => pass(part),
            };
            linked.extend(l);
            others.extend(o);
        }
        (linked, others, slow)
    })
}

/// vloer-run and its ancestors (the caller waiting for it): never matches.
fn own_line(stats: &[Stat]) -> HashSet<Pid> {
    let parent: HashMap<Pid, Pid> = stats.iter().map(|s| (s.pid, s.ppid)).collect();
    let mut line = HashSet::new();
    let mut at = crate::sys::own_pid();
    while at.as_raw() > 0 && line.insert(at) {
        match parent.get(&at) {
            Some(p) => at = *p,
            None => break,
        }
    }
    line
}

type Slow = (Got<Vec<u8>>, Got<Vec<u8>>);

/// Each process's command line and maps, read on the reader thread: both take the process's
/// memory lock, which a process stuck in a fault on a hung filesystem can hold for good. A read
/// that does not answer in time fails alone: the batch goes on after it.
fn slow_reads(batch: &[&Stat]) -> Vec<Slow> {
    let names: Vec<String> = batch
        .iter()
        .flat_map(|s| [format!("{}/cmdline", s.pid), format!("{}/maps", s.pid)])
        .collect();
    let mut results: Vec<io::Result<Vec<u8>>> = Vec::with_capacity(names.len());
    while results.len() < names.len() {
        let reads = names[results.len()..]
            .iter()
            .map(|n| {
                let n = n.clone();
                Box::new(move || crate::proctable::files::read_file(&n)) as slowread::Read
            })
            .collect();
        let got = slowread::read_all(reads);
        let late = got.iter().position(|r| {
            r.as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::TimedOut)
        });
        match late {
            Some(i) => results.extend(got.into_iter().take(i + 1)),
            None => results.extend(got),
        }
    }
    let mut it = names.iter().zip(results).map(|(n, r)| proc::got(n, r));
    batch
        .iter()
        .map(|_| (it.next().expect("a cmdline"), it.next().expect("a map")))
        .collect()
}

/// Other namespaces' tables, by namespace and the root they were read from (None: unreadable).
pub(super) type Others = HashMap<(Vec<u8>, PathBuf), Table>;

/// What the link pass learned of one process.
pub(super) struct Linked {
    /// Its namespace and root when its namespace is not ours.
    pub key: Option<(Vec<u8>, PathBuf)>,
    pub root: Option<mounts::Link>,
    pub cwd: Option<PathBuf>,
    pub held: Held,
    pub denied: Option<String>,
    /// Its links could not be looked at at all.
    pub unseen: bool,
    /// Its uids, read through the folder its links were read through: what it held stays a
    /// finding even when it has exited by the time the scan records it (a process that keeps
    /// forking away from its pid is gone a moment after it is read).
    pub own: Option<[u32; 3]>,
    /// The stat read through that folder when it is another process's than the stat the look
    /// began with (the pid was reused in between): the process whose links these are.
    pub other: Option<Stat>,
}

fn link_pass(
    looked: &[&Stat],
    own_ns: Option<&Vec<u8>>,
    ours: &Table,
    dirs: &Targets,
) -> (Vec<Linked>, Others) {
    let mut others = Others::new();
    let linked = looked
        .iter()
        .map(|stat| {
            let pid = stat.pid;
            let mut denied = None;
            let unseen = |denied| Linked {
                key: None,
                root: None,
                cwd: None,
                held: Held::default(),
                denied,
                unseen: true,
                own: None,
                other: None,
            };
            let Some(dir) = take(proc::Dir::open(pid), &mut denied) else {
                return unseen(denied);
            };
            let live = live_thread(&dir);
            let at = live.as_ref().unwrap_or(&dir);
            let ns = take(at.link("ns/mnt"), &mut denied);
            let root = take(at.link("root"), &mut denied).and_then(|t| mounts::link_path(&t));
            let judged_in = ns.clone();
            let (key, table) = match (ns, &root) {
                (Some(ns), Some(root)) if Some(&ns) != own_ns => {
                    // A process chroot'ed in a namespace of its own is shown only the mounts
                    // below its root: the whole table, where another process showed it, places
                    // what it holds outside.
                    let whole = (ns.clone(), PathBuf::from("/"));
                    let chrooted = root.path != Path::new("/");
                    if chrooted && !others.contains_key(&whole) {
                        if let Some(t) = shown_whole(&ns, stat.ppid) {
                            others.insert(whole.clone(), t);
                        }
                    }
                    let key = match chrooted && others.contains_key(&whole) {
                        true => whole,
                        false => (ns, root.path.clone()),
                    };
                    if !others.contains_key(&key) {
                        match at.read("mountinfo") {
                            Got::Text(text) => {
                                others
                                    .insert(key.clone(), Table::parse(&text, root).read_from(pid));
                            }
                            // Its namespaces are dropped after its files and working directory
                            // (`exit_task_namespaces` follows `exit_files` and `exit_fs` in the
                            // kernel's do_exit): a process that lost them while we looked, with
                            // no live thread left, holds nothing any more.
                            _ if matches!(at.link("ns/mnt"), Got::Gone)
                                && live_thread(&dir).is_none() => {}
                            _ => {
                                denied
                                    .get_or_insert(format!("/proc/{pid}/mountinfo: not readable"));
                                return unseen(denied);
                            }
                        }
                    }
                    match others.get(&key) {
                        Some(t) => (Some(key), t),
                        None => (None, ours),
                    }
                }
                _ => (None, ours),
            };
            let look = Look {
                pid,
                ns: judged_in,
                table,
                ours,
                dirs,
                root: root.clone(),
            };
            let (mut held, cwd) = look.links(&dir);
            // Whatever the thread count in the stat read before: a process that had one thread
            // then may have more now, one of them with a file table of its own.
            look.threads(&dir, stat.state == 'Z', &mut held);
            // Only for a process its links found in a folder, after them (a short-lived one may
            // be gone before): its stat and status stay readable while it is a zombie. The folder
            // answers for the process it was opened for, which is another than the one the stat
            // was read for when the pid was reused in between: then the finding is that one's.
            let now = (!held.what.is_empty())
                .then(|| dir.read("stat").ok().and_then(|b| proc::stat(&b)))
                .flatten();
            let own = now
                .as_ref()
                .and_then(|_| dir.read("status").ok().and_then(|t| proc::uids_in(&t)));
            Linked {
                key,
                root,
                cwd,
                held,
                denied,
                unseen: false,
                own,
                other: now.filter(|n| n.starttime != stat.starttime),
            }
        })
        .collect();
    (linked, others)
}

/// The whole mount table of namespace `ns`, from the nearest of the ancestors from `pid` on
/// that are in it with its root as theirs (a chroot'ed daemon's parent, a container's shell).
fn shown_whole(ns: &[u8], mut pid: Pid) -> Option<Table> {
    for _ in 0..ANCESTORS {
        // Read through its folder: a pid reused meanwhile cannot answer for it.
        let dir = proc::Dir::open(pid).ok()?;
        if pid.as_raw() <= 0 || dir.link("ns/mnt").ok()? != ns {
            return None;
        }
        if dir.link("root").ok()? == b"/" {
            let text = dir.read("mountinfo").ok()?;
            return Some(Table::parse(&text, Path::new("/")).read_from(pid));
        }
        pid = dir.read("stat").ok().and_then(|b| proc::stat(&b))?.ppid;
    }
    None
}

/// Where the main thread already exited (and with it dropped its namespaces) while others run,
/// one of those: its mount namespace and root are the ones the process's links are to be read in.
fn live_thread(dir: &proc::Dir) -> Option<proc::Dir> {
    if !matches!(dir.link("ns/mnt"), Got::Gone) {
        return None;
    }
    dir.tasks()
        .ok()?
        .into_iter()
        .filter_map(|(tid, _)| dir.task(tid).ok())
        .find(|task| task.link("ns/mnt").ok().is_some())
}

/// What a read gave, keeping the first reason one was denied.
fn take<T>(got: Got<T>, denied: &mut Option<String>) -> Option<T> {
    match got {
        Got::Text(t) => Some(t),
        Got::Gone => None,
        Got::Denied(why) => {
            denied.get_or_insert(why);
            None
        }
    }
}
