//! Pod events an agent reports (`PodEvents`, the kubelet's events, counted
//! and rate-limited by the agent): each is checked (NodeRestriction: about
//! a pod bound to the session's node, named by uid; the bounds of
//! [`crate::limits`]), made a Kubernetes Event (`source` kubelet on that
//! node) and written: created, or, for a name already written, updated
//! with its new count (only an Event about that very pod from that very
//! node). A message over a bound is refused whole; a session writes at most
//! [`EVENT_BUDGET_BURST`] events at once, then [`EVENT_BUDGET_PER_SECOND`].
//! The server's own `Scheduled` event is [`scheduled`].

use crate::api::batch::Write;
use crate::api::mirror::mirror_uid;
use crate::api::Objects;
use crate::cache::Informer;
use crate::error::ApiError;
use crate::limits::{
    EVENT_BUDGET_BURST, EVENT_BUDGET_PER_SECOND, MAX_EVENTS_PER_MESSAGE, MAX_EVENT_FIELD_BYTES,
    MAX_EVENT_MESSAGE_BYTES, MAX_EVENT_REASON_BYTES,
};
use drover_api::{
    event_type, Event, EventSource, Kind, Manifest, ObjectMeta, ObjectReference, Pod,
};
use drover_controller::time::Timestamp;
use drover_proto::v1 as pb;
use std::time::Instant;

/// The component of the agents' events (Kubernetes' name).
pub const KUBELET: &str = "kubelet";
/// The component of the `Scheduled` event (Kubernetes' name).
pub const SCHEDULER: &str = "default-scheduler";

/// Checks a whole `PodEvents` message before any of it is used.
pub fn check_message(m: &pb::PodEvents) -> Result<(), String> {
    if m.events.len() > MAX_EVENTS_PER_MESSAGE {
        return Err(format!(
            "{} events in one message, more than the limit of {MAX_EVENTS_PER_MESSAGE}",
            m.events.len()
        ));
    }
    for e in &m.events {
        let field = |what: &str, v: &str, max: usize| {
            if v.len() > max {
                Err(format!(
                    "event {:?}: {what} is {} bytes, more than the limit of {max}",
                    e.name,
                    v.len()
                ))
            } else {
                Ok(())
            }
        };
        field("reason", &e.reason, MAX_EVENT_REASON_BYTES)?;
        field("message", &e.message, MAX_EVENT_MESSAGE_BYTES)?;
        field("fieldPath", &e.field_path, MAX_EVENT_FIELD_BYTES)?;
        field("name", &e.name, 253)?;
        if e.reason.is_empty() || !e.reason.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(format!(
                "event {:?}: reason {:?} must be letters and digits (CamelCase)",
                e.name, e.reason
            ));
        }
    }
    Ok(())
}

/// Why a node's pod event was not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The pod is no longer in the store: deleted (a rollout, a drain)
    /// before the agent's report of stopping it arrived. Routine.
    #[error("pod {0} is gone (deleted before its event arrived)")]
    Gone(String),
    /// The pod exists but is not this node's, or is another incarnation:
    /// an agent writing about what it does not run.
    #[error("{0}")]
    NotBound(String),
    /// A malformed event (name, type, time).
    #[error("{0}")]
    Invalid(String),
}

/// The Event an agent's report stands for, if the node may write it: the
/// pod (`pod`, from the cache) is bound to `node` with the reported uid,
/// the name is `<pod>.<hex>`, the type Normal or Warning. Times in the
/// future (a node's clock ahead) are taken as `now`.
pub fn event_of(
    node: &str,
    e: &pb::PodEvent,
    pod: Option<&Pod>,
    now: Timestamp,
) -> Result<Event, Refused> {
    let Some(pod) = pod else {
        return Err(Refused::Gone(format!("{}/{}", e.namespace, e.pod)));
    };
    // A static pod's events name the uid the node gave it; its mirror in
    // the store has a uid of its own and carries the node's in its
    // `kubernetes.io/config.mirror` annotation.
    let ours = pod.metadata.uid == e.uid || mirror_uid(pod) == Some(e.uid.as_str());
    let bound = !e.uid.is_empty() && pod.spec.node_name == node && ours;
    if !bound {
        return Err(Refused::NotBound(format!(
            "pod {}/{} (uid {:?}) is not bound to node {node}",
            e.namespace, e.pod, e.uid
        )));
    }
    let suffix = e
        .name
        .strip_prefix(e.pod.as_str())
        .and_then(|s| s.strip_prefix('.'));
    if !suffix
        .is_some_and(|s| !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Refused::Invalid(format!(
            "event name {:?} must be the pod's name, a dot and up to 16 hex digits",
            e.name
        )));
    }
    let r#type = match e.r#type.as_str() {
        event_type::NORMAL => event_type::NORMAL,
        event_type::WARNING => event_type::WARNING,
        other => {
            return Err(Refused::Invalid(format!(
                "event type {other:?} must be Normal or Warning"
            )))
        }
    };
    let time = |t: &str| {
        Timestamp::parse_rfc3339(t)
            .map(|t| t.min(now))
            .map_err(|err| {
                Refused::Invalid(format!(
                    "event {:?}: timestamp {t:?}: {}",
                    e.name, err.reason
                ))
            })
    };
    let last = time(&e.last_timestamp)?;
    let first = time(&e.first_timestamp)?.min(last);
    Ok(Event {
        metadata: ObjectMeta {
            name: e.name.clone(),
            namespace: e.namespace.clone(),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: e.namespace.clone(),
            name: e.pod.clone(),
            // The object's own uid (a mirror's, for a static pod), so that
            // `kubectl describe` finds the event by it.
            uid: pod.metadata.uid.clone(),
            field_path: e.field_path.clone(),
            ..ObjectReference::default()
        },
        reason: e.reason.clone(),
        message: e.message.clone(),
        source: EventSource {
            component: KUBELET.into(),
            host: node.into(),
            ..EventSource::default()
        },
        first_timestamp: Some(first.to_rfc3339()),
        last_timestamp: Some(last.to_rfc3339()),
        count: Some(i32::try_from(e.count.max(1)).unwrap_or(i32::MAX)),
        r#type: r#type.into(),
        reporting_component: KUBELET.into(),
        reporting_instance: node.into(),
        ..Event::default()
    })
}

/// The `Scheduled` event of a daemon pod bound to its node, as the
/// scheduler records it (named `<pod>.<hex of now in ns>`).
pub fn scheduled(pod: &Pod, now: Timestamp) -> Event {
    let m = &pod.metadata;
    let message = format!(
        "Successfully assigned {}/{} to {}",
        m.namespace, m.name, pod.spec.node_name
    );
    scheduler_event(pod, event_type::NORMAL, "Scheduled", message, now)
}

/// The `FailedScheduling` warning of a daemon pod that waits unbound
/// because it does not fit its node: the message of its `PodScheduled`
/// condition.
pub fn failed_scheduling(pod: &Pod, now: Timestamp) -> Event {
    let message = drover_controller::daemon::pods::unschedulable_message(pod)
        .unwrap_or("the pod does not fit its node")
        .to_owned();
    scheduler_event(pod, event_type::WARNING, "FailedScheduling", message, now)
}

fn scheduler_event(pod: &Pod, kind: &str, reason: &str, message: String, now: Timestamp) -> Event {
    let m = &pod.metadata;
    let time = now.to_rfc3339();
    Event {
        metadata: ObjectMeta {
            name: format!("{}.{:x}", m.name, now.unix_nanos()),
            namespace: m.namespace.clone(),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: m.namespace.clone(),
            name: m.name.clone(),
            uid: m.uid.clone(),
            ..ObjectReference::default()
        },
        reason: reason.into(),
        message,
        source: EventSource {
            component: SCHEDULER.into(),
            ..EventSource::default()
        },
        first_timestamp: Some(time.clone()),
        last_timestamp: Some(time),
        count: Some(1),
        r#type: kind.into(),
        reporting_component: SCHEDULER.into(),
        ..Event::default()
    }
}

/// A session's write budget: a token bucket.
pub struct Budget {
    tokens: f64,
    at: Instant,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            tokens: EVENT_BUDGET_BURST as f64,
            at: Instant::now(),
        }
    }
}

impl Budget {
    /// Takes a token if there is one at `now`.
    pub fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at);
        self.at = now.max(self.at);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * EVENT_BUDGET_PER_SECOND)
            .min(EVENT_BUDGET_BURST as f64);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Writes one Event: creates it, or updates the one of that name when it
/// is this node's Event about the same pod.
async fn put(objects: &Objects, node: &str, e: Event) -> Result<(), ApiError> {
    let (ns, name) = (e.metadata.namespace.clone(), e.metadata.name.clone());
    for _ in 0..2 {
        let existing = match objects.get_local(Kind::Event, &ns, &name).await {
            Ok(Manifest::Event(old)) => Some(old),
            Ok(_) => None,
            Err(ApiError::NotFound(_)) => None,
            Err(err) => return Err(err),
        };
        let Some(old) = existing else {
            match objects.create(Manifest::Event(Box::new(e.clone()))).await {
                Err(ApiError::AlreadyExists(_)) => continue,
                other => return other.map(|_| ()),
            }
        };
        let same = old.involved_object.uid == e.involved_object.uid
            && old.involved_object.kind == "Pod"
            && old.source.host == node;
        if !same {
            return Err(ApiError::Forbidden(format!(
                "event {ns}/{name} is not this node's event about pod {}",
                e.involved_object.name
            )));
        }
        let mut new = e.clone();
        new.metadata = old.metadata.clone();
        match objects.update(Manifest::Event(Box::new(new))).await {
            Err(ApiError::Conflict(_) | ApiError::NotFound(_)) => continue,
            other => return other.map(|_| ()),
        }
    }
    Err(ApiError::Conflict(format!(
        "event {ns}/{name} kept changing; the next count updates it"
    )))
}

/// Writes what a node reported about its pods (see the module docs).
pub async fn write(
    objects: &Objects,
    cache: &Informer,
    node: &str,
    m: pb::PodEvents,
    budget: &mut Budget,
) {
    if let Err(e) = check_message(&m) {
        tracing::warn!(node = %node, "refused pod events: {e}");
        return;
    }
    let snap = cache.snapshot();
    let now = Timestamp::from(std::time::SystemTime::now());
    let clock = Instant::now();
    let mut events = Vec::new();
    let mut over_budget = 0;
    for e in &m.events {
        let key = crate::api::key(Kind::Pod, &e.namespace, &e.pod);
        match event_of(node, e, snap.pods.get(&key).map(|p| &**p), now) {
            Ok(ev) if budget.take(clock) => events.push(ev),
            Ok(_) => over_budget += 1,
            // Routine during rollouts and drains: the agent reports the
            // stop of a pod the store already forgot.
            Err(why @ Refused::Gone(_)) => {
                tracing::debug!(node = %node, "dropped a pod event: {why}")
            }
            Err(why) => tracing::warn!(node = %node, "refused a pod event: {why}"),
        }
    }
    if over_budget > 0 {
        tracing::warn!(node = %node, dropped = over_budget, "pod events over this session's budget ({EVENT_BUDGET_BURST} at once, then {EVENT_BUDGET_PER_SECOND}/s): dropped");
    }
    // New events (most of them) go in one transaction; one whose name
    // exists (a repeat, counted) or that lost a race is put alone.
    let mut fresh = Vec::new();
    let mut known = Vec::new();
    for e in events {
        match objects
            .get_local(Kind::Event, &e.metadata.namespace, &e.metadata.name)
            .await
        {
            Err(ApiError::NotFound(_)) => fresh.push(e),
            _ => known.push(e),
        }
    }
    let creates = fresh
        .iter()
        .map(|e| Write::Create(Manifest::Event(Box::new(e.clone()))))
        .collect();
    for (e, r) in fresh.into_iter().zip(objects.execute(creates).await) {
        match r {
            Ok(_) => {}
            Err(ApiError::AlreadyExists(_)) => known.push(e),
            Err(err) => {
                tracing::debug!(node = %node, event = %e.metadata.name, "pod event not written: {err}")
            }
        }
    }
    let writes = known.into_iter().map(|e| async move {
        let name = e.metadata.name.clone();
        if let Err(err) = put(objects, node, e).await {
            tracing::debug!(node = %node, event = %name, "pod event not written: {err}");
        }
    });
    futures_util::future::join_all(writes).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pod(node: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = "web-abc".into();
        p.metadata.namespace = "default".into();
        p.metadata.uid = "u1".into();
        p.spec.node_name = node.into();
        p
    }

    fn report() -> pb::PodEvent {
        pb::PodEvent {
            namespace: "default".into(),
            pod: "web-abc".into(),
            uid: "u1".into(),
            field_path: "spec.containers{app}".into(),
            name: "web-abc.17a8f0c2d3e4b5a6".into(),
            r#type: "Warning".into(),
            reason: "BackOff".into(),
            message: "Back-off restarting failed container app".into(),
            count: 4,
            first_timestamp: "2024-05-03T15:00:00Z".into(),
            last_timestamp: "2024-05-03T15:02:00Z".into(),
        }
    }

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2024-05-03T15:05:00Z").expect("time")
    }

    #[test]
    fn a_node_reports_events_about_its_own_pods_only() {
        let e = event_of("n1", &report(), Some(&pod("n1")), now()).expect("own pod");
        assert_eq!(e.source.component, "kubelet");
        assert_eq!(e.source.host, "n1");
        assert_eq!(e.involved_object.kind, "Pod");
        assert_eq!(e.involved_object.field_path, "spec.containers{app}");
        assert_eq!(e.count, Some(4));
        assert_eq!(e.last_timestamp.as_deref(), Some("2024-05-03T15:02:00Z"));
        // Another node's pod, an unknown pod, another incarnation.
        let not_bound = |r: Result<Event, Refused>| matches!(r, Err(Refused::NotBound(_)));
        assert!(not_bound(event_of(
            "n2",
            &report(),
            Some(&pod("n1")),
            now()
        )));
        assert_eq!(
            event_of("n1", &report(), None, now()).unwrap_err(),
            Refused::Gone("default/web-abc".into()),
            "a pod deleted before its event came"
        );
        let mut other = report();
        other.uid = "u2".into();
        assert!(not_bound(event_of("n1", &other, Some(&pod("n1")), now())));
        let mut no_uid = report();
        no_uid.uid.clear();
        assert!(not_bound(event_of("n1", &no_uid, Some(&pod("n1")), now())));
    }

    #[test]
    fn a_static_pods_events_go_to_its_mirror() {
        // The node names its static pod by the uid it gave it ("u1"); the
        // mirror in the store has its own ("m1") and the node's in its
        // annotation.
        let mut mirror = pod("n1");
        mirror.metadata.uid = "m1".into();
        mirror.metadata.annotations.insert(
            drover_api::pod_annotation::CONFIG_MIRROR.into(),
            "u1".into(),
        );
        let e = event_of("n1", &report(), Some(&mirror), now()).expect("the mirror's event");
        assert_eq!(e.involved_object.uid, "m1", "found by the object's uid");
        // Not another node's mirror, nor another incarnation's.
        let not_bound = |r: Result<Event, Refused>| matches!(r, Err(Refused::NotBound(_)));
        assert!(not_bound(event_of("n2", &report(), Some(&mirror), now())));
        let mut other = report();
        other.uid = "u2".into();
        assert!(not_bound(event_of("n1", &other, Some(&mirror), now())));
    }

    #[test]
    fn names_types_times_and_sizes_are_bounded() {
        let p = pod("n1");
        let mut r = report();
        r.name = "other-pod.17a8".into();
        let invalid = |r: Result<Event, Refused>| matches!(r, Err(Refused::Invalid(_)));
        assert!(invalid(event_of("n1", &r, Some(&p), now())), "name");
        let mut r = report();
        r.r#type = "Fatal".into();
        assert!(invalid(event_of("n1", &r, Some(&p), now())), "type");
        let mut r = report();
        r.last_timestamp = "2200-01-01T00:00:00Z".into();
        let e = event_of("n1", &r, Some(&p), now()).expect("future time");
        assert_eq!(e.last_timestamp, Some(now().to_rfc3339()), "clamped");
        let many = pb::PodEvents {
            events: vec![report(); MAX_EVENTS_PER_MESSAGE + 1],
        };
        assert!(check_message(&many).is_err());
        let mut long = report();
        long.message = "x".repeat(MAX_EVENT_MESSAGE_BYTES + 1);
        assert!(check_message(&pb::PodEvents { events: vec![long] }).is_err());
        let mut bad = report();
        bad.reason = "Back Off".into();
        assert!(check_message(&pb::PodEvents { events: vec![bad] }).is_err());
        assert!(check_message(&pb::PodEvents {
            events: vec![report(); MAX_EVENTS_PER_MESSAGE]
        })
        .is_ok());
    }

    #[test]
    fn scheduled_says_where() {
        let e = scheduled(&pod("n1"), now());
        assert_eq!(e.reason, "Scheduled");
        assert_eq!(e.message, "Successfully assigned default/web-abc to n1");
        assert_eq!(e.source.component, "default-scheduler");
        assert!(e.metadata.name.starts_with("web-abc."));
    }

    #[test]
    fn the_budget_is_a_burst_then_a_rate() {
        let mut b = Budget::default();
        let t0 = Instant::now();
        let n = (0..EVENT_BUDGET_BURST * 2).filter(|_| b.take(t0)).count();
        assert_eq!(n, EVENT_BUDGET_BURST);
        assert!(b.take(t0 + Duration::from_secs(1)));
    }
}
