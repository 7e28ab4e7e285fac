//! The run's one loop: wait for the next event, hand each to its component, move the stops on.

use super::*;

impl Supervisor {
    pub(super) fn event_loop(&mut self) -> anyhow::Result<()> {
        loop {
            let now = Instant::now();
            if let State::Stopping(stop) | State::Watching(stop) = &mut self.state {
                stop.progress(now);
            }
            self.progress_execs(now);
            // Under `--scope tree` the run's own stop covered every exec's processes, so an exec
            // that only watches them does not hold the run; `conclude` reports it.
            if self.main_done() && self.execs.running.values().all(|e| e.watch_only()) {
                return Ok(());
            }
            let mut deadline = match &self.state {
                State::Running => self.timeout_deadline(),
                State::Watching(s) => earliest(self.timeout_deadline(), s.deadline()),
                State::Stopping(s) => s.deadline(),
            };
            for e in self.execs.running.values() {
                deadline = earliest(deadline, e.deadline());
            }
            if let Some(c) = &self.requests.server {
                deadline = earliest(deadline, c.deadline());
            }
            let ready = {
                let mut interests = vec![Interest {
                    token: Token::Signals,
                    fd: self.sources.signals.as_fd(),
                    events: PollFlags::POLLIN,
                }];
                if let (Some(fd), State::Running | State::Watching(_)) =
                    (&self.sources.parent, &self.state)
                {
                    interests.push(Interest {
                        token: Token::Parent,
                        fd: fd.as_fd(),
                        events: PollFlags::POLLIN,
                    });
                }
                if let State::Stopping(s) | State::Watching(s) = &self.state {
                    interests.extend(s.pidfds().map(|(pid, fd)| Interest {
                        token: Token::Member(pid),
                        fd,
                        events: PollFlags::POLLIN,
                    }));
                }
                for (id, e) in &self.execs.running {
                    if let Some(s) = &e.stop {
                        interests.extend(s.pidfds().map(|(pid, fd)| Interest {
                            token: Token::ExecMember(*id, pid),
                            fd,
                            events: PollFlags::POLLIN,
                        }));
                    }
                }
                if let Some(c) = &self.requests.server {
                    interests.extend(c.interests().into_iter().map(|(t, fd, events)| Interest {
                        token: Token::Control(t),
                        fd,
                        events,
                    }));
                }
                event_loop::wait(&interests, deadline).context("waiting for events (poll)")?
            };
            let now = Instant::now();
            let mut exited = Vec::new();
            let mut exec_exited: BTreeMap<ConnId, Vec<Pid>> = BTreeMap::new();
            let mut got_signals = false;
            let mut control_events = Vec::new();
            for (token, revents) in &ready {
                match token {
                    Token::Signals => got_signals = true,
                    Token::Parent => {
                        msg::verbose(format_args!("parent process exited"));
                        self.sources.parent = None;
                        self.begin_stop(Reason::ParentDied, None);
                    }
                    Token::Member(pid) => exited.push(*pid),
                    Token::ExecMember(id, pid) => exec_exited.entry(*id).or_default().push(*pid),
                    Token::Control(t) => {
                        if let Some(c) = &mut self.requests.server {
                            control_events.extend(c.on_ready(*t, *revents, now));
                        }
                    }
                }
            }
            if got_signals {
                let infos = sys::read_signals(self.sources.signals.as_fd())
                    .context("reading signals (signalfd)")?;
                let mut chld = false;
                // Signals first: a SIGCONT must be forwarded before a stale stop report is read.
                for info in infos {
                    if info.sig == Sig::CHLD {
                        chld = true;
                    } else if info.is_own_write_error() {
                        // Not even a -v line: stderr may be the closed pipe, and the line would
                        // raise the next one.
                    } else {
                        msg::verbose(format_args!(
                            "received {} from pid {}",
                            info.sig, info.sender
                        ));
                        self.on_signal(info);
                    }
                }
                if chld {
                    self.reap();
                }
            }
            if let State::Stopping(s) | State::Watching(s) = &mut self.state {
                if !exited.is_empty() {
                    s.exited(&exited, now);
                }
            }
            for (id, pids) in exec_exited {
                if let Some(stop) = self
                    .execs
                    .running
                    .get_mut(&id)
                    .and_then(|e| e.stop.as_mut())
                {
                    stop.exited(&pids, now);
                }
            }
            for event in control_events {
                self.on_control(event);
            }
            if let Some(c) = &mut self.requests.server {
                c.expire(now);
            }
            let plan = self.plan(None);
            for e in self.execs.running.values_mut() {
                if e.stop.is_none() && e.deadline().is_some_and(|d| now >= d) {
                    msg::verbose(format_args!("exec {} timed out", e.pid));
                    e.begin_stop(ExecEnd::Timeout, plan, false);
                }
            }
            if let Some(d) = self.timeout_deadline() {
                if now >= d && matches!(self.state, State::Running | State::Watching(_)) {
                    msg::verbose(format_args!(
                        "timeout after {}",
                        humantime::format_duration(self.args.stop.timeout.unwrap_or_default())
                    ));
                    self.begin_stop(Reason::Timeout, None);
                }
            }
        }
    }
}
