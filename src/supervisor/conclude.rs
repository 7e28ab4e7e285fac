//! The end of the run: the proof, the verdict and the exit status.

use super::*;
use crate::verdict::{Cause, Effort, Proof};

/// The most reap batches the end of the run takes (see `reap`): a tree still making zombies
/// that fast is alive.
const REAP_ROUNDS: usize = 64;

impl Supervisor {
    /// Step 4 and the verdict: confirm, reap what is left, hand the terminal back.
    pub(super) fn conclude(mut self) -> Ended {
        // The run's stop can end with its scope empty but for zombies whose SIGCHLD was not read
        // yet, an exec's process among them: its report needs the status first.
        for _ in 0..REAP_ROUNDS {
            if !self.reap().more_waiting {
                break;
            }
        }
        // Execs still stopping when the run ends are confirmed and reported now.
        let ids: Vec<ConnId> = self.execs.running.keys().copied().collect();
        // Only a watch (no signal, no wait) for those that have none yet: the run is over.
        let plan = StopPlan {
            grace: Duration::ZERO,
            kill_timeout: Duration::ZERO,
            ..self.plan(None)
        };
        for id in ids {
            if let Some(e) = self.execs.running.get_mut(&id) {
                e.begin_stop(ExecEnd::RunEnded, plan, &self.sources.reactor, true);
            }
            self.finish_exec(id, Instant::now());
        }
        let state = std::mem::replace(&mut self.state, State::Running);
        // The main child and other dead children are zombies now; collect their status. Then the
        // kernel's own word, where it has one, is the proof; /proc only names survivors.
        let empty = self.scope() == Scope::Tree && self.tree_is_empty();
        // Before the stop's own account, so that the time the stop took includes the sweep's
        // last scans.
        let sweep = self.finish_sweep();
        let outcome = match state {
            State::Stopping(s) | State::Waiting(s) => s.finish(Instant::now(), empty),
            State::Running => Outcome {
                error: Some("the run ended without a stop".into()),
                ..Outcome::default()
            },
        };
        self.terminal.hand_back(self.child.pid());
        let mut errors = self.record.errors.clone();
        errors.extend(outcome.error.clone());
        if let Some(s) = &sweep {
            errors.extend(s.error.clone());
            if !s.clean && s.error.is_none() {
                errors.push(
                    "a swept folder is still held or named by a process (see sweep.holders), \
                     or one that started during the run could not be looked at"
                        .into(),
                );
            }
        }
        let error = (!errors.is_empty()).then(|| errors.join("; "));
        let mut survivors = outcome.survivors;
        for p in std::mem::take(&mut self.execs.survivors) {
            if !survivors.iter().any(|q| q.pid == p.pid)
                && crate::proctable::read(p.pid)
                    .ok()
                    .flatten()
                    .is_some_and(|q| q.is_live() && q.starttime == p.starttime)
            {
                survivors.push(p);
            }
        }
        let mut sent = outcome.sent;
        for (k, v) in std::mem::take(&mut self.execs.sent) {
            *sent.entry(k).or_default() += v;
        }
        let sweep = sweep.map(|s| {
            for p in s.survivors {
                if !survivors.iter().any(|q| q.pid == p.pid) {
                    survivors.push(p);
                }
            }
            for (k, v) in s.sent {
                *sent.entry(k).or_default() += v;
            }
            s.report
        });
        let stopped = survivors.is_empty() && error.is_none();
        tell_confirmation(stopped, survivors.len(), error.as_deref(), outcome.elapsed);
        let reason = self.record.reason.unwrap_or(Reason::ChildExited);
        let killed_by_stop = matches!(
            self.child.status(),
            Some(ChildState::Signaled(s)) if outcome.sent_to_child.contains(&s)
        );
        let exit = self.exit(stopped, reason, killed_by_stop);
        let verdict = Verdict {
            proof: Proof {
                stopped,
                survivors,
                survivors_omitted: 0,
            },
            cause: Cause {
                reason,
                signal: (reason == Reason::Signal)
                    .then(|| self.record.trigger.map(Sig::name))
                    .flatten(),
            },
            child: self.child.report(),
            exit_code: exit.code,
            scope: self.config.stop.scope.name(),
            effort: Effort {
                sent,
                reaped: self.record.reaped,
                elapsed_ms: outcome.elapsed.as_millis() as u64,
            },
            error,
            sweep,
            schema: 1,
        };
        Ended {
            verdict,
            control: self.requests.server.take(),
            stop_waiters: std::mem::take(&mut self.requests.stop_waiters),
            by_signal: exit.by_signal,
        }
    }

    /// The folder sweep's part of step 4, on every way the run ends. The loop ends only once the
    /// sweep has (see `main_done`); after a failure of the loop it may not have, or not have
    /// begun: it scans once more as it is, and the verdict says what that scan found.
    fn finish_sweep(&mut self) -> Option<SweepOutcome> {
        self.begin_sweep();
        self.sweep.take().map(SweepStop::finish)
    }

    /// Step 4 for `--scope tree`: reaps every zombie, then asks the kernel whether vloer-run has
    /// any child left. None means no descendant exists (each would be a child of vloer-run or of
    /// one of its children), an O(1) proof that no /proc listing can get wrong.
    pub(super) fn tree_is_empty(&mut self) -> bool {
        // Bounded: each turn reaps what the kernel showed; a tree still making zombies is alive.
        for _ in 0..REAP_ROUNDS {
            self.reap();
            match sys::children_left() {
                Ok(sys::Children::None) => return true,
                Ok(sys::Children::Zombies) => continue,
                Ok(sys::Children::Live) => return false,
                Err(e) => {
                    self.record
                        .errors
                        .push(format!("asking the kernel for children (waitid): {e}"));
                    return false;
                }
            }
        }
        false
    }

    pub(super) fn exit(&self, stopped: bool, reason: Reason, killed_by_stop: bool) -> Exit {
        Exit::of(exit::Facts {
            stopped,
            reason,
            child: self.child.status(),
            killed_by_stop,
            spawn_error: self.child.not_run(),
            preserve_status: self.config.preserve_status,
            success_exit: &self.config.success_exit,
            pid1: self.pid1,
        })
    }
}

/// The end of the stop's story under -v: whether the kernel proved it, and how long it took.
fn tell_confirmation(stopped: bool, survivors: usize, error: Option<&str>, took: Duration) {
    let took = humantime::format_duration(Duration::from_millis(took.as_millis() as u64));
    if stopped {
        msg::verbose(format_args!(
            "stop confirmed after {took}: no process of the run is left"
        ));
        return;
    }
    let mut why: Vec<String> = match survivors {
        0 => vec![],
        1 => vec!["1 process survived".into()],
        n => vec![format!("{n} processes survived")],
    };
    why.extend(error.map(String::from));
    let why = why.join("; ");
    msg::verbose(format_args!("stop not confirmed after {took}: {why}"));
}
