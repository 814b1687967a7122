//! Watch streams: every applied change under a prefix, in revision order.
//!
//! A stream first replays the persisted history after its start revision,
//! then follows the live events the raft thread publishes. It subscribes to
//! the live feed *before* reading the history, under the apply lock, so no
//! revision falls in between; revisions seen twice are skipped. When the
//! stream falls too far behind the live feed it reads the history again, and
//! when that history was compacted (or replaced by a snapshot) it ends with
//! [`Error::TooOld`]: the caller relists and watches from the list's revision.

use crate::error::{Error, Result};
use crate::machine::{read_history, RevisionEvents};
use crate::node::Shared;
use crate::Event;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::broadcast;

/// The changes of one revision that matched the watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchBatch {
    pub revision: u64,
    pub events: Vec<Event>,
}

/// A stream of [`WatchBatch`]es; see the module docs.
pub struct WatchStream {
    shared: Arc<Shared>,
    prefix: String,
    rx: broadcast::Receiver<Arc<RevisionEvents>>,
    backlog: VecDeque<RevisionEvents>,
    last: u64,
}

impl WatchStream {
    pub(crate) fn new(shared: Arc<Shared>, prefix: String, start: u64) -> Result<WatchStream> {
        let rx = shared.events.subscribe();
        let mut w = WatchStream {
            shared,
            prefix,
            rx,
            backlog: VecDeque::new(),
            last: start,
        };
        let applied = {
            let _g = w
                .shared
                .apply_lock
                .read()
                .unwrap_or_else(|e| e.into_inner());
            crate::keys::applied_index(&w.shared.tree)?
        };
        if start == 0 {
            w.last = applied;
        }
        w.reload()?;
        Ok(w)
    }

    /// The last revision this stream delivered or skipped past.
    pub fn revision(&self) -> u64 {
        self.last
    }

    fn reload(&mut self) -> Result<()> {
        let _g = self
            .shared
            .apply_lock
            .read()
            .unwrap_or_else(|e| e.into_inner());
        let compacted = self.shared.compacted.load(Ordering::SeqCst);
        if self.last < compacted {
            return Err(Error::TooOld {
                requested: self.last,
                compacted,
            });
        }
        self.backlog = read_history(&self.shared.tree, self.last, u64::MAX, &self.prefix)?.into();
        Ok(())
    }

    /// The next revision with matching changes.
    pub async fn next(&mut self) -> Result<WatchBatch> {
        loop {
            if let Some(b) = self.backlog.pop_front() {
                if b.revision <= self.last {
                    continue;
                }
                self.last = b.revision;
                return Ok(WatchBatch {
                    revision: b.revision,
                    events: b.events,
                });
            }
            match self.rx.recv().await {
                Ok(ev) => {
                    if ev.events.is_empty() {
                        // A snapshot replaced the state and its history.
                        if ev.revision > self.last {
                            return Err(Error::TooOld {
                                requested: self.last,
                                compacted: ev.revision,
                            });
                        }
                        continue;
                    }
                    if ev.revision <= self.last {
                        continue;
                    }
                    self.last = ev.revision;
                    let events: Vec<Event> = ev
                        .events
                        .iter()
                        .filter(|e| {
                            e.kv.as_ref()
                                .is_some_and(|kv| kv.key.starts_with(&self.prefix))
                        })
                        .cloned()
                        .collect();
                    if !events.is_empty() {
                        return Ok(WatchBatch {
                            revision: ev.revision,
                            events,
                        });
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => self.reload()?,
                Err(broadcast::error::RecvError::Closed) => return Err(Error::Stopped),
            }
        }
    }
}
