//! Control requests and the execs they start: status, stop, exec, cancel, and each exec's end.

use super::*;

impl Supervisor {
    /// Moves exec stops on, and reports every finished exec to its client. `reaped`: the last
    /// turn's reap, as for `Stop::progress`.
    pub(super) fn progress_execs(&mut self, now: Instant, reaped: Reaped) {
        let mut finished = Vec::new();
        for (id, e) in self.execs.running.iter_mut() {
            if let Some(s) = e.stop_mut() {
                s.progress(now, reaped);
                if s.is_done() {
                    finished.push(*id);
                }
            }
        }
        if !finished.is_empty() {
            // A pidfd can report an exit a moment before the SIGCHLD for it is queued; the
            // zombie is already there, so collect its status before reporting.
            self.reap();
        }
        for id in finished {
            self.finish_exec(id, now);
        }
    }

    pub(super) fn finish_exec(&mut self, id: ConnId, now: Instant) {
        let Some(e) = self.execs.running.remove(&id) else {
            return;
        };
        let pid = e.pid;
        let Some((outcome, report)) = e.finish(now) else {
            return;
        };
        msg::verbose(format_args!(
            "exec {pid} ended: status {} ({})",
            report.status, report.reason
        ));
        for (k, v) in &outcome.sent {
            *self.execs.sent.entry(*k).or_default() += v;
        }
        if !report.stopped {
            self.execs.unconfirmed = true;
            self.execs.survivors.extend(outcome.survivors);
            if let Some(err) = &outcome.error {
                self.record.errors.push(format!("exec {pid}: {err}"));
            }
        }
        if let Some(c) = &mut self.requests.server {
            let line = serde_json::json!({ "exit": report }).to_string() + "\n";
            c.send(id, &line, true);
        }
    }

    pub(super) fn on_control(&mut self, event: control::Event) {
        match event {
            control::Event::Request(id, Request::Stop { grace }) => {
                self.requests.stop_waiters.push(id);
                if !matches!(self.state, State::Stopping(_)) {
                    self.requests.grace = grace;
                    msg::verbose(format_args!("stop requested on the control socket"));
                    self.begin_stop(Reason::Control, None);
                }
            }
            control::Event::Request(id, Request::Status) => {
                let line = self.status_line() + "\n";
                if let Some(c) = &mut self.requests.server {
                    c.send(id, &line, true);
                }
            }
            control::Event::Request(id, Request::Exec(req)) => {
                let refusal = if self.execs.unconfirmed {
                    Some((
                        ErrorCode::StopUnconfirmed,
                        "a stop in this run was not confirmed; no new execs".to_string(),
                    ))
                } else if !matches!(self.state, State::Running) {
                    Some((
                        ErrorCode::Stopping,
                        "the run is stopping; no new execs".to_string(),
                    ))
                } else {
                    None
                };
                // An exec gets its own process group even when the main child has a session.
                let setup = ChildSetup {
                    new_session: false,
                    ..self.child_setup(false)
                };
                let reply = match refusal {
                    Some((code, text)) => Err(proto::error_line(code, &text)),
                    None => match Exec::start(id, req, setup) {
                        Ok(e) => {
                            msg::verbose(format_args!(
                                "exec {} started as pid {}",
                                exit::command_words(&e.argv),
                                e.pid
                            ));
                            let line = serde_json::json!({ "exec": { "pid": e.pid.as_raw() } })
                                .to_string()
                                + "\n";
                            self.execs.running.insert(id, e);
                            Ok(line)
                        }
                        Err(err) => {
                            let (SpawnError::NotFound(io) | SpawnError::CannotExecute(io)) = &err;
                            Err(proto::error_reply(
                                ErrorCode::SpawnFailed,
                                &format!("cannot run: {io}"),
                                Some(err.exit_code()),
                            ))
                        }
                    },
                };
                if let Some(c) = &mut self.requests.server {
                    match reply {
                        Ok(line) => c.send(id, &line, false),
                        Err(line) => c.send(id, &line, true),
                    }
                }
            }
            control::Event::Cancel(id, signal) => {
                let plan = self.plan(None);
                if let Some(e) = self.execs.running.get_mut(&id) {
                    msg::verbose(format_args!("exec {} cancelled by its client", e.pid));
                    // What the client received reaches the exec's group first, as a forwarded
                    // signal does at the start of the run's stop.
                    let forwarded = signal.map(|sig| Forwarded {
                        to: ForwardedTo::Group(e.pid),
                        sig,
                        received: sig,
                    });
                    e.begin_stop(
                        ExecEnd::Client,
                        StopPlan { forwarded, ..plan },
                        &self.sources.reactor,
                        false,
                    );
                }
            }
        }
    }

    pub(super) fn status_line(&self) -> String {
        let live: Vec<crate::proctable::Proc> = match self.scope().scan(&Default::default()) {
            Ok(procs) => procs
                .into_iter()
                .filter(crate::proctable::Proc::is_live)
                .collect(),
            Err(e) => {
                return proto::error_line(ErrorCode::ProcUnreadable, &e.0)
                    .trim_end()
                    .to_string()
            }
        };
        let pids: Vec<Pid> = live.iter().map(|p| p.pid).collect();
        let processes = live
            .into_iter()
            .zip(crate::proctable::cmdlines(&pids))
            .map(|(p, cmdline)| StatusProcess {
                cmdline,
                comm: p.comm,
                pgid: p.pgid.as_raw(),
                pid: p.pid.as_raw(),
                ppid: p.ppid.as_raw(),
                state: p.state,
            })
            .collect();
        let execs = self
            .execs
            .running
            .values()
            .map(|e| StatusExec {
                argv: e
                    .argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                elapsed_ms: e.started.elapsed().as_millis() as u64,
                pid: e.pid.as_raw(),
                state: if e.is_stopping() {
                    "stopping"
                } else {
                    "running"
                },
            })
            .collect();
        let report = self.child.report();
        let status = Status {
            child: StatusChild {
                alive: self.child.alive(),
                exit_code: report.exit_code,
                pid: report.pid,
                signal: report.signal,
            },
            execs,
            pid: sys::own_pid().as_raw(),
            processes,
            schema: 1,
            scope: self.config.stop.scope.name(),
            state: match self.state {
                State::Running => "running",
                State::Waiting(_) => "waiting",
                State::Stopping(_) => "stopping",
            },
            sweep: self.config.sweep.as_ref().map(|sweep| {
                let scan = sweep.scan_settled();
                let mut report = crate::sweep::Report::new(sweep);
                report.add(&scan);
                StatusSweep {
                    report,
                    error: scan.error,
                }
            }),
            uptime_ms: self.started.elapsed().as_millis() as u64,
        };
        serde_json::to_string(&status).expect("a status serializes")
    }
}

/// A `status` reply. Its keys come out in the order of the fields, the order the manual
/// documents: who (pid), the child, every live process, the execs, then the run's state.
#[derive(serde::Serialize)]
struct Status {
    pid: i32,
    child: StatusChild,
    processes: Vec<StatusProcess>,
    execs: Vec<StatusExec>,
    scope: &'static str,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sweep: Option<StatusSweep>,
    uptime_ms: u64,
    schema: u32,
}

/// With `--sweep`: who holds or names a swept folder now, inside the tree or not.
#[derive(serde::Serialize)]
struct StatusSweep {
    #[serde(flatten)]
    report: crate::sweep::Report,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(serde::Serialize)]
struct StatusChild {
    pid: Option<i32>,
    alive: bool,
    exit_code: Option<i32>,
    signal: Option<String>,
}

#[derive(serde::Serialize)]
struct StatusExec {
    pid: i32,
    argv: Vec<String>,
    state: &'static str,
    elapsed_ms: u64,
}

#[derive(serde::Serialize)]
struct StatusProcess {
    pid: i32,
    ppid: i32,
    pgid: i32,
    state: String,
    comm: String,
    cmdline: String,
}
