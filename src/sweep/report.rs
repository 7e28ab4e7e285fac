//! What the verdict and `status` show of the sweep: the folders, every match a stop found, and
//! the processes it could not look at, kept within the verdict's size.

use super::{Scan, Started, Sweep, What};
use serde::Serialize;

/// Every scan of one stop (or the one of a `status`), as the `sweep` field shows it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    dirs: Vec<String>,
    holders: Vec<Holder>,
    unverified: Vec<Unseen>,
    /// Entries left out to keep the verdict within its size.
    omitted: usize,
}

#[derive(Clone, Debug, Serialize)]
struct Holder {
    pid: i32,
    comm: String,
    uid: u32,
    started: Started,
    what: Vec<What>,
    #[serde(skip)]
    starttime: u64,
}

#[derive(Clone, Debug, Serialize)]
struct Unseen {
    pid: i32,
    comm: String,
    started: Started,
    why: String,
    #[serde(skip)]
    starttime: u64,
}

impl Report {
    pub fn new(sweep: &Sweep) -> Report {
        Report {
            dirs: sweep
                .dirs
                .iter()
                .map(|d| d.path.to_string_lossy().into_owned())
                .collect(),
            ..Report::default()
        }
    }

    /// Adds what `scan` found; a process seen again is listed once, with every way it matched.
    pub fn add(&mut self, scan: &Scan) {
        for f in &scan.found {
            let pid = f.pid.as_raw();
            match self
                .holders
                .iter_mut()
                .find(|h| h.pid == pid && h.starttime == f.starttime)
            {
                Some(h) => {
                    h.what.extend(&f.what);
                    h.what.sort();
                    h.what.dedup();
                }
                None => self.holders.push(Holder {
                    pid,
                    comm: f.comm.clone(),
                    uid: f.uid,
                    started: f.started,
                    what: f.what.clone(),
                    starttime: f.starttime,
                }),
            }
            self.unverified
                .retain(|u| !(u.pid == pid && u.starttime == f.starttime));
        }
        for u in &scan.unverified {
            let pid = u.pid.as_raw();
            let known = |s: u64| s == u.starttime;
            if self
                .holders
                .iter()
                .any(|h| h.pid == pid && known(h.starttime))
                || self
                    .unverified
                    .iter()
                    .any(|v| v.pid == pid && known(v.starttime))
            {
                continue;
            }
            self.unverified.push(Unseen {
                pid,
                comm: u.comm.clone(),
                started: u.started,
                why: u.why.clone(),
                starttime: u.starttime,
            });
        }
    }

    /// The field's JSON length.
    pub fn json_len(&self) -> usize {
        serde_json::to_string(self).map_or(0, |s| s.len())
    }

    /// Leaves out entries from the end, processes that could not be looked at first, until the
    /// field's JSON is at most `max` bytes; returns whether it fits.
    pub fn fit(&mut self, max: usize) -> bool {
        while self.json_len() > max {
            if self.unverified.pop().is_none() && self.holders.pop().is_none() {
                return false;
            }
            self.omitted += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Found, Unverified};
    use super::*;
    use nix::unistd::Pid;

    fn found(pid: i32, what: What) -> Found {
        Found {
            pid: Pid::from_raw(pid),
            starttime: 7,
            comm: "w".into(),
            uid: 0,
            started: Started::During,
            what: vec![what],
            may_signal: true,
        }
    }

    fn unseen(pid: i32, started: Started) -> Unverified {
        Unverified {
            pid: Pid::from_raw(pid),
            comm: "u".into(),
            starttime: 7,
            started,
            why: "denied".into(),
        }
    }

    #[test]
    fn scans_accumulate_and_the_field_fits() {
        let mut r = Report::default();
        let first = Scan {
            found: vec![found(10, What::Cwd)],
            unverified: vec![unseen(11, Started::Before), unseen(12, Started::Before)],
            error: None,
            unsettled: None,
        };
        r.add(&first);
        r.add(&Scan {
            found: vec![found(10, What::Fd), found(11, What::Argv)],
            ..Scan::default()
        });
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(json["holders"][0]["what"], serde_json::json!(["cwd", "fd"]));
        assert_eq!(json["holders"].as_array().unwrap().len(), 2);
        assert_eq!(json["unverified"].as_array().unwrap().len(), 1);
        assert_eq!(json["unverified"][0]["started"], "before");
        assert!(!first.clean(false));
        let before = Scan {
            unverified: vec![unseen(11, Started::Before)],
            ..Scan::default()
        };
        assert!(before.clean(false));
        assert!(!before.clean(true));
        let during = Scan {
            unverified: vec![unseen(11, Started::During)],
            ..Scan::default()
        };
        assert!(!during.clean(false));
        for pid in 100..400 {
            r.add(&Scan {
                unverified: vec![unseen(pid, Started::Before)],
                ..Scan::default()
            });
        }
        assert!(r.fit(1000));
        assert!(r.json_len() <= 1000);
        assert!(r.omitted > 250);
        assert_eq!(r.holders.len(), 2, "holders are the last to go");
    }
}
