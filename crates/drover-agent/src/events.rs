//! Pod events as the kubelet records them, pure (time is an argument).
//!
//! The agent notes what happens to a pod ([`Note`]: Pulling, Pulled,
//! Created, Started, Killing, Failed, BackOff, Unhealthy, FailedMount …)
//! and the [`Correlator`] turns the notes into Kubernetes Events the way
//! client-go's `EventCorrelator` does for the kubelet:
//!
//! - **Deduplication.** A note with the same involved object (pod uid and
//!   `fieldPath`), type, reason and message as one already recorded is the
//!   same Event again: its `count` grows and its `lastTimestamp` moves; its
//!   name (`<pod>.<hex of the first time in ns>`, as the kubelet names them)
//!   and `firstTimestamp` stay.
//! - **Spam filter.** Writing an Event (new, or a new count) costs a token
//!   from its pod's bucket: a burst of [`EventLimits::burst`] (25), then one
//!   every [`EventLimits::refill`] (5 minutes), client-go's defaults. Unlike
//!   client-go, a write held back is not lost: the Event stays pending and
//!   goes, with its latest count, when the bucket allows — so a crash loop
//!   costs one write per pod every 5 minutes, and the count is right.
//! - **Bounds.** At most [`MAX_ENTRIES`] Events are remembered per node
//!   (client-go's LRU holds 4096); the oldest sent one is forgotten first.
//!   Messages are cut to [`MAX_MESSAGE_BYTES`].

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The longest message an Event carries, in bytes (longer ones are cut at
/// a character boundary, with `…`); the server refuses longer ones.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// How many Events one node remembers (client-go's LRU size).
pub const MAX_ENTRIES: usize = 4096;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Routine.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    /// As Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One thing that happened to a pod (or one of its containers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The pod's uid.
    pub pod_uid: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// `spec.containers{NAME}` for a container's event, empty for the pod's.
    pub field_path: String,
    /// Normal or Warning.
    pub r#type: EventType,
    /// Kubernetes' reason, e.g. `BackOff`.
    pub reason: &'static str,
    /// What happened, for people.
    pub message: String,
}

impl Note {
    /// A note about container `container` of a pod.
    pub fn container(
        pod: &drover_api::Pod,
        container: &str,
        r#type: EventType,
        reason: &'static str,
        message: String,
    ) -> Note {
        Note {
            pod_uid: pod.metadata.uid.clone(),
            namespace: pod.metadata.namespace.clone(),
            pod: pod.metadata.name.clone(),
            field_path: format!("spec.containers{{{container}}}"),
            r#type,
            reason,
            message,
        }
    }
}

/// The kubelet's event reasons.
pub mod reason {
    /// An image pull starts.
    pub const PULLING: &str = "Pulling";
    /// The image is there (pulled, or already present).
    pub const PULLED: &str = "Pulled";
    /// A pull, create or start failed (`Error: …`).
    pub const FAILED: &str = "Failed";
    /// The image is absent and the pull policy is Never.
    pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
    /// The container was created.
    pub const CREATED: &str = "Created";
    /// The container was started.
    pub const STARTED: &str = "Started";
    /// The container is being stopped.
    pub const KILLING: &str = "Killing";
    /// A probe failed.
    pub const UNHEALTHY: &str = "Unhealthy";
    /// A restart (or an image pull) waits for its backoff.
    pub const BACK_OFF: &str = "BackOff";
    /// A volume could not be set up.
    pub const FAILED_MOUNT: &str = "FailedMount";
}

/// The spam filter's limits (client-go's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Writes a pod may make at once.
    pub burst: u32,
    /// One more write per this much time.
    pub refill: Duration,
}

impl Default for EventLimits {
    fn default() -> Self {
        EventLimits {
            burst: 25,
            refill: Duration::from_secs(300),
        }
    }
}

/// An Event as it goes to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The Event's name, `<pod>.<hex>`.
    pub name: String,
    /// The pod's namespace (the Event's).
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's uid.
    pub pod_uid: String,
    /// `spec.containers{NAME}` or empty.
    pub field_path: String,
    /// Normal or Warning.
    pub r#type: EventType,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
    /// How many times it happened.
    pub count: u32,
    /// When it happened first.
    pub first: SystemTime,
    /// When it happened last.
    pub last: SystemTime,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    pod_uid: String,
    field_path: String,
    r#type: EventType,
    reason: &'static str,
    message: String,
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    namespace: String,
    pod: String,
    count: u32,
    first: SystemTime,
    last: SystemTime,
    /// Not written with its latest count yet.
    dirty: bool,
}

/// A token bucket: `burst` tokens, one more every `refill`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: SystemTime,
}

impl Bucket {
    /// Whether a token is there (with room for rounding: [`Bucket::next_token`]
    /// must find one at the time it gives).
    fn has_token(self) -> bool {
        self.tokens + 1e-6 >= 1.0
    }

    fn refilled(self, limits: EventLimits, now: SystemTime) -> Bucket {
        let elapsed = now.duration_since(self.at).unwrap_or_default();
        let per = limits.refill.as_secs_f64().max(1e-9);
        Bucket {
            tokens: (self.tokens + elapsed.as_secs_f64() / per).min(f64::from(limits.burst)),
            at: now.max(self.at),
        }
    }

    /// When the next token is there.
    fn next_token(self, limits: EventLimits) -> SystemTime {
        let missing = (1.0 - self.tokens).max(0.0);
        self.at + limits.refill.mul_f64(missing)
    }
}

/// Counts and rate-limits one node's pod events; see the module docs.
#[derive(Debug, Default)]
pub struct Correlator {
    limits: EventLimits,
    entries: HashMap<Key, Entry>,
    /// Names in use (a name is never given twice while remembered).
    names: HashMap<String, Key>,
    buckets: HashMap<String, Bucket>,
}

/// `message` cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
pub fn bounded_message(mut message: String) -> String {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut cut = MAX_MESSAGE_BYTES - '…'.len_utf8();
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    message.truncate(cut);
    message.push('…');
    message
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Correlator {
    /// A correlator with these limits.
    pub fn new(limits: EventLimits) -> Self {
        Correlator {
            limits,
            ..Correlator::default()
        }
    }

    /// How many Events it remembers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether some Event waits to be written.
    pub fn pending(&self) -> bool {
        self.entries.values().any(|e| e.dirty)
    }

    /// Records that `note` happened at `now`.
    pub fn observe(&mut self, note: Note, now: SystemTime) {
        let key = Key {
            pod_uid: note.pod_uid,
            field_path: note.field_path,
            r#type: note.r#type,
            reason: note.reason,
            message: bounded_message(note.message),
        };
        if let Some(e) = self.entries.get_mut(&key) {
            e.count = e.count.saturating_add(1);
            e.last = e.last.max(now);
            e.dirty = true;
            return;
        }
        if self.entries.len() >= MAX_ENTRIES {
            self.evict();
        }
        // The kubelet's name: the pod's, then the time in hex; a name in
        // use takes the next nanosecond. Kept within 253 characters.
        let mut pod = note.pod.clone();
        pod.truncate(253 - 17);
        let mut n = unix_nanos(now);
        let mut name = format!("{pod}.{n:x}");
        while self.names.contains_key(&name) {
            n = n.wrapping_add(1);
            name = format!("{pod}.{n:x}");
        }
        self.names.insert(name.clone(), key.clone());
        self.entries.insert(
            key,
            Entry {
                name,
                namespace: note.namespace,
                pod: note.pod,
                count: 1,
                first: now,
                last: now,
                dirty: true,
            },
        );
    }

    /// Forgets the written Event seen last longest ago (or, if all wait,
    /// the oldest one).
    fn evict(&mut self) {
        let victim = self
            .entries
            .iter()
            .min_by_key(|(_, e)| (e.dirty, e.last))
            .map(|(k, _)| k.clone());
        if let Some(k) = victim {
            if let Some(e) = self.entries.remove(&k) {
                self.names.remove(&e.name);
            }
        }
    }

    /// The Events to write now: every pending one whose pod's bucket has a
    /// token (each takes one), at most `max`, oldest change first. They are
    /// no longer pending.
    pub fn take_due(&mut self, now: SystemTime, max: usize) -> Vec<Recorded> {
        let mut pending: Vec<(&Key, &mut Entry)> =
            self.entries.iter_mut().filter(|(_, e)| e.dirty).collect();
        pending.sort_by(|a, b| (a.1.last, &a.1.name).cmp(&(b.1.last, &b.1.name)));
        let mut out = Vec::new();
        for (k, e) in pending {
            if out.len() >= max {
                break;
            }
            let limits = self.limits;
            let bucket = self.buckets.entry(k.pod_uid.clone()).or_insert(Bucket {
                tokens: f64::from(limits.burst),
                at: now,
            });
            let mut b = bucket.refilled(limits, now);
            if !b.has_token() {
                *bucket = b;
                continue;
            }
            b.tokens = (b.tokens - 1.0).max(0.0);
            *bucket = b;
            e.dirty = false;
            out.push(Recorded {
                name: e.name.clone(),
                namespace: e.namespace.clone(),
                pod: e.pod.clone(),
                pod_uid: k.pod_uid.clone(),
                field_path: k.field_path.clone(),
                r#type: k.r#type,
                reason: k.reason,
                message: k.message.clone(),
                count: e.count,
                first: e.first,
                last: e.last,
            });
        }
        out
    }

    /// Events went back to pending (they could not be sent).
    pub fn unsent(&mut self, events: &[Recorded]) {
        for r in events {
            if let Some(k) = self.names.get(&r.name) {
                if let Some(e) = self.entries.get_mut(k) {
                    e.dirty = true;
                }
            }
        }
    }

    /// When a pending Event held back by its pod's bucket may go, if any
    /// is (the earliest).
    pub fn next_due(&self, now: SystemTime) -> Option<SystemTime> {
        self.entries
            .iter()
            .filter(|(_, e)| e.dirty)
            .map(|(k, _)| match self.buckets.get(&k.pod_uid) {
                Some(b) => {
                    let b = b.refilled(self.limits, now);
                    if b.has_token() {
                        now
                    } else {
                        b.next_token(self.limits)
                    }
                }
                None => now,
            })
            .min()
    }

    /// Forgets the written Events (and the buckets) of pods `live` says
    /// are gone; pending ones stay until written.
    pub fn forget_gone(&mut self, live: impl Fn(&str) -> bool) {
        let names = &mut self.names;
        self.entries.retain(|k, e| {
            let keep = e.dirty || live(&k.pod_uid);
            if !keep {
                names.remove(&e.name);
            }
            keep
        });
        let entries = &self.entries;
        self.buckets
            .retain(|uid, _| live(uid) || entries.keys().any(|k| k.pod_uid == *uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    fn note(uid: &str, reason: &'static str, message: &str) -> Note {
        Note {
            pod_uid: uid.into(),
            namespace: "default".into(),
            pod: format!("web-{uid}"),
            field_path: "spec.containers{app}".into(),
            r#type: EventType::Warning,
            reason,
            message: message.into(),
        }
    }

    #[test]
    fn the_same_note_is_one_event_whose_count_grows() {
        let mut c = Correlator::default();
        c.observe(note("a", reason::BACK_OFF, "Back-off"), t(0));
        let first = c.take_due(t(0), 100);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].count, 1);
        assert_eq!(first[0].name, format!("web-a.{:x}", unix_nanos(t(0))));
        assert!(c.take_due(t(1), 100).is_empty(), "nothing new");
        for s in 1..=4 {
            c.observe(note("a", reason::BACK_OFF, "Back-off"), t(s * 10));
        }
        let again = c.take_due(t(40), 100);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].name, first[0].name, "same Event");
        assert_eq!(again[0].count, 5);
        assert_eq!(again[0].first, t(0));
        assert_eq!(again[0].last, t(40));
        // Another message, another Event; another pod, another Event.
        c.observe(note("a", reason::BACK_OFF, "other"), t(41));
        c.observe(note("b", reason::BACK_OFF, "Back-off"), t(41));
        let more = c.take_due(t(41), 100);
        assert_eq!(more.len(), 2);
        assert!(more.iter().all(|r| r.count == 1));
        assert_ne!(more[0].name, more[1].name);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn a_pod_writes_a_burst_then_one_event_per_refill_and_the_count_catches_up() {
        let limits = EventLimits {
            burst: 25,
            refill: Duration::from_secs(300),
        };
        let mut c = Correlator::new(limits);
        let mut written = 0;
        let mut last_count = 0;
        // A crash loop: a BackOff every second for an hour, flushed every
        // second.
        for s in 0..3600 {
            c.observe(note("a", reason::BACK_OFF, "Back-off"), t(s));
            for r in c.take_due(t(s), 100) {
                written += 1;
                last_count = r.count;
            }
        }
        // 25 at once, then one per 5 minutes: 25 + 3599/300 = 36.
        assert_eq!(written, 25 + 11);
        assert!(c.pending(), "the latest count waits for a token");
        let at = c.next_due(t(3600)).expect("due");
        assert!(at >= t(3600) && at <= t(3600 + 300), "{at:?}");
        let late = c.take_due(at, 100);
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].count, 3600, "the count is the whole story");
        assert!(last_count < 3600);
        // Another pod has its own bucket.
        c.observe(note("b", reason::BACK_OFF, "Back-off"), at);
        assert_eq!(c.take_due(at, 100).len(), 1);
    }

    #[test]
    fn bounded_per_flush_and_in_memory() {
        let mut c = Correlator::new(EventLimits {
            burst: 1_000_000,
            refill: Duration::from_secs(1),
        });
        for i in 0..(MAX_ENTRIES + 10) {
            c.observe(note("a", reason::FAILED, &format!("m{i}")), t(i as u64));
            if i % 2 == 0 {
                let _ = c.take_due(t(i as u64), 1);
            }
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        let batch = c.take_due(t(99_999), 100);
        assert_eq!(batch.len(), 100);
        // Unsent ones go back.
        c.unsent(&batch);
        assert_eq!(c.take_due(t(99_999), 100), batch);
    }

    #[test]
    fn long_messages_are_cut_and_gone_pods_forgotten() {
        let mut c = Correlator::default();
        c.observe(note("a", reason::FAILED, &"é".repeat(2000)), t(0));
        let r = c.take_due(t(0), 10);
        assert!(r[0].message.len() <= MAX_MESSAGE_BYTES);
        assert!(r[0].message.ends_with('…'));
        c.observe(note("b", reason::FAILED, "x"), t(1));
        c.forget_gone(|_| false);
        assert_eq!(c.len(), 1, "b's event still waits to be written");
        let _ = c.take_due(t(1), 10);
        c.forget_gone(|_| false);
        assert!(c.is_empty());
    }
}
