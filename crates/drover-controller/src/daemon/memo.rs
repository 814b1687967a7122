//! Planning only what changed: what a DaemonSet's plan keeps of every
//! node between passes ([`Memo`]), so that the next pass diffs again only
//! the nodes whose Node or pods changed ([`Scope::Changed`]).
//!
//! A rolling update of N nodes takes about 3N passes (delete the old pod,
//! create the new one, see it ready), each of which diffed every node and
//! claimed every pod: the update's cost grew with N². With a memo a pass
//! diffs the changed nodes and folds over the others' facts (`NodeFacts`: a
//! few booleans each) for the status and the rolling-update step.
//!
//! What the caller owes the memo:
//! - a plan of the whole cluster ([`Scope::All`]) whenever
//!   [`Memo::is_valid_for`] says no (a new DaemonSet, a changed spec or
//!   revision, a new leader), and whenever it cannot tell what changed
//!   (its change record was cut short) or something that every node's
//!   verdict depends on changed (a PriorityClass);
//! - otherwise the names of the nodes whose Node or any pod bound or
//!   pinned to them changed since the last plan (whatever the pod's
//!   owner: a node's room depends on all its pods), with
//!   [`Memo::revisit`]'s, and as input exactly those of them that exist
//!   and the pods bound or pinned to them.
//!
//! The planner itself keeps for revisiting every node it wanted to write
//! to (a write can fail without changing anything), every node whose
//! verdict changes with time (a pod becoming available after
//! `minReadySeconds`), and the nodes of pods it deleted as strays.

use std::collections::{BTreeMap, BTreeSet};

use drover_api::annotations::auto_rollback;
use drover_api::{DaemonSet, DaemonSetSpec};

use super::facts::NodeFacts;
use crate::FastSet;

/// Which nodes a plan with a [`Memo`] diffs.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'s> {
    /// Every node: the input holds every node and every pod the
    /// DaemonSet may touch; the memo is filled anew.
    All,
    /// These nodes (names, existing or not): the input holds those of
    /// them that exist and the pods bound or pinned to them; the memo
    /// keeps what it knows of the others.
    Changed(&'s FastSet<&'s str>),
}

/// What a plan of one DaemonSet keeps between passes (see the module
/// documentation).
#[derive(Debug, Default)]
pub struct Memo {
    /// What the facts were planned for; `None` until a plan of every node.
    key: Option<Key>,
    /// Every node's facts, by name.
    pub(crate) facts: BTreeMap<String, NodeFacts>,
    /// Nodes to diff again whatever changes.
    revisit: BTreeSet<String>,
}

/// What makes the facts stale when it changes.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    uid: String,
    generation: Option<i64>,
    spec: DaemonSetSpec,
    revision_hash: Option<String>,
}

impl Key {
    fn of(ds: &DaemonSet, revision_hash: Option<&str>) -> Self {
        Key {
            uid: ds.metadata.uid.clone(),
            generation: ds.metadata.generation,
            spec: ds.spec.clone(),
            revision_hash: revision_hash.map(str::to_owned),
        }
    }

    fn matches(&self, ds: &DaemonSet, revision_hash: Option<&str>) -> bool {
        self.uid == ds.metadata.uid
            && self.generation == ds.metadata.generation
            && self.revision_hash.as_deref() == revision_hash
            && self.spec == ds.spec
    }
}

impl Memo {
    /// An empty memo: the first plan with it must be of every node.
    pub fn new() -> Self {
        Memo::default()
    }

    /// Whether a plan of only the changed nodes may start from this memo:
    /// it holds every node's facts as planned for this DaemonSet's spec
    /// and revision. Never for a DaemonSet being deleted, nor one with an
    /// automatic rollback policy (which looks at every node's pods).
    pub fn is_valid_for(&self, ds: &DaemonSet, revision_hash: Option<&str>) -> bool {
        ds.metadata.deletion_timestamp.is_none()
            && !matches!(auto_rollback(&ds.metadata), Ok(Some(_)))
            && self
                .key
                .as_ref()
                .is_some_and(|k| k.matches(ds, revision_hash))
    }

    /// The nodes the next plan must diff again even if nothing of theirs
    /// changed.
    pub fn revisit(&self) -> impl Iterator<Item = &str> + '_ {
        self.revisit.iter().map(String::as_str)
    }

    /// Forgets everything: the next plan must be of every node.
    pub fn clear(&mut self) {
        *self = Memo::default();
    }

    /// Starts a plan: with [`Scope::All`] (or a memo not valid for the
    /// DaemonSet) every fact is dropped; otherwise those of the nodes in
    /// scope. Answers whether the plan is of every node.
    pub(crate) fn begin(
        &mut self,
        ds: &DaemonSet,
        revision_hash: Option<&str>,
        scope: Scope<'_>,
    ) -> bool {
        match scope {
            Scope::Changed(nodes) if self.is_valid_for(ds, revision_hash) => {
                for n in nodes.iter() {
                    self.facts.remove(*n);
                }
                self.revisit.retain(|n| !nodes.contains(n.as_str()));
                false
            }
            _ => {
                self.facts.clear();
                self.revisit.clear();
                self.key = Some(Key::of(ds, revision_hash));
                true
            }
        }
    }

    /// Records a node's facts as planned now (and keeps it for the next
    /// plan unless it is quiet).
    pub(crate) fn put(&mut self, node: &str, facts: NodeFacts) {
        if !facts.quiet {
            self.revisit.insert(node.to_owned());
        }
        self.facts.insert(node.to_owned(), facts);
    }

    /// Keeps a node (existing or not) for the next plan.
    pub(crate) fn keep(&mut self, node: &str) {
        if !self.revisit.contains(node) {
            self.revisit.insert(node.to_owned());
        }
    }

    /// Whether the memo has facts of this node.
    pub(crate) fn knows(&self, node: &str) -> bool {
        self.facts.contains_key(node)
    }
}
