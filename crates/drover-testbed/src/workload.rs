//! The workload: writers of the store's keys and a changer of DaemonSets,
//! at a steady pace, recording every invocation and its answer.
//!
//! - Register keys `/tb/reg/<k>`: reads (linearizable), unconditional
//!   writes, compare-and-swaps (a read, then an update at the revision
//!   read), creates and deletes; every value unique per key. Their
//!   histories go to [`crate::lin`].
//! - Log keys `/tb/log/<worker>/<seq>`: creates of new keys; every
//!   acknowledged one must be on every member exactly once at the end.
//! - DaemonSet `tb-roll`: its template changes (an annotation) every
//!   couple of seconds, so rolling updates run through the faults.

use crate::lin::{Input, Op, Output};
use crate::rng::Rng;
use drover_cli::{Client, ClientError};
use drover_proto::reason::Reason;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How many register keys.
pub const REGISTERS: u64 = 6;

pub fn register_key(k: u64) -> String {
    format!("/tb/reg/{k}")
}

/// A create of a log key and what came of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged at this revision.
    Acked(u64),
    /// Refused (the key existed).
    Failed(String),
    /// No answer.
    Unknown(String),
}

#[derive(Debug, Clone)]
pub struct Create {
    pub key: String,
    pub value: String,
    pub outcome: Outcome,
}

/// Everything the workload did.
#[derive(Debug, Default)]
pub struct History {
    /// (register key index, operation).
    pub ops: Vec<(u64, Op)>,
    pub creates: Vec<Create>,
    pub ds_changes_acked: u64,
    pub ds_changes_failed: u64,
}

impl History {
    /// Acknowledged writes: register writes/CAS/creates/deletes answered
    /// Ok and acknowledged log creates.
    pub fn acked_writes(&self) -> usize {
        self.ops
            .iter()
            .filter(|(_, o)| o.input != Input::Read && o.output == Output::Ok)
            .count()
            + self
                .creates
                .iter()
                .filter(|c| matches!(c.outcome, Outcome::Acked(_)))
                .count()
    }

    /// Writes with no answer.
    pub fn unknown_writes(&self) -> usize {
        self.ops
            .iter()
            .filter(|(_, o)| o.input != Input::Read && o.output == Output::Unknown)
            .count()
            + self
                .creates
                .iter()
                .filter(|c| matches!(c.outcome, Outcome::Unknown(_)))
                .count()
    }
}

/// The client the workload uses now (the fleet's members change).
pub type SharedClient = Arc<RwLock<Option<Client>>>;

fn current(c: &SharedClient) -> Option<Client> {
    c.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The register's value of a stored value; garbage reads as u64::MAX,
/// which nobody writes (so the checker fails on it).
fn value_of(bytes: &[u8]) -> u64 {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

fn definite(e: &ClientError, reasons: &[Reason]) -> bool {
    e.reason().is_some_and(|r| reasons.contains(&r))
}

/// The running workload.
pub struct Workload {
    pub history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Register operations done so far (for progress).
    pub done: Arc<AtomicU64>,
}

impl Workload {
    /// Starts `workers` kv workers (one operation each every `pace`) and
    /// the DaemonSet changer (every `ds_every`).
    pub fn start(
        t0: Instant,
        client: SharedClient,
        seed: u64,
        workers: usize,
        pace: Duration,
        ds_every: Duration,
    ) -> Workload {
        let history = Arc::new(Mutex::new(History::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for w in 0..workers {
            let (h, st, c, d) = (history.clone(), stop.clone(), client.clone(), done.clone());
            let mut rng = Rng::new(seed.wrapping_add(1 + w as u64));
            tasks.push(tokio::spawn(async move {
                let mut seq = 0u64;
                let now = || t0.elapsed().as_nanos() as u64;
                while !st.load(Ordering::Relaxed) {
                    let next = Instant::now() + pace;
                    let Some(client) = current(&c) else {
                        tokio::time::sleep(pace).await;
                        continue;
                    };
                    seq += 1;
                    // Unique per key: the worker in the high bits.
                    let value = ((w as u64 + 1) << 40) | seq;
                    let k = rng.below(REGISTERS);
                    let key = register_key(k);
                    let record = |input, output, call, ret| {
                        let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
                        h.ops.push((
                            k,
                            Op {
                                client: w,
                                input,
                                output,
                                call,
                                ret,
                            },
                        ));
                    };
                    match rng.below(20) {
                        0..=7 => {
                            let call = now();
                            match client.get(&key, false).await {
                                Ok((kv, _)) => {
                                    let v = kv.map(|kv| value_of(&kv.value));
                                    record(Input::Read, Output::Read(v), call, Some(now()));
                                }
                                Err(_) => record(Input::Read, Output::Unknown, call, None),
                            }
                        }
                        8..=11 => {
                            let call = now();
                            let r = client
                                .update(&key, value.to_string().into_bytes(), 0, true)
                                .await;
                            let (out, ret) = match r {
                                Ok(_) => (Output::Ok, Some(now())),
                                Err(_) => (Output::Unknown, None),
                            };
                            record(Input::Write(Some(value)), out, call, ret);
                        }
                        12 => {
                            let call = now();
                            match client.delete(&key, 0).await {
                                Ok(_) => record(Input::Write(None), Output::Ok, call, Some(now())),
                                // Nothing to delete: an observation of absence.
                                Err(e) if definite(&e, &[Reason::NotFound]) => {
                                    record(Input::Read, Output::Read(None), call, Some(now()))
                                }
                                Err(_) => record(Input::Write(None), Output::Unknown, call, None),
                            }
                        }
                        13..=16 => {
                            // Compare-and-swap: read, then write at the revision read.
                            let call = now();
                            let read = match client.get(&key, false).await {
                                Ok((kv, _)) => {
                                    let v = kv.as_ref().map(|kv| value_of(&kv.value));
                                    record(Input::Read, Output::Read(v), call, Some(now()));
                                    Some((v, kv.map(|kv| kv.mod_revision)))
                                }
                                Err(_) => {
                                    record(Input::Read, Output::Unknown, call, None);
                                    None
                                }
                            };
                            if let Some((from, rev)) = read {
                                let input = Input::Cas { from, to: value };
                                let call = now();
                                let bytes = value.to_string().into_bytes();
                                let r = match rev {
                                    Some(rev) => client.update(&key, bytes, rev, false).await,
                                    None => client.create(&key, bytes).await,
                                };
                                let refused =
                                    [Reason::Conflict, Reason::NotFound, Reason::AlreadyExists];
                                let (out, ret) = match r {
                                    Ok(_) => (Output::Ok, Some(now())),
                                    Err(e) if definite(&e, &refused) => {
                                        (Output::Failed, Some(now()))
                                    }
                                    Err(_) => (Output::Unknown, None),
                                };
                                record(input, out, call, ret);
                            }
                        }
                        _ => {
                            let key = format!("/tb/log/{w}/{seq:08}");
                            let value = format!("v{w}/{seq}");
                            let outcome =
                                match client.create(&key, value.clone().into_bytes()).await {
                                    Ok(r) => Outcome::Acked(r.revision),
                                    Err(e) if definite(&e, &[Reason::AlreadyExists]) => {
                                        Outcome::Failed(e.to_string())
                                    }
                                    Err(e) => Outcome::Unknown(e.to_string()),
                                };
                            let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
                            h.creates.push(Create {
                                key,
                                value,
                                outcome,
                            });
                        }
                    }
                    d.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep_until(next.into()).await;
                }
            }));
        }
        // The DaemonSet changer.
        let (h, st, c) = (history.clone(), stop.clone(), client.clone());
        tasks.push(tokio::spawn(async move {
            let mut generation = 0u64;
            while !st.load(Ordering::Relaxed) {
                let next = Instant::now() + ds_every;
                if let Some(client) = current(&c) {
                    generation += 1;
                    let r = client
                        .apply(&daemon_set("tb-roll", None, generation), false)
                        .await;
                    let mut h = h.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok(_) => h.ds_changes_acked += 1,
                        Err(_) => h.ds_changes_failed += 1,
                    }
                }
                tokio::time::sleep_until(next.into()).await;
            }
        }));
        Workload {
            history,
            stop,
            tasks,
            done,
        }
    }

    /// Stops every task (each finishes its operation in flight).
    pub async fn stop(self) -> History {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *h)
    }
}

/// A DaemonSet manifest: on every node, or on nodes with `selector`
/// (`k=v`); `generation` goes into a template annotation (a change of it is
/// a rolling update).
pub fn daemon_set(name: &str, selector: Option<(&str, &str)>, generation: u64) -> String {
    let node_selector = match selector {
        Some((k, v)) => format!("      nodeSelector:\n        {k}: \"{v}\"\n"),
        None => String::new(),
    };
    format!(
        r#"apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
spec:
  selector:
    matchLabels:
      app: {name}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 2
  template:
    metadata:
      labels:
        app: {name}
      annotations:
        tb/generation: "{generation}"
    spec:
      terminationGracePeriodSeconds: 1
{node_selector}      containers:
      - name: main
        image: local/busybox:1
        imagePullPolicy: Never
        command: ["sleep", "1000000"]
"#
    )
}
