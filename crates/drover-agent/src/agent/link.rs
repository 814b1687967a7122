//! The node's link to the servers: one session at a time (down, opening,
//! up), the choice of server and the jittered reconnect backoff, the
//! heartbeats, and sending on the session. The wire underneath (channels,
//! opening an `Agent.Session` stream) is [`crate::link`].
//!
//! **The member list.** A node starts with the `--server` addresses (and
//! those it saved in `DATA_DIR/servers.json` before a restart); every
//! welcome and every `Servers` message brings the cluster's voting members,
//! which it adds (the `--server` addresses are never dropped: they may be
//! the only way in from behind NAT) and saves. Its first server is a random
//! one of the list, so the sessions of many nodes spread over the members;
//! when a session fails the next attempt goes to another server of the
//! list, chosen at random (so the nodes of a dead server spread over the
//! survivors), after a short jittered pause (`reconnect_min`, doubling up
//! to `reconnect_max` while none answers), long before the node timeout.
//! The next server is one of the cluster's members as last heard (a
//! `--server` address may be a member that was removed and is gone, and
//! an attempt on an address that does not answer costs `connect_timeout`);
//! after a round of them failed, every other attempt may go to any address
//! of the list.
//!
//! **Overlapping attempts.** An attempt whose packets went into a cut link
//! (or to a member that is gone without a reset) has no answer until its
//! `connect_timeout`, and the kernel resends its SYN only after 1, 3, 7 s:
//! a node whose link healed would wait for it. So while an attempt has no
//! answer, another one starts beside it every `attempt_stagger` (1 s), on
//! a new connection, to the next server (the same one when there is only
//! one), up to [`MAX_ATTEMPTS`] at once; the first session that comes up
//! wins and the others are dropped. A node is back within about
//! `attempt_stagger` of its link healing, however long it was cut, and an
//! attempt on a slow link still has its whole `connect_timeout`. A node
//! still joining (getting its certificate) makes one attempt at a time.
//! No attempt starts beside one to the same server whose TLS handshake that
//! server completed: the link works and the server is there, only busy
//! (registering the node, or behind on its work); another connection
//! would only add a handshake to its load, and a busy server that
//! thousands of nodes answer that way never catches up. An attempt whose
//! handshake has no answer (a cut link, a relay that took the TCP
//! connection into a cut link, a frozen server) still gets others beside
//! it, and attempts to other servers still start.

use super::shared::{Identity, Shared};
use crate::backoff::Reconnect;
use crate::link::{self as wire, NodeTls, Session};
use crate::node::{self, NodeFacts};
use drover_proto::v1::{self as pb, agent_message};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;
use tonic::Status;

type Attempt = Pin<Box<dyn Future<Output = Result<Session, Failed>> + Send>>;

/// Attempts to open a session at once, at most (see the module docs).
const MAX_ATTEMPTS: usize = 10;

/// An attempt to open a session that failed, and the server it went to.
pub(super) struct Failed {
    server: String,
    status: Status,
}

/// An attempt in flight, the server it went to, and whether that server
/// completed its TLS handshake.
struct InFlight {
    attempt: Attempt,
    server: String,
    answered: Arc<AtomicBool>,
}

/// The attempts in flight to open a session.
struct Opening {
    /// Oldest first.
    attempts: Vec<InFlight>,
    /// When another attempt starts beside them; `None` while the node gets
    /// its certificate (one attempt at a time).
    next_at: Option<Instant>,
}

impl Opening {
    /// The next attempt that ends; pending while none is in flight.
    async fn next_done(&mut self) -> Result<Session, Failed> {
        std::future::poll_fn(|cx| {
            for i in 0..self.attempts.len() {
                if let Poll::Ready(r) = self.attempts[i].attempt.as_mut().poll(cx) {
                    // Dropped only once done: cancelling this wait loses
                    // nothing.
                    drop(self.attempts.remove(i));
                    return Poll::Ready(r);
                }
            }
            Poll::Pending
        })
        .await
    }
}

enum State {
    /// No session; the next attempt is at `retry_at`.
    Down,
    Opening(Opening),
    Up(Box<Up>),
}

struct Up {
    session: Session,
    heartbeat_every: Duration,
    next_heartbeat: Instant,
    /// The server sent the pod list of this session.
    got_pods: bool,
    /// When this agent first spoke (a heartbeat or a report) since the
    /// server last did, moved later by this agent's own stalls (see
    /// [`Link::woke`]); `None` while nothing waits for an answer. The
    /// server answers each one, so its silence counts from here, never
    /// from its last message: an agent that said nothing for a while (its
    /// loop waited on a slow engine) heard nothing because it asked
    /// nothing.
    asked: Option<Instant>,
    /// The session is given up after this long without a message of the
    /// server; `None` with a server that does not answer heartbeats.
    silence: Option<Duration>,
}

impl Up {
    /// When the session is given up if the server stays silent: the
    /// silence rule after the agent's first unanswered message.
    fn gives_up_at(&self) -> Option<Instant> {
        Some(self.asked? + self.silence?)
    }
}

/// A session whose server sent nothing for this long (at least three
/// heartbeat intervals) after the agent spoke is given up.
///
/// The server answers every heartbeat and every report (one a second at
/// least) with a message on the session, so a live session never goes
/// this quiet: silence means a frozen server, a link cut without a reset,
/// or a stream that carries nothing any more while the HTTP/2 connection
/// under it still answers pings. The connection's own keep-alive
/// ([`crate::link`]) is only the backstop: hyper judges a ping's answer
/// before it reads what arrived, so a process that stalls (10,000 sim
/// nodes taking their pods at once on one core) found every connection
/// with a ping out timed out, with the answers unread in its sockets.
pub(super) const SILENCE: Duration = Duration::from_secs(3);

/// The silence rule of a session that heartbeats every `every`.
fn silence_for(every: Duration) -> Duration {
    SILENCE.max(every * 3)
}

/// The shortest and the longest heartbeat interval a server may ask for:
/// anything else is taken as the nearest of the two (the server is trusted,
/// but a mistake must not make the agent beat a thousand times a second, or
/// fall silent for a day).
const ASKED_INTERVAL: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(60));

/// The interval a server asks for in milliseconds (welcome or answer to a
/// heartbeat), within [`ASKED_INTERVAL`]; `None` for 0, which asks for
/// nothing.
fn asked_interval(ms: u32) -> Option<Duration> {
    (ms > 0).then(|| Duration::from_millis(u64::from(ms)).clamp(ASKED_INTERVAL.0, ASKED_INTERVAL.1))
}

/// A wake-up this much later than the loop asked for means the agent
/// itself did not run (its process stalled, or its machine is
/// overloaded): the silence rule does not count that time against the
/// server (see [`Link::woke`]).
const LATE_WAKE: Duration = Duration::from_millis(250);

/// What the link brings to the sync loop.
pub(super) enum LinkEvent {
    /// A message of the server, the end of the stream, or its failure.
    Inbound(Result<Option<pb::ServerMessage>, Status>),
    /// An attempt to open a session ended.
    Opened(Result<Box<Session>, Failed>),
}

/// One node's session with a server, and how it gets the next one.
pub(super) struct Link {
    state: State,
    /// The servers this node knows: the `--server` ones, then those it
    /// learnt (see the module docs).
    servers: Vec<String>,
    /// The server of the session (or of the next attempt), an index in
    /// `servers`.
    server: usize,
    retry_at: Instant,
    reconnect: Reconnect,
    /// Server choice, reconnect jitter, heartbeat phase.
    rng: SmallRng,
    /// The node's certificate and channels, once it has one.
    creds: Option<Arc<NodeTls>>,
    /// The server of the last session that was up (none before the first).
    last_server: Option<String>,
    /// An attempt failed since the last session: further failures are
    /// logged at debug only (one line per loss, not one per retry).
    failing: bool,
    /// The cluster's members as last heard (a welcome, a `Servers`
    /// message): tried first.
    members: Vec<String>,
    /// Attempts that failed since the last session came up.
    failures: usize,
    /// The key this node joins with while it has no certificate (and the
    /// process gave it none): made once, so that a join whose answer was
    /// lost (a timeout after the server bound the name to the key) is
    /// retried with the same key, which owns the name, instead of a new
    /// one the server must refuse for ever.
    own_key: Option<drover_pki::Credential>,
}

/// When a server's silence counts from: the agent's first unanswered
/// message at `last`, moved later by how late the loop woke at `now` for a
/// deadline of `armed` when that is more than [`LATE_WAKE`] (never past
/// `now`).
fn heard_as_of(last: Instant, armed: Instant, now: Instant) -> Instant {
    let late = now.saturating_duration_since(armed);
    if late <= LATE_WAKE {
        return last;
    }
    (last + late).min(now)
}

/// Where a node keeps the cluster's members as last heard (JSON list of
/// `host:port`; a file of an older agent also holds the `--server` ones).
const SERVERS_FILE: &str = "servers.json";

/// `given` (the `--server` addresses, kept first and never dropped), then
/// the `learnt` ones not among them.
fn merged(given: &[String], learnt: &[String]) -> Vec<String> {
    let mut out = given.to_vec();
    for s in learnt {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// Addresses a node remembers besides the `--server` ones and the
/// members: the most recently learnt first.
const MAX_REMEMBERED: usize = 32;

/// `now` (the `--server` ones, then the members), then those of `before`
/// not among them, up to [`MAX_REMEMBERED`] addresses in all (never
/// fewer than `now`).
fn remembered(now: &[String], before: &[String]) -> Vec<String> {
    let mut out = now.to_vec();
    for s in before {
        if out.len() >= MAX_REMEMBERED.max(now.len()) {
            break;
        }
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// The server to try after `current` (an index in `servers`), at random
/// so that the nodes of a server that died spread over the survivors: one
/// of the cluster's `members` as last heard while a round of them has not
/// failed (`failures`), then on every other attempt; else any other.
fn next_server(
    servers: &[String],
    current: usize,
    members: &[String],
    failures: usize,
    rng: &mut SmallRng,
) -> usize {
    let n = servers.len();
    if n < 2 {
        return current;
    }
    let preferred: Vec<usize> = (0..n)
        .filter(|i| *i != current && members.contains(&servers[*i]))
        .collect();
    if !preferred.is_empty() && (failures < preferred.len() || failures.is_multiple_of(2)) {
        return preferred[rng.random_range(0..preferred.len())];
    }
    (current + rng.random_range(1..n)) % n
}

/// The Node of this agent's hello.
fn facts(shared: &Shared, name: &str, host_ip: &str) -> NodeFacts {
    let mut facts = if shared.sim_facts {
        node::sim_facts(name, host_ip, &shared.runtime_version)
    } else {
        node::machine_facts(name, host_ip, &shared.runtime_version)
    };
    facts.allocatable = node::allocatable(&facts.capacity, &shared.reserved);
    facts
}

fn hello(shared: &Shared, me: &Identity) -> pb::Hello {
    let facts = facts(shared, &me.name, &me.host_ip);
    let node = node::node_object(&me.name, &shared.labels, &shared.taints, &facts);
    hello_of(&node)
}

/// The hello of an agent that describes itself as `node`: with this
/// build's version and capabilities, so that the server knows what it may
/// send (`drover_proto::caps`).
fn hello_of(node: &drover_api::Node) -> pb::Hello {
    pb::Hello {
        node: serde_json::to_vec(node).unwrap_or_default(),
        agent_version: crate::VERSION.to_string(),
        capabilities: drover_proto::caps::ours(),
    }
}

impl Link {
    /// Down, with a first attempt due at `now` on a server chosen by `seed`.
    pub(super) fn new(shared: &Shared, seed: u64, now: Instant) -> Link {
        let mut rng = SmallRng::seed_from_u64(seed);
        let server = rng.random_range(0..shared.servers.len().max(1));
        Link {
            state: State::Down,
            servers: shared.servers.clone(),
            server,
            retry_at: now,
            reconnect: Reconnect::new(shared.tuning.reconnect_min, shared.tuning.reconnect_max),
            rng,
            creds: None,
            last_server: None,
            failing: false,
            members: Vec::new(),
            failures: 0,
            own_key: None,
        }
    }

    /// Takes up the servers saved in `dir` (besides `--server`).
    pub(super) fn load_servers(&mut self, shared: &Shared, dir: &std::path::Path, name: &str) {
        let path = dir.join(SERVERS_FILE);
        match std::fs::read(&path) {
            Ok(b) => match serde_json::from_slice::<Vec<String>>(&b) {
                Ok(saved) => {
                    self.servers = merged(&shared.servers, &saved);
                    // The first attempt goes to a member as last heard.
                    let members: Vec<usize> = (0..self.servers.len())
                        .filter(|i| saved.contains(&self.servers[*i]))
                        .collect();
                    self.server = match members.len() {
                        0 => self.rng.random_range(0..self.servers.len().max(1)),
                        n => members[self.rng.random_range(0..n)],
                    };
                    self.members = saved;
                }
                Err(e) => {
                    tracing::warn!(node = %name, "ignoring {}: {e}", path.display())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(node = %name, "cannot read {}: {e}", path.display()),
        }
    }

    /// Takes up the cluster's current servers (a welcome, a `Servers`
    /// message) and saves them in the node's data dir.
    pub(super) fn learn_servers(&mut self, shared: &Shared, me: &Identity, learnt: &[String]) {
        if learnt.is_empty() {
            return;
        }
        let known = self.members.as_slice() == learnt;
        self.members = learnt.to_vec();
        // The members first (tried first), then every address learnt
        // before: a node that knows no live member keeps trying all of
        // them, and the `--server` ones, forever.
        let next = remembered(&merged(&shared.servers, learnt), &self.servers);
        if next == self.servers && known {
            return;
        }
        let current = self.servers.get(self.server).cloned();
        self.servers = next;
        self.server = current
            .and_then(|c| self.servers.iter().position(|s| *s == c))
            .unwrap_or(0);
        note!(shared.loud, node = %me.name, "servers: {}", self.servers.join(", "));
        if let Some(dir) = &me.data_dir {
            // The members, then the other addresses learnt before
            // (`--server` comes from the command line again): a restart
            // tries them all, the members first.
            let learnt_before = self.servers.get(shared.servers.len()..).unwrap_or_default();
            let saved = remembered(&self.members, learnt_before);
            let saved = serde_json::to_vec(&saved).unwrap_or_default();
            if let Err(e) = drover_pki::write_private(&dir.join(SERVERS_FILE), &saved) {
                tracing::warn!(node = %me.name, "cannot save the server list in {}: {e}", dir.display());
            }
        }
    }

    /// Takes up the certificate kept in `dir`, if any (a restart needs no
    /// token).
    pub(super) fn load_certificate(&mut self, shared: &Shared, dir: &std::path::Path, name: &str) {
        match NodeTls::load(dir) {
            Ok(Some((cred, ca))) => match NodeTls::new(cred, ca, shared.tuning.connect_timeout) {
                Ok(t) => self.creds = Some(Arc::new(t)),
                Err(e) => {
                    tracing::warn!(node = %name, "ignoring the certificate in {}: {}", dir.display(), e.message())
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(node = %name, "ignoring the certificate in {}: {e:#}", dir.display())
            }
        }
    }

    /// When the link needs the loop next: the next attempt while down (or
    /// beside those in flight), the next heartbeat while up.
    pub(super) fn due(&self) -> Option<Instant> {
        match &self.state {
            State::Down => Some(self.retry_at),
            State::Opening(o) => o.next_at,
            State::Up(up) => Some(match up.gives_up_at() {
                Some(at) => up.next_heartbeat.min(at),
                None => up.next_heartbeat,
            }),
        }
    }

    /// The server of the session asks for heartbeats every `ms`
    /// milliseconds from now on (its answer to a heartbeat: a member with
    /// many sessions asks for fewer). The silence rule follows (three
    /// intervals, at least [`SILENCE`]); the next heartbeat is at most one
    /// new interval away. 0 (a server from before the field) changes
    /// nothing, nor does anything with an interval set by hand
    /// ([`crate::Tuning::heartbeat`]).
    pub(super) fn asked_interval(&mut self, shared: &Shared, ms: u32, now: Instant) {
        let (State::Up(up), None) = (&mut self.state, shared.tuning.heartbeat) else {
            return;
        };
        let Some(every) = asked_interval(ms).filter(|e| *e != up.heartbeat_every) else {
            return;
        };
        up.heartbeat_every = every;
        up.next_heartbeat = up.next_heartbeat.min(now + every);
        if up.silence.is_some() {
            up.silence = Some(silence_for(every));
        }
    }

    /// The server said something on the session.
    pub(super) fn heard(&mut self) {
        if let State::Up(up) = &mut self.state {
            up.asked = None;
        }
    }

    /// The loop woke at `now` for a deadline of `armed`: a wake-up late by
    /// more than [`LATE_WAKE`] means this agent did not run meanwhile, and
    /// whatever the server sent may still wait unread in the socket, so the
    /// server's silence is counted from that much later.
    pub(super) fn woke(&mut self, armed: Instant, now: Instant) {
        if let State::Up(up) = &mut self.state {
            up.asked = up.asked.map(|asked| heard_as_of(asked, armed, now));
        }
    }

    /// A session is up.
    pub(super) fn is_up(&self) -> bool {
        matches!(self.state, State::Up(_))
    }

    /// A session is up and its server sent the node's pod list: statuses
    /// may go.
    pub(super) fn got_pods(&self) -> bool {
        matches!(&self.state, State::Up(up) if up.got_pods)
    }

    /// The server of the session sent the node's pod list.
    pub(super) fn pods_received(&mut self) {
        if let State::Up(up) = &mut self.state {
            up.got_pods = true;
        }
    }

    /// The session's queue of log and exec output, while up.
    pub(super) fn output(&self) -> Option<&mpsc::Sender<pb::AgentMessage>> {
        match &self.state {
            State::Up(up) => Some(&up.session.output),
            _ => None,
        }
    }

    /// Opens a session if one is due; heartbeats if one is due.
    pub(super) fn tick(&mut self, shared: &Shared, me: &Identity, now: Instant) {
        if matches!(self.state, State::Down) && now >= self.retry_at {
            self.open(shared, me);
        }
        self.stagger(shared, me, now);
        if self.is_up()
            && self
                .creds
                .as_ref()
                .is_some_and(|c| c.renewal_due(shared.clock.wall()))
        {
            // A new certificate needs a new connection: close the session
            // and open the next one at once, renewing first.
            self.down(shared, &me.name, "renewing the node certificate");
            self.retry_at = now;
            self.open(shared, me);
        }
        if let State::Up(up) = &self.state {
            let due = up.gives_up_at().is_some_and(|at| now >= at);
            if let Some(s) = up.silence.filter(|_| due) {
                let why = format!(
                    "the server sent nothing for {} s (heartbeats unanswered): giving the session up",
                    s.as_secs_f64()
                );
                self.down(shared, &me.name, &why);
                return;
            }
        }
        if let State::Up(up) = &mut self.state {
            if now >= up.next_heartbeat {
                // Keep the phase; after a stall, start again from now.
                up.next_heartbeat += up.heartbeat_every;
                if up.next_heartbeat <= now {
                    up.next_heartbeat = now + up.heartbeat_every;
                }
                let hb = pb::AgentMessage {
                    msg: Some(agent_message::Msg::Heartbeat(pb::Heartbeat {})),
                };
                match up.session.tx.try_send(Box::new(hb)) {
                    Ok(()) => {
                        up.asked.get_or_insert(now);
                    }
                    // A full queue: what fills it is waiting for answers.
                    Err(TrySendError::Full(_)) => {}
                    Err(TrySendError::Closed(_)) => {
                        self.down(shared, &me.name, "the session's queue closed")
                    }
                }
            }
        }
    }

    /// Starts the first attempt to open a session, on the chosen server.
    fn open(&mut self, shared: &Shared, me: &Identity) {
        let (attempt, certifies) = self.attempt(shared, me);
        let next_at = (!certifies).then(|| shared.clock.now() + shared.tuning.attempt_stagger);
        self.state = State::Opening(Opening {
            attempts: vec![attempt],
            next_at,
        });
    }

    /// Starts another attempt, to the next server, beside those that have
    /// had no answer for `attempt_stagger` (see the module docs).
    fn stagger(&mut self, shared: &Shared, me: &Identity, now: Instant) {
        let State::Opening(o) = &self.state else {
            return;
        };
        let Some(at) = o.next_at else { return };
        if now < at {
            return;
        }
        let full = o.attempts.len() >= MAX_ATTEMPTS;
        let next = if full {
            None
        } else {
            let candidate = next_server(
                &self.servers,
                self.server,
                &self.members,
                self.failures,
                &mut self.rng,
            );
            // Not to a server that already answered an attempt's
            // handshake: it is there, only slow, and another connection
            // would only add a handshake to its load. A sim of 10,000 nodes
            // on a busy server opened up to 10 connections a node that way,
            // and the server never caught up.
            let addr = self.servers.get(candidate).map(String::as_str);
            let answered = o
                .attempts
                .iter()
                .any(|a| Some(a.server.as_str()) == addr && a.answered.load(Ordering::Relaxed));
            if answered {
                tracing::debug!(node = %me.name, server = addr.unwrap_or("?"), "no session yet, but the server answered the handshake: waiting on that attempt");
                None
            } else {
                self.server = candidate;
                self.failures += 1;
                tracing::debug!(node = %me.name, server = %self.server_addr(), "no answer yet: another attempt beside it");
                Some(self.attempt(shared, me).0)
            }
        };
        if let State::Opening(o) = &mut self.state {
            o.attempts.extend(next);
            o.next_at = Some(now + shared.tuning.attempt_stagger);
        }
    }

    /// An attempt to open a session on the chosen server (getting a
    /// certificate first when the node has none or must renew it), and
    /// whether it gets a certificate.
    fn attempt(&mut self, shared: &Shared, me: &Identity) -> (InFlight, bool) {
        let addr = self.server_addr().to_string();
        let answered = Arc::new(AtomicBool::new(false));
        let watched = answered.clone();
        let current = self.creds.clone();
        let token = shared.token.clone();
        if self.creds.is_none() && shared.join_key.is_none() && self.own_key.is_none() {
            let cn = drover_pki::Role::Node(me.name.clone()).common_name();
            match drover_pki::Credential::generate(&cn) {
                Ok(k) => self.own_key = Some(k),
                // The attempt makes one itself and says why it cannot.
                Err(e) => tracing::debug!(node = %me.name, "cannot make a key: {e}"),
            }
        }
        let join_key = shared.join_key.clone().or_else(|| self.own_key.clone());
        let name = me.name.clone();
        let dir = me.data_dir.clone();
        let timeout = shared.tuning.connect_timeout;
        let hello = hello(shared, me);
        let gate = shared.gate.clone();
        let wall = shared.clock.wall();
        let certifies = current.as_ref().is_none_or(|c| c.renewal_due(wall));
        let given = shared.servers.clone();
        // Drawn here, from the node's seeded generator: where a new node's
        // session goes is repeatable.
        let pick = self.rng.random::<u32>() as usize;
        let server = addr.clone();
        let fut = async move {
            // A sim process lets only so many nodes join at once.
            let _permit = match gate {
                Some(g) => Some(
                    g.acquire_owned()
                        .await
                        .map_err(|_| Status::cancelled("shutting down"))?,
                ),
                None => None,
            };
            // The work itself (certificate, TLS, the session's opening) is
            // a large future: boxed only once the gate lets it run, so that
            // the attempts of thousands of sim nodes waiting at the gate
            // hold only what they carry (heaptrack: 100 MiB of a 2,000-node
            // sim's peak heap was attempts waiting there).
            Box::pin(async move {
                let mut on = addr.clone();
                let mut learnt = Vec::new();
                let creds = match current {
                    Some(c) if !c.renewal_due(wall) => c,
                    other => {
                        // An expired certificate renews nothing: join again
                        // with the node token when there is one.
                        let kept = other.as_ref().map(|c| c.cred.clone()).or(join_key);
                        let other = other.filter(|c| !(c.expired(wall) && token.is_some()));
                        let joining = other.is_none();
                        let got = wire::certify(
                            &addr,
                            &name,
                            token.as_ref(),
                            other.as_deref(),
                            kept.as_ref(),
                            &hello.node,
                            timeout.max(Duration::from_secs(5)),
                        )
                        .await?;
                        // A new node knows the whole cluster now: its session
                        // goes to a random server of it, so that nodes spread
                        // over the members from the start.
                        if joining && !got.servers.is_empty() {
                            let all = merged(&given, &got.servers);
                            on = all[pick % all.len()].clone();
                        }
                        learnt = got.servers;
                        let t = Arc::new(NodeTls::new(got.cred, got.ca, timeout)?);
                        if let Some(d) = &dir {
                            if let Err(e) = t.save(d) {
                                tracing::warn!(node = %name, "cannot keep the node certificate in {}: {e:#}", d.display());
                            }
                        }
                        t
                    }
                };
                let mut s = match wire::open(creds.fresh_channel(&on, &watched)?, hello.clone(), timeout).await {
                    Ok(s) => s,
                    // The chosen server does not answer: the one that just
                    // answered does.
                    Err(_) if on != addr => {
                        on = addr.clone();
                        wire::open(creds.fresh_channel(&on, &watched)?, hello, timeout).await?
                    }
                    Err(e) => return Err(e),
                };
                s.tls = Some(creds);
                s.server = on;
                s.learnt = learnt;
                Ok::<Session, Status>(s)
            })
            .await
        };
        let at = server.clone();
        let fut = async move { fut.await.map_err(|status| Failed { server, status }) };
        (
            InFlight {
                attempt: Box::pin(fut),
                server: at,
                answered,
            },
            certifies,
        )
    }

    fn server_addr(&self) -> &str {
        self.servers
            .get(self.server)
            .map(String::as_str)
            .unwrap_or("?")
    }

    /// An attempt to open a session ended; `true` when the session is up.
    pub(super) fn opened(
        &mut self,
        r: Result<Box<Session>, Failed>,
        shared: &Shared,
        me: &Identity,
    ) -> bool {
        let name = me.name.as_str();
        match r {
            Ok(session) => {
                if let Some(t) = &session.tls {
                    self.creds = Some(t.clone());
                }
                self.learn_servers(shared, me, &session.learnt);
                self.learn_servers(shared, me, &session.welcome.servers);
                if let Some(i) = self.servers.iter().position(|s| *s == session.server) {
                    self.server = i;
                }
                let now = shared.clock.now();
                let every = shared.tuning.heartbeat.unwrap_or_else(|| {
                    asked_interval(session.welcome.heartbeat_interval_ms)
                        .unwrap_or(Duration::from_secs(1))
                });
                // A random phase spreads the heartbeats of many nodes.
                let phase = every.mul_f64(self.rng.random_range(0.5..1.0));
                let server = self.server_addr().to_string();
                let stats = &shared.stats;
                let what = match self.last_server.replace(server.clone()) {
                    None => {
                        stats.joined.fetch_add(1, Ordering::Relaxed);
                        "joined the cluster".to_string()
                    }
                    Some(last) if last == server => {
                        stats.rejoined.fetch_add(1, Ordering::Relaxed);
                        "rejoined the cluster on the same server".to_string()
                    }
                    Some(last) => {
                        stats.moved.fetch_add(1, Ordering::Relaxed);
                        format!("moved to another server (was {last})")
                    }
                };
                self.failing = false;
                note!(
                    shared.loud,
                    node = %name,
                    server = %server,
                    member = format_args!("{:016x}", session.welcome.member),
                    server_version = %session.peer.describe(),
                    "{what}"
                );
                self.reconnect.reset();
                self.failures = 0;
                shared.stats.connected.fetch_add(1, Ordering::Relaxed);
                let silence = session
                    .peer
                    .supports(drover_proto::caps::HEARTBEAT_ACK)
                    .then(|| silence_for(every));
                self.state = State::Up(Box::new(Up {
                    session: *session,
                    heartbeat_every: every,
                    next_heartbeat: now + phase,
                    got_pods: false,
                    asked: None,
                    silence,
                }));
                true
            }
            Err(Failed { server, status: s }) => {
                if wire::is_refusal(&s) {
                    tracing::error!(node = %name, server = %server, "the server refused this agent: {}", s.message());
                } else {
                    let loud = shared.loud && !self.failing;
                    note!(loud, node = %name, server = %server, "the server is not reachable, trying the others: {}", s.message());
                    self.failing = true;
                }
                if matches!(&self.state, State::Opening(o) if !o.attempts.is_empty()) {
                    // Others are still in flight.
                    return false;
                }
                self.state = State::Down;
                self.retry_later(shared);
                false
            }
        }
    }

    fn retry_later(&mut self, shared: &Shared) {
        let wait = self.reconnect.next_delay(&mut self.rng);
        self.retry_at = shared.clock.now() + wait;
        self.server = next_server(
            &self.servers,
            self.server,
            &self.members,
            self.failures,
            &mut self.rng,
        );
        self.failures += 1;
    }

    /// The session ended (`why`); the next server is tried after a backoff.
    pub(super) fn down(&mut self, shared: &Shared, name: &str, why: &str) {
        if matches!(self.state, State::Up(_)) {
            shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
            shared.stats.lost.fetch_add(1, Ordering::Relaxed);
            note!(shared.loud, node = %name, server = %self.server_addr(), "lost its server: {why}");
        }
        self.state = State::Down;
        self.retry_later(shared);
    }

    /// Queues a message on the session; `false` when it cannot go now.
    pub(super) fn send_now(&mut self, msg: pb::AgentMessage, shared: &Shared, name: &str) -> bool {
        let now = shared.clock.now();
        let State::Up(up) = &mut self.state else {
            return false;
        };
        match up.session.tx.try_send(Box::new(msg)) {
            Ok(()) => {
                // The server counts a report as a heartbeat, and answers it.
                up.next_heartbeat = now + up.heartbeat_every;
                up.asked.get_or_insert(now);
                true
            }
            Err(TrySendError::Full(_)) => false,
            Err(TrySendError::Closed(_)) => {
                self.down(shared, name, "the session's queue closed");
                false
            }
        }
    }

    /// The next thing the session (or the attempt to open one) brings;
    /// pending while down.
    pub(super) async fn event(&mut self) -> LinkEvent {
        match &mut self.state {
            State::Up(up) => LinkEvent::Inbound(up.session.inbound.message().await),
            State::Opening(o) => LinkEvent::Opened(o.next_done().await.map(Box::new)),
            State::Down => std::future::pending().await,
        }
    }

    /// Sends Leave, on the session if one is up, else on the first server
    /// that answers within one round, and waits for the server to close the
    /// stream (it deleted the Node). `true` when a server took the Leave.
    pub(super) async fn leave(&mut self, shared: &Shared, me: &Identity) -> bool {
        let state = std::mem::replace(&mut self.state, State::Down);
        let opened = match state {
            State::Up(up) => {
                shared.stats.connected.fetch_sub(1, Ordering::Relaxed);
                Some(up.session)
            }
            // A session being opened (the node may already exist: its join
            // made it): let it finish, then leave on it.
            State::Opening(mut o) => {
                let first = async {
                    while !o.attempts.is_empty() {
                        if let Ok(s) = o.next_done().await {
                            return Some(s);
                        }
                    }
                    None
                };
                match tokio::time::timeout(shared.tuning.leave_timeout, first).await {
                    Ok(Some(s)) => {
                        if let Some(t) = &s.tls {
                            self.creds = Some(t.clone());
                        }
                        Some(s)
                    }
                    _ => None,
                }
            }
            State::Down => None,
        };
        let session = match opened {
            Some(s) => Some(s),
            None => {
                // Not connected: one round over the servers.
                let deadline = shared.clock.now() + shared.tuning.leave_timeout;
                let mut found = None;
                for _ in 0..self.servers.len() {
                    let left = deadline.saturating_duration_since(shared.clock.now());
                    if left.is_zero() {
                        break;
                    }
                    let Some(creds) = &self.creds else { break };
                    let Ok(channel) = creds.channel(self.server_addr()) else {
                        break;
                    };
                    let r = wire::open(
                        channel,
                        hello(shared, me),
                        left.min(shared.tuning.connect_timeout),
                    )
                    .await;
                    match r {
                        Ok(s) => {
                            found = Some(s);
                            break;
                        }
                        Err(_) => self.server = (self.server + 1) % self.servers.len(),
                    }
                }
                found
            }
        };
        match session {
            Some(s) => say_leave(s, shared.tuning.leave_timeout).await,
            None => false,
        }
    }
}

/// Sends Leave on a session and waits for the server to close it.
async fn say_leave(mut session: Session, timeout: Duration) -> bool {
    let leave = pb::AgentMessage {
        msg: Some(agent_message::Msg::Leave(pb::Leave {})),
    };
    let work = async {
        if session.tx.send(Box::new(leave)).await.is_err() {
            return false;
        }
        loop {
            match session.inbound.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return true,
                Err(_) => return false,
            }
        }
    };
    tokio::time::timeout(timeout, work).await.unwrap_or(false)
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
