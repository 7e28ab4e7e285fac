//! The folder sweep within a stop: the processes that hold or name a swept folder, inside the
//! run or not, get the tree's protocol when the run may stop them (started during it, ours to
//! signal), and the sweep is clean once two scans in a row find nothing.

use crate::proctable::{self, Handle, Proc};
use crate::scope::Scope;
use crate::signal::Sig;
use crate::sweep::{Found, Report, Scan, Started, Sweep};
use crate::sys;
use nix::unistd::Pid;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// How often the sweep scans again while a match it signalled may still be alive: they are not
/// the run's children, so no exit of theirs wakes it.
const TICK: Duration = Duration::from_millis(20);

/// Scans in a row that must find nothing before the sweep is clean.
const CLEAN_SCANS: u32 = 2;

/// The sweep of one stop.
pub struct SweepStop {
    sweep: Sweep,
    stop_signal: Sig,
    /// Until then matches get the stop signal, then SIGKILL until `kill_end`; then it gives up.
    grace_end: Instant,
    kill_end: Instant,
    /// Over: clean, given up, or nothing left that it may stop.
    done: bool,
    /// A match it signalled may still be alive: it scans again at every tick.
    waiting: bool,
    /// The run's own stop is over: only scans after that count for the proof, as until then
    /// the tree's processes (a TERM trap, say) may still start a process in the folder.
    after_tree: bool,
    /// The matches signalled in this phase, by identity, and whether that was the SIGKILL.
    signalled: HashMap<Pid, (Handle, bool)>,
    /// The run's own scope: its stop signals the matches that are its members (never twice).
    scope: Scope,
    /// vloer-run's control clients: they and the processes waiting for them are never matches (a
    /// `vloer-run stop` names the socket, which may lie in the folder).
    clients: Vec<Pid>,
    /// Scans in a row that found nothing.
    clean: u32,
    last: Scan,
    /// The latest reason a scan of this stop gave for not having seen every process: the
    /// verdict's error when the stop ends unproven with the last scan settled.
    unsettled: Option<String>,
    report: Report,
    sent: BTreeMap<Sig, u64>,
    errors: Vec<String>,
}

/// What the sweep leaves for the verdict.
pub struct SweepOutcome {
    pub clean: bool,
    /// The matches still alive at the end.
    pub survivors: Vec<Proc>,
    pub report: Report,
    pub sent: BTreeMap<Sig, u64>,
    pub error: Option<String>,
}

impl SweepStop {
    /// Starts the sweep at the stop's step 1: scans, and signals what it may stop outside the
    /// run's own `scope`. `clients`: see `exempt`.
    pub fn begin(
        sweep: Sweep,
        scope: Scope,
        stop_signal: Sig,
        (grace, kill_timeout): (Duration, Duration),
        clients: Vec<Pid>,
        now: Instant,
    ) -> SweepStop {
        let report = Report::new(&sweep);
        let mut s = SweepStop {
            sweep,
            stop_signal,
            grace_end: now + grace,
            kill_end: now + grace + kill_timeout,
            done: false,
            waiting: false,
            after_tree: false,
            signalled: HashMap::new(),
            scope,
            clients: Vec::new(),
            clean: 0,
            last: Scan::default(),
            unsettled: None,
            report,
            sent: BTreeMap::new(),
            errors: Vec::new(),
        };
        s.clients = clients;
        s.step(now);
        s
    }

    /// Over: proven, given up, or with nothing left that it may stop; never before the run's
    /// own stop is.
    pub fn is_done(&self) -> bool {
        self.done && self.after_tree
    }

    /// The next moment the sweep must scan without an event: while a match it signalled may
    /// still be alive (no exit of theirs wakes the run), or while processes come and go too
    /// fast for a scan to see them all. Otherwise it waits for the run's own stop to end (see
    /// `tree_done`).
    pub fn deadline(&self) -> Option<Instant> {
        (!self.done && self.waiting).then(|| self.kill_end.min(Instant::now() + TICK))
    }

    /// The control clients connected now: see `clients`.
    pub fn set_clients(&mut self, clients: Vec<Pid>) {
        self.clients = clients;
    }

    /// The run's own stop is over: from now on a clean scan counts for the proof (until now the
    /// tree's processes, a TERM trap say, could still start one in the folder).
    pub fn tree_done(&mut self, now: Instant) {
        if std::mem::replace(&mut self.after_tree, true) || self.done {
            return;
        }
        self.step(now);
    }

    /// Time passed: scan, signal, give up after the kill timeout.
    pub fn progress(&mut self, now: Instant) {
        if self.done || !self.waiting {
            return;
        }
        if now >= self.kill_end {
            self.waiting = false;
            self.done = self.after_tree;
            return;
        }
        self.step(now);
    }

    /// One scan, without vloer-run's clients and those waiting for them.
    fn scan(&self) -> Scan {
        let mut scan = self.sweep.scan();
        // Read after the scan: a process that waits now for a client waited while it looked.
        let exempt: HashSet<Pid> = self
            .clients
            .iter()
            .flat_map(|&c| super::callers::of(c))
            .collect();
        scan.found.retain(|f| !exempt.contains(&f.pid));
        scan.unverified.retain(|u| !exempt.contains(&u.pid));
        scan
    }

    /// Scans and signals the new matches it may stop. The proof is two clean scans in a row, the
    /// last after the run's own stop: a sweep with nothing to find scans once at the stop's
    /// start and once after the tree is done, and a second time at once only when the first
    /// found something. It also ends once nothing it found is its to stop (waiting would change
    /// nothing; the verdict names what is left).
    fn step(&mut self, now: Instant) {
        let kill = now >= self.grace_end;
        loop {
            let scan = self.scan();
            self.report.add(&scan);
            let lingering = self.lingering(kill);
            let clean = scan.clean(self.sweep.strict) && lingering == 0;
            self.clean = if clean { self.clean + 1 } else { 0 };
            let stoppable: Vec<Found> = scan.to_signal().cloned().collect();
            let error = scan.error.clone();
            // Processes came and went too fast for this scan: the next one may see them all.
            let unsettled = scan.unsettled.is_some();
            if unsettled {
                self.unsettled.clone_from(&scan.unsettled);
            }
            self.last = scan;
            if let Some(e) = error {
                self.errors.push(e);
                self.waiting = false;
                self.done = true;
                return;
            }
            if clean {
                self.waiting = false;
                if !self.after_tree {
                    return;
                }
                if self.clean >= CLEAN_SCANS {
                    self.done = true;
                    return;
                }
                continue;
            }
            // One that held a folder, or could not be looked at, and is gone since: the next
            // scan may be clean (one that was exiting while this one looked, say).
            let mut waiting = lingering > 0 || self.last.ended();
            for f in &stoppable {
                waiting |= self.stop_one(f, kill);
            }
            self.waiting = waiting || unsettled;
            if !self.waiting && self.after_tree {
                self.done = true;
            }
            return;
        }
    }

    /// How many matches it signalled are still alive, whether a scan finds them or not: one that
    /// ignores the stop signal and leaves the folder for a moment may come back to it, so it
    /// keeps the sweep from being clean, and gets SIGKILL once `kill` like one still found.
    fn lingering(&mut self, kill: bool) -> usize {
        self.signalled.retain(|_, (h, _)| !h.exited());
        if kill {
            for (h, killed) in self.signalled.values_mut().filter(|(_, k)| !*k) {
                let Ok(Some(p)) = proctable::read(h.pid) else {
                    continue;
                };
                let why = ", which worked in a swept folder and is still alive";
                if p.starttime == h.starttime
                    && super::deliver::send(h, &p, Sig::KILL, &mut self.sent, why).is_ok()
                {
                    *killed = true;
                }
            }
        }
        self.signalled.len()
    }

    /// Signals `f` (SIGKILL once `kill`) unless the run's own stop covers it or it got that
    /// signal already; whether the sweep should scan again for it. A match already gone asks for
    /// that too: one that forks away from its pid leaves its child in the folder.
    fn stop_one(&mut self, f: &Found, kill: bool) -> bool {
        if let Some((h, killed)) = self.signalled.get(&f.pid) {
            if h.starttime == f.starttime && (*killed || !kill) {
                return true;
            }
        }
        let Ok(Some(p)) = proctable::read(f.pid) else {
            return true;
        };
        if p.starttime != f.starttime || !p.is_live() || self.covered(&p) {
            return true;
        }
        let handle = match Handle::open(&p, |q| q.is_live()) {
            Ok(Some((h, _))) => h,
            Ok(None) => return true,
            Err(e) => {
                self.errors.push(e);
                return false;
            }
        };
        let sig = if kill { Sig::KILL } else { self.stop_signal };
        let why = ", which works in a swept folder";
        match super::deliver::send(&handle, &p, sig, &mut self.sent, why) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return true,
            Err(e) => {
                let msg = format!("could not send {sig} to pid {} ({}): {e}", p.pid, p.comm);
                if !self.errors.contains(&msg) {
                    self.errors.push(msg);
                }
                return sig != Sig::KILL;
            }
        }
        self.signalled.insert(f.pid, (handle, kill));
        true
    }

    /// Step 4 for the sweep: clean only after scans in a row found nothing; the matches the
    /// last scan found that are still alive are survivors.
    pub fn finish(mut self) -> SweepOutcome {
        let proven = self.clean >= CLEAN_SCANS && self.after_tree;
        if !proven && self.errors.is_empty() {
            // Ended by its deadline, with nothing it could stop, or before the run's own stop
            // was over: look once more, so that the verdict shows the folder as it is now.
            let scan = self.scan();
            self.report.add(&scan);
            self.errors.extend(scan.error.clone());
            self.last = scan;
        }
        let lingering = self.lingering(false);
        let mut survivors: Vec<Proc> = self
            .last
            .found
            .iter()
            .filter_map(|f| alive(f.pid, f.starttime))
            .collect();
        for h in self.signalled.values().map(|(h, _)| h) {
            if !survivors.iter().any(|p| p.pid == h.pid) {
                survivors.extend(alive(h.pid, h.starttime));
            }
        }
        let strict = self.sweep.strict;
        let quiet = self.last.found.is_empty()
            && (self.last.unverified.iter()).all(|u| !strict && u.started == Started::Before);
        if !proven && self.errors.is_empty() && survivors.is_empty() && quiet {
            // Not held now, by what this scan could see: say why that is no proof.
            let why = match (&self.last.unsettled, &self.unsettled, lingering) {
                (Some(now), _, _) => now.clone(),
                (None, Some(before), _) => before.clone(),
                (None, None, 0) => "the stop ended before two scans in a row found the swept \
                                    folders quiet"
                    .into(),
                (None, None, _) => "a process the sweep signalled is still alive".into(),
            };
            self.errors.push(why);
        } else if !proven {
            self.errors.extend(self.last.unsettled.clone());
        }
        let mut errors = self.errors;
        errors.dedup();
        SweepOutcome {
            clean: proven,
            survivors,
            report: self.report,
            sent: self.sent,
            error: (!errors.is_empty()).then(|| errors.join("; ")),
        }
    }
}

impl SweepStop {
    /// Whether the run's own stop covers `p`: a descendant of vloer-run, in the child's group
    /// under `--scope group`.
    fn covered(&self, p: &Proc) -> bool {
        match self.scope {
            Scope::Group(pgid) if p.pgid != pgid => false,
            _ => in_tree(p),
        }
    }
}

/// The process on `pid` that started at `starttime`, while it lives.
fn alive(pid: Pid, starttime: u64) -> Option<Proc> {
    proctable::read(pid)
        .ok()
        .flatten()
        .filter(|p| p.starttime == starttime && p.is_live())
}

impl Scan {
    /// Whether a process this scan found, or could not look at, has ended since.
    fn ended(&self) -> bool {
        let found = self.found.iter().map(|f| (f.pid, f.starttime));
        let unseen = self.unverified.iter().map(|u| (u.pid, u.starttime));
        found
            .chain(unseen)
            .any(|(pid, start)| alive(pid, start).is_none())
    }
}

/// Whether `p` descends from vloer-run, read up its parents in /proc.
fn in_tree(p: &Proc) -> bool {
    line_up(p.ppid).1
}

/// The chain of parents from `pid` up, read in /proc, and whether it reached vloer-run (which
/// it does not include), rather than init or a process gone meanwhile.
pub(super) fn line_up(pid: Pid) -> (Vec<Pid>, bool) {
    let me = sys::own_pid();
    let mut line = Vec::new();
    let mut at = pid;
    while at.as_raw() > 1 && !line.contains(&at) {
        if at == me {
            return (line, true);
        }
        line.push(at);
        match proctable::read(at) {
            Ok(Some(p)) => at = p.ppid,
            _ => break,
        }
    }
    (line, at == me)
}
