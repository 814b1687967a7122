//! The plan's writes: new pods with fresh names ([`NewPods`]), deletions
//! with their events, and the rolling-update step turned into deletions
//! and creations ([`Rollout`]).

use drover_api::annotations::auto_rollback;
use drover_api::{DaemonSet, Pod, PodSpec};
use rand::RngCore;

use super::diff::{self, NodeDiff};
use super::{
    facts, fit, pods, rollout, DaemonSetPlan, DeletionReason, Eligibility, Memo, NameTaken,
    PlanInput, PodCreation, PodDeletion,
};
use crate::events::{self, namespace_of};
use crate::time::Timestamp;
use crate::{FastMap, FastSet};

/// Attempts at a name not already taken before giving up (the store then
/// refuses the duplicate and the next plan tries again).
const NAME_ATTEMPTS: usize = 16;

/// A pod name `<prefix><5 characters>` not taken yet (after
/// [`NAME_ATTEMPTS`] tries, the last one; the store then refuses it).
fn fresh_name<R: RngCore + ?Sized>(
    prefix: &str,
    taken: impl Fn(&str) -> bool,
    new_names: &mut FastSet<String>,
    rng: &mut R,
) -> String {
    let mut name = format!("{prefix}{}", pods::name_suffix(rng));
    for _ in 1..NAME_ATTEMPTS {
        if !taken(name.as_str()) && !new_names.contains(&name) {
            break;
        }
        name = format!("{prefix}{}", pods::name_suffix(rng));
    }
    new_names.insert(name.clone());
    name
}

/// Builds the plan's new pods, each with a name no pod of the namespace
/// has and no other new pod got.
pub(super) struct NewPods<'a> {
    ds: &'a DaemonSet,
    spec: &'a PodSpec,
    prefix: String,
    /// Every pod (of any namespace): the names taken are those of the
    /// DaemonSet's namespace, gathered at the first creation (unless
    /// `name_taken` answers).
    all: &'a [&'a Pod],
    name_taken: Option<NameTaken<'a>>,
    taken: Option<FastSet<&'a str>>,
    new_names: FastSet<String>,
}

impl<'a> NewPods<'a> {
    pub(super) fn new(
        ds: &'a DaemonSet,
        eligibility: &'a Eligibility,
        input: &'a PlanInput<'a>,
    ) -> Self {
        NewPods {
            ds,
            spec: eligibility.pod_spec(),
            prefix: pods::generate_name_prefix(ds),
            all: &input.pods,
            name_taken: input.name_taken,
            taken: None,
            new_names: FastSet::default(),
        }
    }

    pub(super) fn create<R: RngCore + ?Sized>(
        &mut self,
        node_name: &str,
        revision_hash: Option<&str>,
        now: Timestamp,
        rng: &mut R,
    ) -> PodCreation {
        let namespace = namespace_of(&self.ds.metadata);
        let name = match self.name_taken {
            Some(NameTaken(taken)) => fresh_name(
                &self.prefix,
                |n| taken(namespace, n),
                &mut self.new_names,
                rng,
            ),
            None => {
                let all = self.all;
                let taken = self
                    .taken
                    .get_or_insert_with(|| diff::taken_names(namespace, all));
                fresh_name(
                    &self.prefix,
                    |n| taken.contains(n),
                    &mut self.new_names,
                    rng,
                )
            }
        };
        let pod = pods::new_daemon_pod(self.ds, self.spec, node_name, name, revision_hash);
        let event = events::created(self.ds, &pod.metadata.name, now, rng);
        PodCreation { pod, event }
    }
}

pub(super) fn deletion<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    pod: &Pod,
    reason: DeletionReason,
    now: Timestamp,
    rng: &mut R,
) -> PodDeletion {
    deletion_of(ds, facts::PodIdent::of(pod), reason, now, rng)
}

/// [`deletion`] of an old pod known by its identity.
fn deletion_of<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    pod: facts::PodIdent,
    reason: DeletionReason,
    now: Timestamp,
    rng: &mut R,
) -> PodDeletion {
    let event = events::deleted(ds, &pod.name, now, rng);
    PodDeletion {
        namespace: pod.namespace,
        name: pod.name,
        uid: pod.uid,
        resource_version: pod.resource_version,
        node_name: pod.node_name,
        reason,
        event,
    }
}

/// The deletion of a pod preempted on `node` for a daemon pod of `ds`,
/// with the `Preempted` event Kubernetes records on the victim.
pub(super) fn preemption(
    ds: &DaemonSet,
    v: &fit::Victim,
    node: &str,
    now: Timestamp,
) -> PodDeletion {
    let by = format!("{}/{}", ds.metadata.namespace, ds.metadata.name);
    let event = events::pod_event(
        (&v.namespace, &v.name, &v.uid),
        events::DAEMONSET_CONTROLLER,
        drover_api::event_type::NORMAL,
        "Preempted",
        format!("Preempted by a pod of DaemonSet {by} (higher priority) on node {node}"),
        now,
    );
    PodDeletion {
        namespace: v.namespace.clone(),
        name: v.name.clone(),
        uid: v.uid.clone(),
        resource_version: String::new(),
        node_name: node.to_owned(),
        reason: DeletionReason::Preempted { by },
        event,
    }
}

/// One rolling-update step over the buckets, once placement has nothing
/// to do (Kubernetes runs `rollingUpdate` only when the manage loop's
/// expectations are met); the automatic rollback is reported whatever
/// placement does.
pub(super) struct Rollout<'p, 'a> {
    pub(super) ds: &'p DaemonSet,
    /// The nodes diffed now.
    pub(super) diffs: &'p [NodeDiff<'a>],
    /// Their facts, without a memo (with one, they are in it).
    pub(super) facts: &'p [facts::NodeFacts],
    pub(super) hash: &'p str,
    pub(super) now: Timestamp,
}

impl Rollout<'_, '_> {
    /// Adds the step's deletions and creations to the plan; answers the
    /// nodes it wrote to.
    pub(super) fn roll_out<R: RngCore + ?Sized>(
        &self,
        plan: &mut DaemonSetPlan,
        memo: Option<&Memo>,
        new_pods: &mut NewPods<'_>,
        rng: &mut R,
    ) -> Vec<String> {
        let (ds, hash, now) = (self.ds, self.hash, self.now);
        // The automatic rollback looks at every node's pods: a memo is
        // never kept for a DaemonSet with a policy (see
        // [`Memo::is_valid_for`]), so the diffs are of every node here.
        if matches!(auto_rollback(&ds.metadata), Ok(Some(_))) {
            let slots: Vec<rollout::NodeSlot<'_>> =
                self.diffs.iter().filter_map(NodeDiff::slot).collect();
            match rollout::auto_rollback_due(ds, &slots, hash, now) {
                Ok(due) => plan.rollback = Some(due),
                Err(Some(at)) => plan.requeue(at),
                Err(None) => {}
            }
        }
        if !(plan.create.is_empty() && plan.delete.is_empty()) {
            return Vec::new();
        }
        let step = match memo {
            Some(memo) => {
                facts::rolling_update(ds, memo.facts.iter().map(|(n, f)| (n.as_str(), f)), now)
            }
            None => facts::rolling_update(
                ds,
                self.diffs.iter().map(|d| d.node).zip(self.facts.iter()),
                now,
            ),
        };
        if step.delete_on.is_empty() && step.create_on.is_empty() {
            return Vec::new();
        }
        let diffed: FastMap<&str, &NodeDiff<'_>> = self.diffs.iter().map(|d| (d.node, d)).collect();
        let mut touched = Vec::new();
        for node in step.delete_on {
            let old = diffed
                .get(node)
                .and_then(|d| facts::updated_and_old(&d.pods, hash))
                .and_then(|(_, old)| old);
            let d = match old {
                Some(pod) => deletion(ds, pod, DeletionReason::Rollout, now, rng),
                None => {
                    let ident = memo
                        .and_then(|m| m.facts.get(node))
                        .and_then(|f| f.split.as_ref())
                        .and_then(|s| s.old_pod.as_ref());
                    match ident {
                        Some(ident) => {
                            deletion_of(ds, ident.clone(), DeletionReason::Rollout, now, rng)
                        }
                        None => continue,
                    }
                }
            };
            plan.delete.push(d);
            touched.push(node.to_owned());
        }
        for node in step.create_on {
            plan.create
                .push(new_pods.create(node, Some(hash), now, rng));
            touched.push(node.to_owned());
        }
        touched
    }
}
