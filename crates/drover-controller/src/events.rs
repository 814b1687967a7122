//! Events the controllers record, with Kubernetes' reasons and messages
//! (`kubectl describe` and `kubectl get events` users know them).
//!
//! | reason | type | emitted by | message |
//! |---|---|---|---|
//! | `SuccessfulCreate` | Normal | DaemonSet | `Created pod: NAME` |
//! | `FailedCreate` | Warning | DaemonSet | `Error creating: ERROR` |
//! | `SuccessfulDelete` | Normal | DaemonSet | `Deleted pod: NAME` |
//! | `FailedDelete` | Warning | DaemonSet | `Error deleting: ERROR` |
//! | `FailedDaemonPod` | Warning | DaemonSet | `Found failed daemon pod NS/NAME on node NODE, will try to kill it` |
//! | `SucceededDaemonPod` | Normal | DaemonSet | `Found succeeded daemon pod NS/NAME on node NODE, will try to delete it` |
//! | `SelectingAll` | Warning | DaemonSet | `This daemon set is selecting all pods. A non-empty selector is required.` |
//! | `NodeNotReady` | Normal | Node | `Node NAME status is now: NodeNotReady` |
//! | `NodeReady` | Normal | Node | `Node NAME status is now: NodeReady` |
//! | `DeletingNode` | Normal | Node | `Deleting node NAME because it has been unreachable since TIME` |
//!
//! An event is named `<object>.<16 hex digits>` (Kubernetes appends the
//! time in hex); the digits come from the caller's RNG, or from the time for
//! node events, so that a plan stays deterministic.

use drover_api::{
    event_type, DaemonSet, Event, EventSource, Node, ObjectMeta, ObjectReference, Resource,
    DEFAULT_NAMESPACE,
};
use rand::RngCore;

use crate::time::Timestamp;

/// The component that reports DaemonSet events (Kubernetes' own name).
pub const DAEMONSET_CONTROLLER: &str = "daemonset-controller";
/// The component that reports node lifecycle events (Kubernetes' own name).
pub const NODE_CONTROLLER: &str = "node-controller";

/// Event reasons, as Kubernetes spells them.
pub mod reason {
    /// A daemon pod was created.
    pub const SUCCESSFUL_CREATE: &str = "SuccessfulCreate";
    /// A daemon pod could not be created.
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// A daemon pod was deleted.
    pub const SUCCESSFUL_DELETE: &str = "SuccessfulDelete";
    /// A daemon pod could not be deleted.
    pub const FAILED_DELETE: &str = "FailedDelete";
    /// A daemon pod failed and will be replaced.
    pub const FAILED_DAEMON_POD: &str = "FailedDaemonPod";
    /// A daemon pod exited successfully and will be replaced.
    pub const SUCCEEDED_DAEMON_POD: &str = "SucceededDaemonPod";
    /// The DaemonSet's selector is empty: it is not acted on.
    pub const SELECTING_ALL: &str = "SelectingAll";
    /// The DaemonSet's selector is missing or not valid: it is not acted on
    /// (drover's own reason; the API server refuses such selectors).
    pub const INVALID_SELECTOR: &str = "InvalidSelector";
    /// A node stopped heartbeating (Ready became Unknown).
    pub const NODE_NOT_READY: &str = "NodeNotReady";
    /// A node heartbeats again (Ready became True).
    pub const NODE_READY: &str = "NodeReady";
    /// A node unreachable past the garbage-collection horizon is deleted.
    pub const DELETING_NODE: &str = "DeletingNode";
    /// A pod is bound to a node that does not exist (drover's own reason:
    /// it goes unless the node joins within the pod GC's grace period).
    pub const NODE_NOT_FOUND: &str = "NodeNotFound";
    /// The pod garbage collector deleted a pod of a node that does not
    /// exist (the reason of Kubernetes' `DisruptionTarget` condition).
    pub const DELETION_BY_POD_GC: &str = "DeletionByPodGC";
}

/// The component that reports the pod garbage collector's events.
pub const POD_GC: &str = "pod-garbage-collector";

/// The name of a new event about `object`: `<object>.<16 hex digits>`.
pub fn event_name(object: &str, suffix: u64) -> String {
    format!("{object}.{suffix:016x}")
}

fn reference_to<R: Resource>(object: &R) -> ObjectReference {
    let meta = object.metadata();
    ObjectReference {
        api_version: R::API_VERSION.to_owned(),
        kind: R::KIND.to_owned(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// An event with every field Kubernetes' event recorder fills in;
/// `metadata` gives its name and namespace.
pub fn new_event(
    involved_object: ObjectReference,
    metadata: ObjectMeta,
    component: &str,
    event_type: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Event {
    let time = now.to_rfc3339();
    Event {
        metadata,
        involved_object,
        reason: reason.to_owned(),
        message,
        source: EventSource {
            component: component.to_owned(),
            ..EventSource::default()
        },
        first_timestamp: Some(time.clone()),
        last_timestamp: Some(time),
        count: Some(1),
        r#type: event_type.to_owned(),
        reporting_component: component.to_owned(),
        ..Event::default()
    }
}

/// An event about a DaemonSet, in its namespace, named with the RNG.
pub fn daemon_set_event<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    event_type: &str,
    reason: &str,
    message: String,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    object_event(
        ds,
        DAEMONSET_CONTROLLER,
        (event_type, reason),
        message,
        now,
        rng,
    )
}

/// An event about any namespaced object (a ReplicaSet, a Deployment…)
/// reported by `component`, in the object's namespace, named with the RNG;
/// `(event_type, reason)` as Kubernetes spells them.
pub fn object_event<O: Resource, R: RngCore + ?Sized>(
    object: &O,
    component: &str,
    (event_type, reason): (&str, &str),
    message: String,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    let meta = object.metadata();
    new_event(
        reference_to(object),
        event_meta(event_name(&meta.name, rng.next_u64()), namespace_of(meta)),
        component,
        event_type,
        reason,
        message,
        now,
    )
}

/// `SuccessfulCreate`: `Created pod: NAME`.
pub fn created<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    pod_name: &str,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    daemon_set_event(
        ds,
        event_type::NORMAL,
        reason::SUCCESSFUL_CREATE,
        format!("Created pod: {pod_name}"),
        now,
        rng,
    )
}

/// `FailedCreate`: `Error creating: ERROR`, for the loop to record when
/// a planned creation is refused.
pub fn failed_create<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    error: &str,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    daemon_set_event(
        ds,
        event_type::WARNING,
        reason::FAILED_CREATE,
        format!("Error creating: {error}"),
        now,
        rng,
    )
}

/// `SuccessfulDelete`: `Deleted pod: NAME`.
pub fn deleted<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    pod_name: &str,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    daemon_set_event(
        ds,
        event_type::NORMAL,
        reason::SUCCESSFUL_DELETE,
        format!("Deleted pod: {pod_name}"),
        now,
        rng,
    )
}

/// `FailedDelete`: `Error deleting: ERROR`, for the loop to record when a
/// planned deletion is refused.
pub fn failed_delete<R: RngCore + ?Sized>(
    ds: &DaemonSet,
    error: &str,
    now: Timestamp,
    rng: &mut R,
) -> Event {
    daemon_set_event(
        ds,
        event_type::WARNING,
        reason::FAILED_DELETE,
        format!("Error deleting: {error}"),
        now,
        rng,
    )
}

/// An event about a node. Kubernetes records node events in the `default`
/// namespace with the node's name as the involved object's UID; the name's
/// digits are the time, as Kubernetes does.
pub fn node_event(
    node: &Node,
    event_type: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Event {
    let mut involved = reference_to(node);
    involved.uid = node.metadata.name.clone();
    // Two's complement keeps the digits unique for instants before 1970 too.
    let suffix = now.unix_nanos() as u64;
    new_event(
        involved,
        event_meta(event_name(&node.metadata.name, suffix), DEFAULT_NAMESPACE),
        NODE_CONTROLLER,
        event_type,
        reason,
        message,
        now,
    )
}

/// An event about the pod `(namespace, name, uid)`, in its namespace; the
/// name's digits are the time, as for node events.
pub fn pod_event(
    (namespace, name, uid): (&str, &str, &str),
    component: &str,
    event_type: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Event {
    let involved = ObjectReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        ..ObjectReference::default()
    };
    new_event(
        involved,
        event_meta(event_name(name, now.unix_nanos() as u64), namespace),
        component,
        event_type,
        reason,
        message,
        now,
    )
}

fn event_meta(name: String, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name,
        namespace: namespace.to_owned(),
        ..ObjectMeta::default()
    }
}

/// Whether an event is older than `ttl` at `now`, as the API server's
/// event TTL (`--event-ttl`, 1 h by default) judges it: by its last
/// occurrence (`lastTimestamp`, else `eventTime`, `firstTimestamp`, the
/// object's creation). An event with no valid time at all has expired.
pub fn expired(event: &Event, ttl: std::time::Duration, now: Timestamp) -> bool {
    let last = [
        event.last_timestamp.as_deref(),
        event.event_time.as_deref(),
        event.first_timestamp.as_deref(),
        event.metadata.creation_timestamp.as_deref(),
    ]
    .into_iter()
    .find_map(|t| Timestamp::parse_field(t));
    last.is_none_or(|t| t.saturating_add(ttl) <= now)
}

/// The namespace of an object, `default` when empty.
pub(crate) fn namespace_of(meta: &ObjectMeta) -> &str {
    if meta.namespace.is_empty() {
        DEFAULT_NAMESPACE
    } else {
        &meta.namespace
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn events_expire_an_hour_after_their_last_occurrence() {
        use super::*;
        let t0 = Timestamp::from_unix_seconds(1_700_000_000);
        let hour = std::time::Duration::from_secs(3600);
        let mut e = Event {
            first_timestamp: Some(t0.to_rfc3339()),
            ..Event::default()
        };
        assert!(!expired(
            &e,
            hour,
            t0 + std::time::Duration::from_secs(3599)
        ));
        assert!(expired(&e, hour, t0 + hour));
        // Seen again later: it lives on from then.
        e.last_timestamp = Some((t0 + hour).to_rfc3339());
        assert!(!expired(&e, hour, t0 + hour));
        // No time at all: gone.
        assert!(expired(&Event::default(), hour, t0));
    }

    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn daemon_set_events_look_like_kubernetes() {
        let mut ds = DaemonSet::default();
        ds.metadata.name = "agent".into();
        ds.metadata.namespace = "ops".into();
        ds.metadata.uid = "u1".into();
        let now = Timestamp::from_unix_seconds(1_700_000_000);
        let mut rng = StdRng::seed_from_u64(7);
        let event = created(&ds, "agent-abcde", now, &mut rng);
        assert_eq!(event.reason, "SuccessfulCreate");
        assert_eq!(event.message, "Created pod: agent-abcde");
        assert_eq!(event.r#type, "Normal");
        assert_eq!(event.metadata.namespace, "ops");
        assert!(event.metadata.name.starts_with("agent."));
        assert_eq!(event.metadata.name.len(), "agent.".len() + 16);
        ds.metadata.resource_version = "42".into();
        let event = created(&ds, "agent-abcde", now, &mut rng);
        // The involved object as Kubernetes' recorder refers to it.
        assert_eq!(
            event.involved_object,
            ObjectReference {
                api_version: "apps/v1".into(),
                kind: "DaemonSet".into(),
                namespace: "ops".into(),
                name: "agent".into(),
                uid: "u1".into(),
                resource_version: "42".into(),
                ..ObjectReference::default()
            }
        );
        assert_eq!(event.source.component, "daemonset-controller");
        assert_eq!(
            event.first_timestamp.as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
        assert_eq!(event.count, Some(1));
        let failed = failed_delete(&ds, "boom", now, &mut rng);
        assert_eq!(failed.r#type, "Warning");
        assert_eq!(failed.message, "Error deleting: boom");
        assert_ne!(failed.metadata.name, event.metadata.name);
    }

    #[test]
    fn node_events_live_in_default() {
        let mut node = Node::default();
        node.metadata.name = "n1".into();
        let event = node_event(
            &node,
            event_type::NORMAL,
            reason::NODE_NOT_READY,
            "Node n1 status is now: NodeNotReady".into(),
            Timestamp::from_unix_nanos(255),
        );
        assert_eq!(event.metadata.namespace, "default");
        assert_eq!(event.metadata.name, "n1.00000000000000ff");
        assert_eq!(event.involved_object.kind, "Node");
        assert_eq!(event.involved_object.uid, "n1");
        assert_eq!(event.involved_object.namespace, "");
    }

    #[test]
    fn pod_events_refer_to_the_pod_in_its_namespace() {
        let event = pod_event(
            ("ops", "agent-x", "u9"),
            "kubelet",
            event_type::WARNING,
            "BackOff",
            "Back-off restarting failed container".into(),
            Timestamp::from_unix_nanos(255),
        );
        assert_eq!(event.metadata.namespace, "ops");
        assert_eq!(event.metadata.name, "agent-x.00000000000000ff");
        assert_eq!(
            event.involved_object,
            ObjectReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: "ops".into(),
                name: "agent-x".into(),
                uid: "u9".into(),
                ..ObjectReference::default()
            }
        );
        assert_eq!(event.source.component, "kubelet");
        assert_eq!(event.r#type, "Warning");
    }
}
