//! Daemon pods: building a new one from the template, its name, which pods
//! a DaemonSet owns (adoption and release, Kubernetes' `ClaimPods`), their
//! order, and their readiness.

use std::cmp::Ordering;
use std::time::Duration;

use drover_api::{
    pod_condition, DaemonSet, ObjectMeta, OwnerReference, Pod, PodPhase, PodSpec, PodStatus,
    Resource,
};
use rand::RngCore;

use crate::events::namespace_of;
use crate::time::Timestamp;

/// The label that ties a daemon pod to the ControllerRevision of its
/// template (set on new pods when the planner is given a revision hash).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// Characters of generated name suffixes: Kubernetes' alphabet, without
/// vowels (no words) nor easily confused characters.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of generated name suffixes.
pub const SUFFIX_LENGTH: usize = 5;
/// Longest prefix kept before the suffix (Kubernetes:
/// `maxGeneratedNameLength`), so generated names stay DNS labels.
const MAX_GENERATED_PREFIX: usize = 63 - SUFFIX_LENGTH;

/// A random suffix such as `x7k2q`, from the caller's RNG.
pub fn name_suffix<R: RngCore + ?Sized>(rng: &mut R) -> String {
    (0..SUFFIX_LENGTH)
        .map(|_| {
            let index = rng.next_u32() as usize % SUFFIX_ALPHABET.len();
            char::from(SUFFIX_ALPHABET[index])
        })
        .collect()
}

/// The `generateName` of a DaemonSet's pods: `<ds>-`, shortened to leave
/// room for the suffix.
pub fn generate_name_prefix(ds: &DaemonSet) -> String {
    name_prefix(&ds.metadata.name)
}

/// The `generateName` of an owner's pods: `<owner>-`, shortened to leave
/// room for the suffix (Kubernetes' `getPodsPrefix` and
/// `SimpleNameGenerator`).
pub fn name_prefix(owner: &str) -> String {
    let mut prefix = format!("{owner}-");
    if prefix.len() > MAX_GENERATED_PREFIX {
        let mut end = MAX_GENERATED_PREFIX;
        while !prefix.is_char_boundary(end) {
            end -= 1;
        }
        prefix.truncate(end);
    }
    prefix
}

/// The owner reference a daemon pod carries: controller, blocking the
/// owner's deletion, as Kubernetes' `NewControllerRef`.
pub fn controller_ref(ds: &DaemonSet) -> OwnerReference {
    controller_ref_to(ds)
}

/// The controller reference to any owner (a ReplicaSet for its pods, a
/// Deployment for its ReplicaSets), as Kubernetes' `NewControllerRef`.
pub fn controller_ref_to<O: Resource>(owner: &O) -> OwnerReference {
    let meta = owner.metadata();
    OwnerReference {
        api_version: O::API_VERSION.to_owned(),
        kind: O::KIND.to_owned(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..OwnerReference::default()
    }
}

/// A new daemon pod for a node: the template's labels, annotations and
/// spec, the daemon tolerations (in `spec`, see
/// [`super::Eligibility::pod_spec`]), `spec.nodeName`, the owner reference,
/// and `controller-revision-hash` when a revision is known. The store fills
/// in `uid`, `creationTimestamp` and `resourceVersion`.
pub fn new_daemon_pod(
    ds: &DaemonSet,
    spec: &PodSpec,
    node_name: &str,
    name: String,
    revision_hash: Option<&str>,
) -> Pod {
    let template = &ds.spec.template.metadata;
    let mut labels = template.labels.clone();
    if let Some(hash) = revision_hash {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.to_owned(), hash.to_owned());
    }
    let mut spec = spec.clone();
    spec.node_name = node_name.to_owned();
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name: generate_name_prefix(ds),
            namespace: namespace_of(&ds.metadata).to_owned(),
            labels,
            annotations: template.annotations.clone(),
            finalizers: template.finalizers.clone(),
            owner_references: vec![controller_ref(ds)],
            ..ObjectMeta::default()
        },
        spec,
        status: PodStatus {
            phase: Some(PodPhase::Pending),
            ..PodStatus::default()
        },
        ..Pod::default()
    }
}

/// The node a daemon pod belongs to: the one it is bound to, or, while it
/// waits unbound, the one its node affinity pins it to (Kubernetes'
/// `GetTargetNodeName`); empty for neither.
pub fn target_node(pod: &Pod) -> &str {
    if pod.spec.node_name.is_empty() {
        drover_api::node_affinity::pinned_node(&pod.spec).unwrap_or("")
    } else {
        &pod.spec.node_name
    }
}

/// Whether the pod waits to be bound (no `spec.nodeName` yet).
pub fn is_unbound(pod: &Pod) -> bool {
    pod.spec.node_name.is_empty()
}

/// The reason of a pod's `PodScheduled=False` condition while it does not
/// fit (the scheduler's).
pub const UNSCHEDULABLE: &str = "Unschedulable";

/// A daemon pod that does not fit `node_name` yet: unbound, pinned to the
/// node by its affinity, `Pending` with `PodScheduled=False`
/// ([`UNSCHEDULABLE`], `message`), and nominated to the node when pods are
/// preempted there for it (the room they leave is its).
pub fn pending_daemon_pod(
    mut pod: Pod,
    node_name: &str,
    message: String,
    nominated: bool,
    now: Timestamp,
) -> Pod {
    pod.spec.node_name.clear();
    drover_api::node_affinity::pin_to_node(&mut pod.spec, node_name);
    pod.status.nominated_node_name = if nominated {
        node_name.to_owned()
    } else {
        String::new()
    };
    set_unschedulable(&mut pod.status, message, now);
    pod
}

/// Sets `PodScheduled=False` ([`UNSCHEDULABLE`], `message`), keeping its
/// transition time when it was already so.
pub fn set_unschedulable(status: &mut PodStatus, message: String, now: Timestamp) {
    status.phase = Some(PodPhase::Pending);
    let since = status
        .conditions
        .iter()
        .find(|c| {
            c.r#type == pod_condition::POD_SCHEDULED
                && c.status == Some(drover_api::ConditionStatus::False)
        })
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.to_rfc3339());
    status
        .conditions
        .retain(|c| c.r#type != pod_condition::POD_SCHEDULED);
    status.conditions.push(drover_api::PodCondition {
        r#type: pod_condition::POD_SCHEDULED.to_owned(),
        status: Some(drover_api::ConditionStatus::False),
        last_transition_time: Some(since),
        reason: UNSCHEDULABLE.to_owned(),
        message,
        ..Default::default()
    });
}

/// The message of a pod's `PodScheduled=False` condition, if it has one.
pub fn unschedulable_message(pod: &Pod) -> Option<&str> {
    pod.status
        .conditions
        .iter()
        .find(|c| {
            c.r#type == pod_condition::POD_SCHEDULED
                && c.status == Some(drover_api::ConditionStatus::False)
        })
        .map(|c| c.message.as_str())
}

/// A waiting pod bound to `node_name` now: `PodScheduled=True`, no longer
/// nominated.
pub fn bound(pod: &Pod, node_name: &str, now: Timestamp) -> Pod {
    let mut pod = pod.clone();
    pod.spec.node_name = node_name.to_owned();
    pod.status.nominated_node_name.clear();
    pod.status
        .conditions
        .retain(|c| c.r#type != pod_condition::POD_SCHEDULED);
    pod.status.conditions.push(drover_api::PodCondition {
        r#type: pod_condition::POD_SCHEDULED.to_owned(),
        status: Some(drover_api::ConditionStatus::True),
        last_transition_time: Some(now.to_rfc3339()),
        ..Default::default()
    });
    pod
}

/// Whether the pod is being deleted (`deletionTimestamp` set).
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// The pod's creation time; `None` (earliest, like Go's zero time) when
/// absent or not valid.
pub fn creation_time(pod: &Pod) -> Option<Timestamp> {
    Timestamp::parse_field(pod.metadata.creation_timestamp.as_deref())
}

/// Kubernetes' `podByCreationTimestampAndPhase`: bound pods first, then
/// oldest first, then by name. The first pod of a node is the one that is
/// kept when there are several, and the one whose readiness counts.
pub fn oldest_first(a: &Pod, b: &Pod) -> Ordering {
    a.spec
        .node_name
        .is_empty()
        .cmp(&b.spec.node_name.is_empty())
        .then_with(|| creation_time(a).cmp(&creation_time(b)))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// When the pod's Ready condition last became `True`, if it is ready.
pub fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    if !pod.is_ready() {
        return None;
    }
    Some(Timestamp::parse_field(
        pod.condition(pod_condition::READY)
            .and_then(|c| c.last_transition_time.as_deref()),
    ))
}

/// The DaemonSet's `minReadySeconds` (0 when unset or negative).
pub fn min_ready(ds: &DaemonSet) -> Duration {
    Duration::from_secs(u64::try_from(ds.spec.min_ready_seconds.unwrap_or(0)).unwrap_or(0))
}

/// How far past the `minReadySeconds` mark a ready pod's availability is
/// checked again, since availability needs strictly more than
/// `minReadySeconds`.
const AVAILABILITY_SLACK: Duration = Duration::from_millis(1);

/// A pod's readiness, as availability needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// The pod is ready.
    pub ready: bool,
    /// Since when (read only with `minReadySeconds`; `None`: unknown).
    pub since: Option<Timestamp>,
}

impl Readiness {
    /// The pod's readiness; its transition time is parsed only when
    /// `min_ready` is set (without it, ready is available).
    pub fn of(pod: &Pod, min_ready: Duration) -> Self {
        let ready = pod.is_ready();
        let since = if ready && !min_ready.is_zero() {
            ready_since(pod).flatten()
        } else {
            None
        };
        Readiness { ready, since }
    }

    /// Kubernetes' `IsPodAvailable` (see [`is_available`]).
    pub fn available(&self, min_ready: Duration, now: Timestamp) -> bool {
        if min_ready.is_zero() {
            return self.ready;
        }
        self.ready && self.since.is_some_and(|since| since + min_ready < now)
    }

    /// When a ready pod that is not available yet becomes so.
    pub fn available_at(&self, min_ready: Duration, now: Timestamp) -> Option<Timestamp> {
        if !self.ready || self.available(min_ready, now) {
            return None;
        }
        self.since.map(|s| s + min_ready + AVAILABILITY_SLACK)
    }
}

/// When a ready pod that is not available yet becomes so (just past
/// `minReadySeconds` after it turned ready, since availability needs
/// strictly more): the time to plan again. `None` when the pod is not
/// ready, already available, or has no readiness time.
pub fn available_at(pod: &Pod, min_ready: Duration, now: Timestamp) -> Option<Timestamp> {
    Readiness::of(pod, min_ready).available_at(min_ready, now)
}

/// Kubernetes' `IsPodAvailable`: ready, and ready for longer than
/// `min_ready` (strictly) — with `min_ready` zero, ready is enough. A ready
/// pod without a transition time is not available when `min_ready` is set.
/// Without `minReadySeconds` the readiness time is not read (a planner asks
/// this of every pod on every pass).
pub fn is_available(pod: &Pod, min_ready: Duration, now: Timestamp) -> bool {
    Readiness::of(pod, min_ready).available(min_ready, now)
}

/// What a DaemonSet makes of one pod of its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by the DaemonSet and matching its selector.
    Owned,
    /// Matching the selector, without a controller: to adopt.
    Adopt,
    /// Controlled by the DaemonSet, no longer matching its selector, not
    /// being deleted: to release (its owner reference is removed; the pod
    /// keeps running).
    Release,
    /// Not the DaemonSet's business.
    Ignore,
}

/// Kubernetes' `ClaimObject`, for a DaemonSet that is not being deleted and
/// a pod of its namespace. Orphans are adopted only when they match, are
/// not being deleted, and are bound to a node (`spec.nodeName`): drover has
/// no scheduler, so an unbound orphan could never become a daemon pod. A
/// pod being deleted is not released either (the write would be wasted).
/// Mirror pods (a node's static pods) are never a DaemonSet's business,
/// whatever their labels.
pub fn claim(ds: &DaemonSet, matches: impl Fn(&Pod) -> bool, pod: &Pod) -> Claim {
    if pod.is_mirror() {
        return Claim::Ignore;
    }
    match pod.metadata.controller_ref() {
        Some(owner) if owner.uid == ds.metadata.uid => {
            if matches(pod) {
                Claim::Owned
            } else if is_terminating(pod) {
                Claim::Ignore
            } else {
                Claim::Release
            }
        }
        Some(_) => Claim::Ignore,
        None if matches(pod) && !is_terminating(pod) && !pod.spec.node_name.is_empty() => {
            Claim::Adopt
        }
        None => Claim::Ignore,
    }
}

/// The pod with the DaemonSet added as its controller.
pub fn adopted(ds: &DaemonSet, pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    pod.metadata.owner_references.push(controller_ref(ds));
    pod
}

/// The pod without the DaemonSet's owner reference.
pub fn released(ds: &DaemonSet, pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    pod.metadata
        .owner_references
        .retain(|r| r.uid != ds.metadata.uid);
    pod
}

/// Whether the pod is in a phase that will not run again.
pub fn phase_is(pod: &Pod, phase: &PodPhase) -> bool {
    pod.status.phase.as_ref() == Some(phase)
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::{ConditionStatus, PodCondition};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn pod(name: &str, node: &str, created: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.spec.node_name = node.into();
        pod.metadata.creation_timestamp = created.map(str::to_owned);
        pod
    }

    #[test]
    fn suffixes_use_the_kubernetes_alphabet() {
        let mut rng = StdRng::seed_from_u64(1);
        let suffix = name_suffix(&mut rng);
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
        let mut again = StdRng::seed_from_u64(1);
        assert_eq!(name_suffix(&mut again), suffix);
    }

    #[test]
    fn long_names_are_shortened() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "a".repeat(70);
        assert_eq!(generate_name_prefix(&ds).len(), 58);
        ds.metadata.name = "agent".into();
        assert_eq!(generate_name_prefix(&ds), "agent-");
    }

    #[test]
    fn order_is_bound_then_oldest_then_name() {
        let mut pods = [
            pod("d", "", Some("2024-01-01T00:00:00Z")),
            pod("c", "n", Some("2024-01-02T00:00:00Z")),
            pod("b", "n", Some("2024-01-01T00:00:00Z")),
            pod("a", "n", Some("2024-01-01T00:00:00Z")),
            pod("e", "n", None),
        ];
        pods.sort_by(oldest_first);
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.as_str()).collect();
        assert_eq!(names, ["e", "a", "b", "c", "d"]);
    }

    #[test]
    fn availability_needs_min_ready_seconds() {
        let mut p = pod("a", "n", None);
        let now = Timestamp::parse_rfc3339("2024-01-01T00:00:10Z").unwrap();
        assert!(!is_available(&p, Duration::ZERO, now));
        p.status.conditions.push(PodCondition {
            r#type: "Ready".into(),
            status: Some(ConditionStatus::True),
            last_transition_time: Some("2024-01-01T00:00:00Z".into()),
            ..Default::default()
        });
        assert!(is_available(&p, Duration::ZERO, now));
        assert!(is_available(&p, Duration::from_secs(9), now));
        assert!(!is_available(&p, Duration::from_secs(10), now));
        p.status.conditions[0].last_transition_time = None;
        assert!(!is_available(&p, Duration::from_secs(1), now));
    }

    #[test]
    fn claims_follow_controller_refs() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.uid = "u1".into();
        let yes = |_: &Pod| true;
        let no = |_: &Pod| false;
        let orphan = pod("a", "n", None);
        assert_eq!(claim(&ds, yes, &orphan), Claim::Adopt);
        assert_eq!(claim(&ds, no, &orphan), Claim::Ignore);
        assert_eq!(claim(&ds, yes, &pod("a", "", None)), Claim::Ignore);
        let mut deleting = orphan.clone();
        deleting.metadata.deletion_timestamp = Some("2024-01-01T00:00:00Z".into());
        assert_eq!(claim(&ds, yes, &deleting), Claim::Ignore);
        let mine = adopted(&ds, &orphan);
        assert_eq!(mine.metadata.controller_ref(), Some(&controller_ref(&ds)));
        assert_eq!(claim(&ds, yes, &mine), Claim::Owned);
        assert_eq!(claim(&ds, no, &mine), Claim::Release);
        assert_eq!(released(&ds, &mine), orphan);
        let mut leaving = mine.clone();
        leaving.metadata.deletion_timestamp = Some("2024-01-01T00:00:00Z".into());
        assert_eq!(claim(&ds, no, &leaving), Claim::Ignore);
        let mut other = DaemonSet::default();
        other.metadata.uid = "u2".into();
        assert_eq!(claim(&ds, yes, &adopted(&other, &orphan)), Claim::Ignore);
        // A mirror pod matching the selector is left alone, owner or not.
        let mut mirror = orphan.clone();
        mirror
            .metadata
            .annotations
            .insert(drover_api::pod_annotation::CONFIG_MIRROR.into(), "x".into());
        assert_eq!(claim(&ds, yes, &mirror), Claim::Ignore);
    }

    #[test]
    fn only_a_false_pod_scheduled_condition_says_why_a_pod_waits() {
        let mut p = pod("a", "", None);
        assert_eq!(unschedulable_message(&p), None);
        p.status.conditions = vec![
            PodCondition {
                r#type: "Ready".into(),
                status: Some(ConditionStatus::False),
                message: "not ready".into(),
                ..Default::default()
            },
            PodCondition {
                r#type: "PodScheduled".into(),
                status: Some(ConditionStatus::True),
                message: "bound".into(),
                ..Default::default()
            },
        ];
        assert_eq!(unschedulable_message(&p), None);
        p.status.conditions[1].status = Some(ConditionStatus::False);
        p.status.conditions[1].message = "Too many pods".into();
        assert_eq!(unschedulable_message(&p), Some("Too many pods"));
    }

    #[test]
    fn the_controller_reference_is_kubernetes_new_controller_ref() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.uid = "u1".into();
        assert_eq!(
            controller_ref(&ds),
            OwnerReference {
                api_version: "apps/v1".into(),
                kind: "DaemonSet".into(),
                name: "agent".into(),
                uid: "u1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
                ..OwnerReference::default()
            }
        );
    }

    #[test]
    fn an_unschedulable_pod_keeps_the_time_it_became_so() {
        let t0 = Timestamp::parse_rfc3339("2024-01-01T00:00:00Z").unwrap();
        let t1 = Timestamp::parse_rfc3339("2024-01-01T00:05:00Z").unwrap();
        let mut status = drover_api::PodStatus::default();
        set_unschedulable(&mut status, "0/1 nodes are available".into(), t0);
        let scheduled = |s: &drover_api::PodStatus| {
            let c: Vec<_> = s
                .conditions
                .iter()
                .filter(|c| c.r#type == "PodScheduled")
                .cloned()
                .collect();
            assert_eq!(c.len(), 1, "one PodScheduled condition: {c:?}");
            c[0].clone()
        };
        let c = scheduled(&status);
        assert_eq!(status.phase, Some(drover_api::PodPhase::Pending));
        assert_eq!(c.status, Some(ConditionStatus::False));
        assert_eq!(c.reason, "Unschedulable");
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2024-01-01T00:00:00Z")
        );
        // Still unschedulable, for another reason: the time stays.
        set_unschedulable(&mut status, "Too many pods".into(), t1);
        let c = scheduled(&status);
        assert_eq!(c.message, "Too many pods");
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2024-01-01T00:00:00Z")
        );
        // Scheduled in between: a new transition.
        status.conditions[0].status = Some(ConditionStatus::True);
        set_unschedulable(&mut status, "Too many pods".into(), t1);
        let c = scheduled(&status);
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2024-01-01T00:05:00Z")
        );
    }

    #[test]
    fn new_pods_come_from_the_template() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.uid = "u1".into();
        ds.spec.template.metadata.labels = [("app".to_string(), "agent".to_string())].into();
        ds.spec.template.metadata.annotations = [("a".to_string(), "b".to_string())].into();
        let pod = new_daemon_pod(
            &ds,
            &ds.spec.template.spec,
            "n1",
            "agent-xyz12".into(),
            Some("5d8f"),
        );
        assert_eq!(pod.metadata.name, "agent-xyz12");
        assert_eq!(pod.metadata.generate_name, "agent-");
        assert_eq!(pod.metadata.namespace, "default");
        assert_eq!(
            pod.metadata.labels.get("app").map(String::as_str),
            Some("agent")
        );
        assert_eq!(
            pod.metadata
                .labels
                .get(CONTROLLER_REVISION_HASH_LABEL)
                .map(String::as_str),
            Some("5d8f")
        );
        assert_eq!(pod.metadata.annotations.len(), 1);
        assert_eq!(pod.spec.node_name, "n1");
        assert_eq!(pod.status.phase, Some(PodPhase::Pending));
        let owner = pod.metadata.controller_ref().unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("DaemonSet", "agent", "u1")
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
}
