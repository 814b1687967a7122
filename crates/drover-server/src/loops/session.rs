//! One agent's session, after its hello: register (or re-use) its Node,
//! push the node's complete desired pod list now and on every change (from
//! the cache, serialised only here), and act on what the agent says:
//! heartbeats, pod statuses (compare-and-swap writes, [`super::statuses`]),
//! pod events ([`super::events`]), static pods (mirror pods), log/exec output (handed to [`crate::sessions`]), leave (the Node
//! is deleted). The gRPC side is [`crate::svc::agent`].

use crate::api::node_certs::{bound_serial, revoked, speaks_for, Cert, CERT_ANNOTATION};
use crate::api::{now_rfc3339, Objects};
use crate::cache::Informer;
use crate::ctx::Ctx;
use crate::error::ApiError;
use crate::sessions::SessionTx;
use drover_api::{Kind, Manifest, Node};
use drover_proto::v1::{self as pb, agent_message, server_message};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tonic::Streaming;

/// Attempts to register a Node that keeps changing under the hello.
const REGISTER_ATTEMPTS: usize = 5;

/// The Node to write for an agent's hello: a new one from the agent's own
/// description, or the existing one with the agent's status (addresses,
/// capacity, system info) and the user's labels, taints and spec kept.
pub fn node_from_hello(hello: Node, existing: Option<Node>, now: &str) -> Node {
    let ready = drover_api::NodeCondition {
        r#type: "Ready".into(),
        status: Some(drover_api::ConditionStatus::True),
        last_heartbeat_time: Some(now.into()),
        last_transition_time: Some(now.into()),
        reason: "AgentReady".into(),
        message: "drover agent is posting ready status".into(),
        ..Default::default()
    };
    match existing {
        None => {
            let mut n = hello;
            n.metadata.namespace.clear();
            n.metadata.resource_version.clear();
            n.status.conditions = vec![ready];
            n
        }
        // The Node its join made (bound to the certificate, no status yet):
        // the agent's description, the join's metadata.
        Some(n) if n.status.conditions.is_empty() => {
            let mut meta = n.metadata;
            meta.labels = hello.metadata.labels.clone();
            let mut m = hello;
            m.metadata = meta;
            m.status.conditions = vec![ready];
            m
        }
        Some(mut n) => {
            n.status.addresses = hello.status.addresses;
            n.status.capacity = hello.status.capacity;
            n.status.allocatable = hello.status.allocatable;
            n.status.node_info = hello.status.node_info;
            n
        }
    }
}

/// Parses and checks the Node of a hello.
pub fn hello_node(hello: &pb::Hello) -> Result<Node, ApiError> {
    // One pass for a well-formed Node (every join); the two-step read
    // says where a bad one is wrong.
    let node = match Manifest::from_json_of(Kind::Node, &hello.node) {
        Ok(Manifest::Node(node)) => node,
        _ => {
            let v: Value = serde_json::from_slice(&hello.node)
                .map_err(|e| ApiError::BadRequest(format!("hello.node: not JSON: {e}")))?;
            match Manifest::from_value(v)
                .map_err(|e| ApiError::BadRequest(format!("hello.node: {e}")))?
            {
                Manifest::Node(node) => node,
                _ => return Err(ApiError::BadRequest("hello.node: must be a Node".into())),
            }
        }
    };
    drover_api::validation::validate_node(&node).map_err(|e| ApiError::invalid(vec![e]))?;
    Ok(*node)
}

/// Creates the agent's Node, or updates the existing one with what the
/// agent reports, bound to `cert` from then on (see
/// [`crate::api::node_certs::speaks_for`]); answers its name.
pub async fn register(objects: &Objects, node: Node, cert: &Cert) -> Result<String, ApiError> {
    let name = node.metadata.name.clone();
    for attempt in 0..REGISTER_ATTEMPTS {
        // Local first (the write is compare-and-swap; a stale read is
        // retried linearizably).
        let read = if attempt == 0 {
            objects.get_local(Kind::Node, "", &name).await
        } else {
            objects.get(Kind::Node, "", &name).await
        };
        // The Node exists (its join made it) and is bound to this
        // certificate; the update below is on that very version, so a
        // deletion or a new binding in between makes it fail.
        let existing = match read {
            Ok(Manifest::Node(n)) if speaks_for(&n, cert) => *n,
            Ok(_) | Err(ApiError::NotFound(_)) if attempt == 0 => continue,
            Ok(_) | Err(ApiError::NotFound(_)) => return Err(revoked(&name)),
            Err(e) => return Err(e),
        };
        let mut n = node_from_hello(node.clone(), Some(existing.clone()), &now_rfc3339());
        if bound_serial(&n) != Some(cert.serial.as_str()) {
            tracing::info!(node = %name, serial = %cert.serial, "the node's session binds its certificate (another certificate of the key that owns the name was bound)");
            n.metadata
                .annotations
                .insert(CERT_ANNOTATION.into(), cert.serial.clone());
        }
        if n == existing {
            // A reconnect that changes nothing writes nothing: a server
            // that 10,000 nodes come back to at once (a restart, a stall)
            // must not also take 10,000 writes of the same Nodes. Only on
            // a linearizable read, as the write's compare-and-swap would
            // have been: this member's copy may not have applied a
            // deletion or a new binding yet.
            if attempt > 0 {
                return Ok(name);
            }
            continue;
        }
        match objects.update(Manifest::Node(Box::new(n))).await {
            Ok(_) => return Ok(name),
            Err(ApiError::Conflict(_) | ApiError::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::Conflict(format!(
        "node {name:?} kept changing while it registered; retry"
    )))
}

/// Refuses a session whose certificate does not (or no longer) speak for
/// its Node.
pub async fn check_bound(objects: &Objects, name: &str, cert: &Cert) -> Result<(), ApiError> {
    // This member's own state first: bound there, bound (a binding only
    // ever changes by a join, a renewal or a deletion, each of which also
    // ends the session when this member applies it). Not bound there: ask
    // linearizably before refusing (the binding may be that recent).
    if let Ok(Manifest::Node(n)) = objects.get_local(Kind::Node, "", name).await {
        if speaks_for(&n, cert) {
            return Ok(());
        }
    }
    match objects.get(Kind::Node, "", name).await {
        Ok(Manifest::Node(n)) if speaks_for(&n, cert) => Ok(()),
        Ok(_) | Err(ApiError::NotFound(_)) => Err(revoked(name)),
        Err(e) => Err(e),
    }
}

/// Whether the cache still binds `serial` to `name` (a deleted Node, a new
/// join or a renewal end the session).
fn still_bound(cache: &Informer, name: &str, serial: &str) -> bool {
    let snap = cache.snapshot();
    snap.nodes
        .get(&crate::api::key(Kind::Node, "", name))
        .is_some_and(|n| bound_serial(n) == Some(serial))
}

/// How long a session waits to send the member list again after a full
/// queue held it back. Only then: a session with nothing held back keeps
/// no timer (10,000 idle sessions, no wake-ups).
const SERVERS_RETRY: Duration = Duration::from_secs(2);

/// The first message of a session.
pub fn welcome(ctx: &Ctx, node: &str) -> pb::ServerMessage {
    // This session is not attached yet: it counts too.
    let interval = ctx.heartbeats.interval(ctx.sessions.count() + 1);
    welcome_to(node, ctx.id, ctx.voters(), interval)
}

/// The welcome of `node` by `member`: with this server's version and
/// capabilities, so that the agent knows what it may use
/// (`drover_proto::caps`), and the heartbeat interval to start with.
pub fn welcome_to(
    node: &str,
    member: u64,
    servers: Vec<String>,
    interval: Duration,
) -> pb::ServerMessage {
    pb::ServerMessage {
        msg: Some(server_message::Msg::Welcome(pb::Welcome {
            node: node.to_string(),
            heartbeat_interval_ms: millis(interval),
            member,
            servers,
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            capabilities: drover_proto::caps::ours(),
        })),
    }
}

/// The agent of a session, as its hello describes it: its version and
/// what it speaks (an agent from before the negotiation sends no
/// capabilities: the baseline).
pub fn agent_peer(hello: &pb::Hello) -> drover_proto::caps::Peer {
    drover_proto::caps::Peer::new(&hello.agent_version, &hello.capabilities)
}

/// Sends the member list to the agent when it differs from `sent` (what
/// it was last sent). Answers when to try again if a full queue held it
/// back (`sent` is then cleared, so that the next try sends it whatever
/// it is by then).
fn send_servers(ctx: &Ctx, tx: &SessionTx, sent: &mut Vec<String>) -> Option<tokio::time::Instant> {
    let now = ctx.voters();
    if now == *sent || now.is_empty() {
        return None;
    }
    *sent = now;
    let m = pb::ServerMessage {
        msg: Some(server_message::Msg::Servers(pb::Servers {
            servers: sent.clone(),
        })),
    };
    if tx.try_send(Ok(Box::new(m))).is_err() {
        sent.clear();
        return Some(tokio::time::Instant::now() + SERVERS_RETRY);
    }
    None
}

/// Batches of pod events a session holds while they are written.
const EVENT_QUEUE: usize = 8;

/// Encodes objects for an agent (one that does not encode is logged and
/// left out).
fn encode_all<T: serde::Serialize>(node: &str, objects: &[Arc<T>]) -> Vec<Vec<u8>> {
    objects
        .iter()
        .filter_map(|o| match serde_json::to_vec(&**o) {
            Ok(json) => Some(json),
            Err(e) => {
                tracing::warn!(node = %node, "cannot encode an object for its agent: {e}");
                None
            }
        })
        .collect()
}

/// A hash of what was sent, to send only what changed.
fn hash_of(v: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// The node's desired pods and the ConfigMaps and Secrets they reference
/// (only those), as an agent gets them.
fn node_messages(cache: &Informer, node: &str) -> (pb::PodConfig, pb::DesiredPods) {
    let view = cache.node_view(node);
    let config = pb::PodConfig {
        config_maps: encode_all(node, &view.config_maps),
        secrets: encode_all(node, &view.secrets),
    };
    let pods = pb::DesiredPods {
        pods: encode_all(node, &view.pods),
        resource_version: view.revision.to_string(),
    };
    (config, pods)
}

/// Runs the session of `node` (registered) until the agent goes away:
/// one task pushes its pods, one reads what it says.
pub fn run(
    ctx: Arc<Ctx>,
    objects: Objects,
    cache: Informer,
    node: String,
    serial: String,
    tx: SessionTx,
    mut inbound: Streaming<pb::AgentMessage>,
) {
    // Push the desired pods now and on every change, each time after the
    // ConfigMaps and Secrets they reference (when those changed), so that
    // the agent has them before it starts a pod that needs them.
    let push_cache = cache.clone();
    let push_node = node.clone();
    let push_tx = tx.clone();
    let pusher = tokio::spawn(async move {
        let mut changes = push_cache.subscribe_node(&push_node);
        // Never tell an agent "no pods" before the cache has loaded.
        if !push_cache.wait_loaded().await {
            return;
        }
        // Hashes of what was last sent (not copies: 10,000 sessions).
        let mut sent_config: Option<u64> = None;
        let mut sent_pods: Option<u64> = None;
        loop {
            let (config, pods) = node_messages(&push_cache, &push_node);
            let config_hash = hash_of(&(&config.config_maps, &config.secrets));
            if sent_config != Some(config_hash) {
                let msg = pb::ServerMessage {
                    msg: Some(server_message::Msg::Config(config)),
                };
                if push_tx.send(Ok(Box::new(msg))).await.is_err() {
                    return;
                }
                sent_config = Some(config_hash);
            }
            // Only a ConfigMap or Secret changed: the pods need not go again.
            let hash = hash_of(&pods.pods);
            if sent_pods != Some(hash) {
                sent_pods = Some(hash);
                let msg = pb::ServerMessage {
                    msg: Some(server_message::Msg::Pods(pods)),
                };
                if push_tx.send(Ok(Box::new(msg))).await.is_err() {
                    return;
                }
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    });

    // Read what the agent says until it goes away.
    let remote = ctx.sessions.attach(&node, tx.clone());
    tokio::spawn(async move {
        // Revocation is checked when this node's Node object changes (the
        // cache says so), not on a timer and not on other nodes' writes:
        // 10,000 idle sessions cost no wake-ups, and a join of 10,000
        // nodes wakes each session for its own Node only.
        let mut node_objects = cache.subscribe_node_object(&node);
        // The member list goes again as soon as it changes (a member that
        // joins or is promoted): a node that joined a cluster still
        // forming must not know only the one address it was given. What a
        // full queue held back goes again after SERVERS_RETRY (the only
        // timer a session ever has).
        let mut membership = ctx.store.subscribe_members();
        membership.borrow_and_update();
        let mut retry: Option<tokio::time::Instant> = None;
        // The agent follows the member list: it got it in the welcome and
        // gets it again whenever it changes.
        let mut servers = ctx.voters();
        // Pod events are written by a task of their own, so that a batch of
        // them never holds up the statuses and heartbeats behind it on the
        // stream; a node that reports faster than they are written loses
        // the excess (its counts catch up with its next report).
        let (events_tx, mut events_rx) = tokio::sync::mpsc::channel::<pb::PodEvents>(EVENT_QUEUE);
        {
            let (objects, cache, node) = (objects.clone(), cache.clone(), node.clone());
            tokio::spawn(async move {
                let mut budget = super::events::Budget::default();
                while let Some(e) = events_rx.recv().await {
                    // Boxed: the task idles in `recv` far longer than it
                    // writes, and 10,000 idle tasks should not each hold
                    // room for a write in flight.
                    Box::pin(super::events::write(
                        &objects,
                        &cache,
                        &node,
                        e,
                        &mut budget,
                    ))
                    .await;
                }
            });
        }
        // Pod statuses, likewise, are written by a task of their own
        // (`super::statuses`): the reader never waits for a commit, so
        // heartbeats are answered while the store is busy.
        let statuses = super::statuses::StatusQueue::new();
        {
            let (objects, cache, node, statuses) = (
                objects.clone(),
                cache.clone(),
                node.clone(),
                statuses.clone(),
            );
            tokio::spawn(async move { statuses.run(&objects, &cache, &node).await });
        }
        loop {
            let msg = tokio::select! {
                m = inbound.message() => m,
                _ = tx.closed() => break,
                _ = remote.replaced() => break,
                r = node_objects.changed() => {
                    if r.is_err() {
                        break;
                    }
                    if cache.is_loaded() && !still_bound(&cache, &node, &serial) {
                        tracing::info!(node = %node, "closing the session: its certificate is no longer bound to the node");
                        let _ = tx.send(Err(crate::svc::status(revoked(&node)))).await;
                        break;
                    }
                    continue;
                }
                r = membership.changed() => {
                    if r.is_err() {
                        break;
                    }
                    retry = send_servers(&ctx, &tx, &mut servers);
                    continue;
                }
                _ = sleep_until(retry), if retry.is_some() => {
                    retry = send_servers(&ctx, &tx, &mut servers);
                    continue;
                }
            };
            match msg {
                Ok(Some(m)) => match m.msg {
                    Some(agent_message::Msg::Heartbeat(_)) => {
                        ctx.heartbeats.beat(&node);
                        ack(&ctx, &tx);
                    }
                    Some(agent_message::Msg::Statuses(s)) => {
                        ctx.heartbeats.beat(&node);
                        ack(&ctx, &tx);
                        statuses.offer(s).await;
                    }
                    // The rare writes below are boxed: the reader's future
                    // is as large as the largest thing it awaits inline,
                    // for the whole life of the session.
                    Some(agent_message::Msg::Leave(_)) => {
                        match Box::pin(objects.delete(Kind::Node, "", &node)).await {
                            Ok(_) => tracing::info!(node = %node, "node left the cluster"),
                            Err(e) => tracing::warn!(node = %node, "leave: {e}"),
                        }
                        ctx.heartbeats.forget(&node);
                        break;
                    }
                    Some(agent_message::Msg::Events(e)) => {
                        ctx.heartbeats.beat(&node);
                        ack(&ctx, &tx);
                        if events_tx.try_send(e).is_err() {
                            tracing::debug!(node = %node, "pod events dropped: the node reports them faster than they are written");
                        }
                    }
                    Some(agent_message::Msg::StaticPods(s)) => {
                        ctx.heartbeats.beat(&node);
                        ack(&ctx, &tx);
                        Box::pin(super::mirror::reconcile(&objects, &cache, &node, s)).await;
                    }
                    Some(agent_message::Msg::Hello(_)) | None => {}
                    Some(other) => remote.deliver(other),
                },
                Ok(None) | Err(_) => break,
            }
        }
        pusher.abort();
        statuses.close();
        tracing::info!(node = %node, "agent disconnected");
    });
}

/// Sleeps until `at` (never, for `None`: the caller's `select!` guard
/// keeps it from being polled then).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Answers a heartbeat (or a status report, which the agent sends instead
/// of one): the agent hears from its server every heartbeat interval, so
/// its link needs no keep-alive pings of its own, and the server keeps no
/// timer per session (the node lifecycle controller judges every node's
/// last heartbeat in one pass). The answer carries the interval for the
/// sessions this member holds now ([`crate::heartbeats`]): an agent that
/// joined a small cluster beats less often once it has grown. A full queue
/// already carries traffic.
fn ack(ctx: &Ctx, tx: &SessionTx) {
    let _ = tx.try_send(Ok(Box::new(heartbeat_ack(
        ctx.heartbeats.interval(ctx.sessions.count()),
    ))));
}

/// The answer to a heartbeat, asking for `interval` from now on.
fn heartbeat_ack(interval: Duration) -> pb::ServerMessage {
    pb::ServerMessage {
        msg: Some(server_message::Msg::HeartbeatAck(pb::HeartbeatAck {
            heartbeat_interval_ms: millis(interval),
        })),
    }
}

/// An interval as the protocol carries it.
fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heartbeats::HEARTBEAT_INTERVAL;
    use drover_proto::caps;

    #[test]
    fn the_answer_to_a_heartbeat_carries_the_interval() {
        let Some(server_message::Msg::HeartbeatAck(a)) =
            heartbeat_ack(Duration::from_millis(1_750)).msg
        else {
            panic!("a heartbeat answer");
        };
        assert_eq!(a.heartbeat_interval_ms, 1_750);
    }

    #[test]
    fn the_welcome_says_what_this_server_speaks() {
        let Some(server_message::Msg::Welcome(w)) = welcome_to(
            "edge-1",
            7,
            vec!["10.0.0.1:7600".into()],
            HEARTBEAT_INTERVAL,
        )
        .msg
        else {
            panic!("a welcome");
        };
        assert_eq!(w.node, "edge-1");
        assert_eq!(w.member, 7);
        assert_eq!(w.heartbeat_interval_ms, 1_000);
        assert_eq!(w.server_version, env!("CARGO_PKG_VERSION"));
        let peer = caps::Peer::new(&w.server_version, &w.capabilities);
        assert!(peer.announced);
        for c in caps::SESSION {
            assert!(peer.supports(c), "{c}");
        }
    }

    #[test]
    fn an_agent_that_sends_no_capabilities_speaks_the_baseline() {
        // An agent of the release before the negotiation (7f1d4bf).
        let old = pb::Hello {
            node: b"{}".to_vec(),
            agent_version: "0.1.0".into(),
            ..Default::default()
        };
        let peer = agent_peer(&old);
        assert!(!peer.announced);
        assert_eq!(peer.version, "0.1.0");
        for c in caps::BASELINE {
            assert!(peer.supports(c), "{c}");
        }
        // A newer agent: exactly what it lists.
        let new = pb::Hello {
            capabilities: vec![caps::POD_EVENTS.into(), "newer".into()],
            ..old
        };
        let peer = agent_peer(&new);
        assert!(peer.announced);
        assert!(peer.supports("newer"));
        assert!(!peer.supports(caps::POD_CONFIG));
    }

    #[test]
    fn a_hello_node_is_read_and_checked_and_a_bad_one_says_where() {
        let hello = |node: &str| pb::Hello {
            node: node.as_bytes().to_vec(),
            ..Default::default()
        };
        let node = hello_node(&hello(
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"zone":"a"}},
                "status":{"capacity":{"cpu":"2"}}}"#,
        ))
        .unwrap();
        assert_eq!(node.metadata.name, "n1");
        assert_eq!(node.metadata.labels["zone"], "a");
        let refused = |node: &str| match hello_node(&hello(node)) {
            Err(e @ (ApiError::BadRequest(_) | ApiError::Invalid { .. })) => e.to_string(),
            other => panic!("{node}: {other:?}"),
        };
        assert!(refused("{not json").contains("hello.node: not JSON"));
        assert!(
            refused(r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}"#)
                .contains("must be a Node")
        );
        // A field of the wrong type: the two-step read names it.
        let typo = refused(
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":["zone"]}}"#,
        );
        assert!(typo.contains("metadata.labels"), "{typo}");
        // Read, then refused by the Node's own rules.
        assert!(matches!(
            hello_node(&hello(
                r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"Not_A_Name"}}"#
            )),
            Err(ApiError::Invalid { .. })
        ));
    }
}
