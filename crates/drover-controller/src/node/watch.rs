//! The node lifecycle between passes: which nodes a pass must judge again.
//!
//! A node's verdict ([`NodeLifecycle::plan`]) depends on its object, its
//! last heartbeat and the time. For a node whose `Ready` is `True` after
//! its plan, a heartbeat can only move its deadline later, so until that
//! deadline its verdict stays what it was unless its object changes.
//! [`NodeWatch`] keeps, for the passes of one term:
//!
//! - each node's next check (its deadline; for an `Unknown` node the later
//!   of that and its collection time), in time order;
//! - the nodes whose `Ready` is not `True` after their plan: a heartbeat
//!   can bring an `Unknown` one back at any moment, so they are judged on
//!   every pass (few, except when many nodes are lost at once; then every
//!   pass judges them all, as before);
//! - the nodes the last plan wrote to: a write can fail without changing
//!   the node, so they are judged again on the next pass.
//!
//! [`NodeLifecycle::plan_watched`] then judges only the nodes whose object
//! changed, those due, and those two sets: the same updates, removals and
//! events as a plan of every node (`tests/node_properties.rs`,
//! `watched_plans_decide_as_plans_of_every_node`), in O(changed + due)
//! instead of O(nodes) on each pass. Its `next_check` may be earlier than a
//! plan of every node would say (a heartbeat moved a deadline it still
//! holds), never later. A wall clock that was set (it moved apart from the
//! monotonic clock by more than [`CLOCK_STEP`]) judges every node again.

use std::collections::BTreeSet;
use std::time::Duration;

use drover_api::Node;

use super::{NodeLifecycle, NodePlan};
use crate::time::Timestamp;
use crate::FastMap;

/// What the node lifecycle keeps between passes (see the module
/// documentation). Start one per term (a new leader judges every node).
#[derive(Debug, Default)]
pub struct NodeWatch {
    due: BTreeSet<(Timestamp, String)>,
    due_at: FastMap<String, Timestamp>,
    unsettled: BTreeSet<String>,
    revisit: BTreeSet<String>,
    /// The wall clock and the monotonic one at the last plan.
    last: Option<(Timestamp, Duration)>,
}

/// The time of a plan, by both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// The wall clock, as [`NodeLifecycle::plan`] takes it.
    pub wall: Timestamp,
    /// A monotonic clock's reading (from any origin) taken with `wall`:
    /// the heartbeats' times move with the wall clock when it is set, the
    /// times the watch holds do not.
    pub monotonic: Duration,
}

/// How far the wall clock may move apart from the monotonic one between
/// two plans before the watch judges every node again (a clock set back
/// would otherwise delay its deadlines by as much, one set forward make
/// them all due at once).
pub const CLOCK_STEP: Duration = Duration::from_millis(100);

impl NodeWatch {
    /// The nodes whose `Ready` was not `True` after their last plan (the
    /// only ones whose pods [`NodeLifecycle::pods_not_ready`] can mark).
    pub fn unsettled(&self) -> impl Iterator<Item = &str> {
        self.unsettled.iter().map(String::as_str)
    }

    fn forget(&mut self, name: &str) {
        if let Some(at) = self.due_at.remove(name) {
            self.due.remove(&(at, name.to_owned()));
        }
        self.unsettled.remove(name);
    }

    fn clear(&mut self) {
        self.due.clear();
        self.due_at.clear();
        self.unsettled.clear();
        self.revisit.clear();
    }
}

impl NodeLifecycle {
    /// Plans the nodes whose verdict may have changed since the last plan
    /// with `watch` (see the module documentation): with `changed`, the
    /// names of the nodes whose object changed, came or went since then;
    /// with `None` (anything may have changed), and on its first plan, every
    /// node of `every`. `node` finds a node of the view by name.
    pub fn plan_watched<'a>(
        &self,
        watch: &mut NodeWatch,
        every: impl IntoIterator<Item = &'a Node>,
        node: impl Fn(&str) -> Option<&'a Node>,
        changed: Option<&crate::FastSet<String>>,
        last_heartbeat: impl Fn(&str) -> Option<Timestamp>,
        now: Now,
    ) -> NodePlan {
        let Now {
            wall: now,
            monotonic,
        } = now;
        // A new watch, or a wall clock that was set: the times it holds
        // say nothing.
        let anew = watch.last.is_none_or(|(wall, mono)| {
            let walked = i128::from(now.unix_nanos()) - i128::from(wall.unix_nanos());
            let ran = monotonic.saturating_sub(mono).as_nanos() as i128;
            (walked - ran).unsigned_abs() > CLOCK_STEP.as_nanos()
        });
        watch.last = Some((now, monotonic));
        let mut plan = NodePlan::default();
        match changed {
            Some(changed) if !anew => {
                let mut names: BTreeSet<String> = std::mem::take(&mut watch.revisit);
                names.extend(changed.iter().cloned());
                names.extend(watch.unsettled.iter().cloned());
                names.extend(
                    watch
                        .due
                        .iter()
                        .take_while(|(at, _)| *at <= now)
                        .map(|(_, name)| name.clone()),
                );
                for name in &names {
                    watch.forget(name);
                    if let Some(n) = node(name) {
                        self.judge(watch, n, &last_heartbeat, now, &mut plan);
                    }
                }
            }
            _ => {
                watch.clear();
                for n in every {
                    self.judge(watch, n, &last_heartbeat, now, &mut plan);
                }
            }
        }
        plan.next_check = watch.due.first().map(|(at, _)| *at);
        plan
    }

    fn judge(
        &self,
        watch: &mut NodeWatch,
        node: &Node,
        last_heartbeat: &impl Fn(&str) -> Option<Timestamp>,
        now: Timestamp,
        plan: &mut NodePlan,
    ) {
        plan.judged += 1;
        let name = &node.metadata.name;
        let writes = plan.updates.len() + plan.remove.len();
        let judged = self.plan_node(node, last_heartbeat(name), now, plan);
        if plan.updates.len() + plan.remove.len() > writes {
            watch.revisit.insert(name.clone());
        }
        if let Some(at) = judged.next_check {
            watch.due.insert((at, name.clone()));
            watch.due_at.insert(name.clone(), at);
        }
        if !judged.ready {
            watch.unsettled.insert(name.clone());
        }
    }
}
