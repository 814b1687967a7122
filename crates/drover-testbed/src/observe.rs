//! What the cluster shows: nodes' readiness and the pods of each
//! DaemonSet on each node, read from the store (`/registry/…`, a
//! linearizable list) and decoded leniently (serde_json values: the
//! testbed checks what the API stores, not its own model of it).
//!
//! [`Observer`] polls both while the faults run and records every change
//! of a node's readiness and every moment two live pods of one DaemonSet
//! shared a node.

use drover_cli::Client;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One pod as the checks need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub name: String,
    pub node: String,
    /// The DaemonSet owning it (ownerReferences), if any.
    pub owner: Option<String>,
    pub phase: String,
    /// Being deleted (deletionTimestamp set).
    pub deleting: bool,
}

fn json(bytes: &[u8]) -> Option<Value> {
    serde_json::from_slice(bytes).ok()
}

/// Every node and whether it is Ready.
pub async fn nodes(client: &Client) -> Result<BTreeMap<String, bool>, drover_cli::ClientError> {
    let (kvs, _) = client.list("/registry/nodes/", false).await?;
    let mut out = BTreeMap::new();
    for kv in kvs {
        let Some(v) = json(&kv.value) else { continue };
        let Some(name) = v["metadata"]["name"].as_str() else {
            continue;
        };
        let ready = v["status"]["conditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .unwrap_or(false);
        out.insert(name.to_string(), ready);
    }
    Ok(out)
}

/// Every pod.
pub async fn pods(client: &Client) -> Result<Vec<Pod>, drover_cli::ClientError> {
    let (kvs, _) = client.list("/registry/pods/", false).await?;
    Ok(kvs
        .iter()
        .filter_map(|kv| {
            let v = json(&kv.value)?;
            let owner = v["metadata"]["ownerReferences"]
                .as_array()
                .and_then(|os| os.iter().find(|o| o["kind"] == "DaemonSet"))
                .and_then(|o| o["name"].as_str())
                .map(str::to_string);
            Some(Pod {
                name: v["metadata"]["name"].as_str()?.to_string(),
                node: v["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                owner,
                phase: v["status"]["phase"].as_str().unwrap_or("").to_string(),
                deleting: !v["metadata"]["deletionTimestamp"].is_null(),
            })
        })
        .collect())
}

/// Live pods (not being deleted) per (DaemonSet, node) when more than one.
pub fn duplicates(pods: &[Pod]) -> Vec<(String, String, Vec<String>)> {
    let mut by: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for p in pods.iter().filter(|p| !p.deleting && !p.node.is_empty()) {
        if let Some(ds) = &p.owner {
            by.entry((ds.clone(), p.node.clone()))
                .or_default()
                .push(p.name.clone());
        }
    }
    by.into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|((ds, node), v)| (ds, node, v))
        .collect()
}

/// Whether every node of `eligible` (DaemonSet → its eligible nodes) has
/// exactly one live pod of it, Running; and what is missing if not.
pub fn converged(pods: &[Pod], eligible: &HashMap<String, Vec<String>>) -> Result<(), String> {
    let mut missing = Vec::new();
    for (ds, nodes) in eligible {
        for node in nodes {
            let live: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.owner.as_deref() == Some(ds) && &p.node == node && !p.deleting)
                .collect();
            match live.as_slice() {
                [p] if p.phase == "Running" => {}
                [p] => missing.push(format!("{ds}@{node}: {}", p.phase)),
                [] => missing.push(format!("{ds}@{node}: no pod")),
                more => missing.push(format!("{ds}@{node}: {} pods", more.len())),
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        missing.sort();
        Err(missing.join(", "))
    }
}

/// A node's readiness changed (seconds since the run started).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub at: f64,
    pub node: String,
    pub ready: bool,
}

/// Two live pods of one DaemonSet on one node, seen at `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Duplicate {
    pub at: f64,
    pub ds: String,
    pub node: String,
    pub pods: Vec<String>,
}

/// What the observer saw.
#[derive(Debug, Default)]
pub struct Seen {
    pub changes: Vec<Change>,
    pub duplicates: Vec<Duplicate>,
    pub polls: u64,
    pub failed_polls: u64,
    last: BTreeMap<String, bool>,
}

/// Polls nodes and pods until stopped.
pub struct Observer {
    pub seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Observer {
    /// Starts polling with the client `client_of()` returns at each poll
    /// (the members change), every `every`.
    pub fn start(
        t0: Instant,
        every: Duration,
        client_of: impl Fn() -> Option<Client> + Send + 'static,
    ) -> Observer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !st.load(Ordering::Relaxed) {
                if let Some(client) = client_of() {
                    let r = tokio::try_join!(nodes(&client), pods(&client));
                    let at = t0.elapsed().as_secs_f64();
                    let mut seen = s.lock().unwrap_or_else(|e| e.into_inner());
                    seen.polls += 1;
                    match r {
                        Ok((ns, ps)) => {
                            for (node, ready) in &ns {
                                if seen.last.get(node) != Some(ready) {
                                    seen.changes.push(Change {
                                        at,
                                        node: node.clone(),
                                        ready: *ready,
                                    });
                                }
                            }
                            seen.last = ns;
                            for (ds, node, pods) in duplicates(&ps) {
                                seen.duplicates.push(Duplicate { at, ds, node, pods });
                            }
                        }
                        Err(_) => seen.failed_polls += 1,
                    }
                }
                tokio::time::sleep(every).await;
            }
        });
        Observer { seen, stop, task }
    }

    /// Stops polling and returns what was seen.
    pub async fn stop(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, ds: &str, phase: &str, deleting: bool) -> Pod {
        Pod {
            name: name.into(),
            node: node.into(),
            owner: Some(ds.into()),
            phase: phase.into(),
            deleting,
        }
    }

    #[test]
    fn duplicates_and_convergence() {
        let pods = vec![
            pod("a-1", "n1", "a", "Running", false),
            pod("a-2", "n1", "a", "Pending", false),
            pod("a-3", "n2", "a", "Running", true),
            pod("a-4", "n2", "a", "Running", false),
            pod("b-1", "n1", "b", "Running", false),
        ];
        assert_eq!(
            duplicates(&pods),
            vec![("a".into(), "n1".into(), vec!["a-1".into(), "a-2".into()])]
        );
        let mut eligible = HashMap::new();
        eligible.insert("b".to_string(), vec!["n1".to_string()]);
        assert_eq!(converged(&pods, &eligible), Ok(()));
        eligible.insert("a".to_string(), vec!["n1".to_string(), "n2".to_string()]);
        assert_eq!(converged(&pods, &eligible), Err("a@n1: 2 pods".into()));
        eligible.insert("b".to_string(), vec!["n1".to_string(), "n3".to_string()]);
        assert!(converged(&pods, &eligible)
            .unwrap_err()
            .contains("b@n3: no pod"));
    }
}
