//! This member's Prometheus metrics (`GET /metrics` on the HTTP port, the
//! admin token; [`crate::http`]). The list, with types and labels:
//! `docs/metrics.md`.
//!
//! Two kinds: what is recorded as it happens (store writes and their
//! duration, controller and scheduler passes, pods bound), and what is read when scraped (raft
//! indexes, sessions, nodes, DaemonSet status counters, pods by phase),
//! given to [`Metrics::render`] as [`Facts`]. No label names a node or a
//! pod, so the number of series stays bounded at 10,000 nodes: DaemonSets
//! are the only unbounded label, one series per status field.

use prometheus_client::encoding::{text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    ready: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DaemonSetLabels {
    daemonset: String,
    namespace: String,
    field: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: String,
}

/// One DaemonSet's status counters, as scraped.
#[derive(Debug, Clone, Default)]
pub struct DaemonSetFacts {
    pub namespace: String,
    pub name: String,
    /// `(field, value)`: `desiredNumberScheduled`, `currentNumberScheduled`,
    /// `numberReady`, `numberAvailable`, `numberUnavailable`,
    /// `numberMisscheduled`, `updatedNumberScheduled`.
    pub counters: Vec<(&'static str, i64)>,
}

/// What is read when scraped.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub term: u64,
    pub is_leader: bool,
    pub commit: u64,
    pub applied: u64,
    pub sessions: usize,
    /// The heartbeat interval this member asks of its agents now
    /// ([`crate::heartbeats::interval_for`]).
    pub heartbeat_interval: Duration,
    pub nodes_ready: usize,
    pub nodes_not_ready: usize,
    pub daemon_sets: Vec<DaemonSetFacts>,
    /// Pods by `status.phase` (`Pending` for none).
    pub pods: Vec<(String, usize)>,
}

/// The watch cache's counters ([`crate::cache::window`]), shared with it.
#[derive(Clone, Debug, Default)]
pub struct WatchCounters {
    /// Changes the informer put into the window (one decode each).
    pub events: Counter,
    /// Objects encoded (JSON) for watchers: at most one per change,
    /// whatever the number of watchers.
    pub encodes: Counter,
    /// Events sent to watchers from the window.
    pub sent: Counter,
    /// Watches ended with 410 Gone: resumed from before the window, or
    /// fallen behind it.
    pub expired: Counter,
    /// Events decoded from the store for a watch of a kind the window does
    /// not hold (one per watcher and change).
    pub store_decodes: Counter,
    /// Watches served from the window now.
    pub watchers: Gauge,
}

/// The member's metrics; recorded from anywhere, rendered by `/metrics`.
pub struct Metrics {
    registry: Registry,
    /// Store writes this member made as the leader (each a raft proposal
    /// it waited for).
    pub store_writes: Counter,
    /// How long each took, from the proposal to the answer.
    pub store_write_duration: Histogram,
    /// How long each pass of the leader's controllers took.
    pub controller_pass_duration: Histogram,
    /// Passes the leader's controllers did not run: woken only by their
    /// own DaemonSet status writes, they would have planned the same.
    pub controller_passes_skipped: Counter,
    /// Nodes the node lifecycle judged, over all passes (a pass judges
    /// only those whose verdict may have changed).
    pub controller_nodes_judged: Counter,
    /// Nodes the DaemonSet plans diffed, over all passes and DaemonSets (a
    /// plan with a memo diffs only the nodes that changed).
    pub controller_daemon_nodes_planned: Counter,
    /// How long each pass of the leader's scheduler took (one that
    /// scheduled at least one pod).
    pub scheduler_pass_duration: Histogram,
    /// Pods the scheduler bound.
    pub scheduler_pods_bound: Counter,
    /// Scheduling attempts that found no node for a pod.
    pub scheduler_pods_unschedulable: Counter,
    /// Pods the scheduler preempted (deleted for a pod of higher
    /// priority).
    pub scheduler_preemption_victims: Counter,
    /// The watch cache's.
    pub watch: WatchCounters,
    raft_term: Gauge,
    raft_is_leader: Gauge,
    raft_commit: Gauge,
    raft_applied: Gauge,
    sessions: Gauge,
    heartbeat_interval: Gauge<f64, std::sync::atomic::AtomicU64>,
    nodes: Family<ReadyLabels, Gauge>,
    daemon_sets: Family<DaemonSetLabels, Gauge>,
    pods: Family<PhaseLabels, Gauge>,
    /// One render at a time: the scrape-time gauges are set, then encoded.
    render: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        registry.register("drover_build_info", "drover's version (always 1)", build);
        let m = Metrics {
            store_writes: Counter::default(),
            // 0.5 ms … ~16 s.
            store_write_duration: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            // 1 ms … ~32 s.
            controller_pass_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            controller_passes_skipped: Counter::default(),
            controller_nodes_judged: Counter::default(),
            controller_daemon_nodes_planned: Counter::default(),
            // 0.1 ms … ~3 s.
            scheduler_pass_duration: Histogram::new(exponential_buckets(0.0001, 2.0, 16)),
            scheduler_pods_bound: Counter::default(),
            scheduler_pods_unschedulable: Counter::default(),
            scheduler_preemption_victims: Counter::default(),
            watch: WatchCounters::default(),
            raft_term: Gauge::default(),
            raft_is_leader: Gauge::default(),
            raft_commit: Gauge::default(),
            raft_applied: Gauge::default(),
            sessions: Gauge::default(),
            heartbeat_interval: Gauge::default(),
            nodes: Family::default(),
            daemon_sets: Family::default(),
            pods: Family::default(),
            render: Mutex::new(()),
            registry: Registry::default(),
        };
        registry.register(
            "drover_raft_term",
            "The raft term this member is in",
            m.raft_term.clone(),
        );
        registry.register(
            "drover_raft_is_leader",
            "1 when this member leads the cluster",
            m.raft_is_leader.clone(),
        );
        registry.register(
            "drover_raft_commit_index",
            "The highest raft index this member knows committed",
            m.raft_commit.clone(),
        );
        registry.register(
            "drover_raft_applied_index",
            "The highest raft index applied to this member's store",
            m.raft_applied.clone(),
        );
        registry.register(
            "drover_store_writes",
            "Store writes this member proposed as the leader",
            m.store_writes.clone(),
        );
        registry.register(
            "drover_store_write_duration_seconds",
            "Time from a write's proposal to its answer, on the leader",
            m.store_write_duration.clone(),
        );
        registry.register(
            "drover_controller_pass_duration_seconds",
            "Time of one pass of the leader's controllers (DaemonSets, node lifecycle, pod GC)",
            m.controller_pass_duration.clone(),
        );
        registry.register(
            "drover_controller_passes_skipped",
            "Passes of the leader's controllers not run: woken only by their own DaemonSet status writes",
            m.controller_passes_skipped.clone(),
        );
        registry.register(
            "drover_controller_nodes_judged",
            "Nodes the node lifecycle judged, over all passes (only those whose verdict may have changed)",
            m.controller_nodes_judged.clone(),
        );
        registry.register(
            "drover_controller_daemon_nodes_planned",
            "Nodes the DaemonSet plans diffed, over all passes (with a memo, only those that changed)",
            m.controller_daemon_nodes_planned.clone(),
        );
        registry.register(
            "drover_scheduler_pass_duration_seconds",
            "Time of one pass of the leader's scheduler that scheduled pods",
            m.scheduler_pass_duration.clone(),
        );
        registry.register(
            "drover_scheduler_pods_bound",
            "Pods the leader's scheduler bound to a node",
            m.scheduler_pods_bound.clone(),
        );
        registry.register(
            "drover_scheduler_pods_unschedulable",
            "Scheduling attempts that found no node for a pod",
            m.scheduler_pods_unschedulable.clone(),
        );
        registry.register(
            "drover_scheduler_preemption_victims",
            "Pods the scheduler deleted to make room for a pod of higher priority",
            m.scheduler_preemption_victims.clone(),
        );
        for (name, help, c) in [
            (
                "drover_watch_cache_events",
                "Changes the informer put into the watch cache's window (one decode each)",
                &m.watch.events,
            ),
            (
                "drover_watch_cache_encodes",
                "Objects encoded once for every watcher of the window",
                &m.watch.encodes,
            ),
            (
                "drover_watch_cache_sent",
                "Events sent to watchers from the window",
                &m.watch.sent,
            ),
            (
                "drover_watch_cache_expired",
                "Watches ended with 410 Gone (before the window, or fallen behind it)",
                &m.watch.expired,
            ),
            (
                "drover_watch_store_decodes",
                "Events decoded from the store for watches of kinds the window does not hold",
                &m.watch.store_decodes,
            ),
        ] {
            registry.register(name, help, c.clone());
        }
        registry.register(
            "drover_watch_cache_watchers",
            "Watches served from the watch cache's window now",
            m.watch.watchers.clone(),
        );
        registry.register(
            "drover_agent_sessions",
            "Agent sessions this member holds",
            m.sessions.clone(),
        );
        registry.register(
            "drover_heartbeat_interval_seconds",
            "The heartbeat interval this member asks of its agents now (longer with many sessions)",
            m.heartbeat_interval.clone(),
        );
        registry.register(
            "drover_nodes",
            "Nodes by their Ready condition (as this member's view has them)",
            m.nodes.clone(),
        );
        registry.register(
            "drover_daemonset_status",
            "A DaemonSet's status counters, one series per field",
            m.daemon_sets.clone(),
        );
        registry.register("drover_pods", "Pods by phase", m.pods.clone());
        Metrics { registry, ..m }
    }

    /// Records a store write that took `took`.
    pub fn write_done(&self, took: Duration) {
        self.store_writes.inc();
        self.store_write_duration.observe(took.as_secs_f64());
    }

    /// The Prometheus text format, with the scrape-time `facts`.
    pub fn render(&self, facts: &Facts) -> String {
        let _one = self.render.lock().unwrap_or_else(|e| e.into_inner());
        let g = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.raft_term.set(g(facts.term));
        self.raft_is_leader.set(i64::from(facts.is_leader));
        self.raft_commit.set(g(facts.commit));
        self.raft_applied.set(g(facts.applied));
        self.sessions.set(g(facts.sessions as u64));
        self.heartbeat_interval
            .set(facts.heartbeat_interval.as_secs_f64());
        for (ready, n) in [
            ("true", facts.nodes_ready),
            ("false", facts.nodes_not_ready),
        ] {
            self.nodes
                .get_or_create(&ReadyLabels {
                    ready: ready.to_string(),
                })
                .set(g(n as u64));
        }
        // DaemonSets and phases come and go: only the current ones.
        self.daemon_sets.clear();
        for ds in &facts.daemon_sets {
            for (field, value) in &ds.counters {
                self.daemon_sets
                    .get_or_create(&DaemonSetLabels {
                        daemonset: ds.name.clone(),
                        namespace: ds.namespace.clone(),
                        field: (*field).to_string(),
                    })
                    .set(*value);
            }
        }
        self.pods.clear();
        for (phase, n) in &facts.pods {
            self.pods
                .get_or_create(&PhaseLabels {
                    phase: phase.clone(),
                })
                .set(g(*n as u64));
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_every_metric_with_its_type() {
        let m = Metrics::new();
        m.write_done(Duration::from_millis(3));
        m.controller_pass_duration.observe(0.02);
        m.scheduler_pass_duration.observe(0.003);
        m.scheduler_pods_bound.inc_by(5);
        m.scheduler_pods_unschedulable.inc();
        let facts = Facts {
            term: 7,
            is_leader: true,
            commit: 42,
            applied: 41,
            sessions: 3,
            heartbeat_interval: Duration::from_millis(1_250),
            nodes_ready: 2,
            nodes_not_ready: 1,
            daemon_sets: vec![DaemonSetFacts {
                namespace: "default".into(),
                name: "agent".into(),
                counters: vec![("desiredNumberScheduled", 3), ("numberReady", 2)],
            }],
            pods: vec![("Running".into(), 2), ("Pending".into(), 1)],
        };
        let text = m.render(&facts);
        for line in [
            "# TYPE drover_build_info gauge",
            "drover_raft_term 7",
            "drover_raft_is_leader 1",
            "drover_raft_commit_index 42",
            "drover_raft_applied_index 41",
            "# TYPE drover_store_writes counter",
            "drover_store_writes_total 1",
            "# TYPE drover_store_write_duration_seconds histogram",
            "drover_store_write_duration_seconds_count 1",
            "drover_controller_pass_duration_seconds_count 1",
            "# TYPE drover_scheduler_pass_duration_seconds histogram",
            "drover_scheduler_pass_duration_seconds_count 1",
            "drover_scheduler_pods_bound_total 5",
            "drover_scheduler_pods_unschedulable_total 1",
            "drover_scheduler_preemption_victims_total 0",
            "drover_agent_sessions 3",
            "# TYPE drover_heartbeat_interval_seconds gauge",
            "drover_heartbeat_interval_seconds 1.25",
            "drover_nodes{ready=\"true\"} 2",
            "drover_nodes{ready=\"false\"} 1",
            "drover_daemonset_status{daemonset=\"agent\",namespace=\"default\",field=\"numberReady\"} 2",
            "drover_pods{phase=\"Pending\"} 1",
            "# TYPE drover_watch_cache_encodes counter",
            "drover_watch_cache_events_total 0",
            "drover_watch_cache_watchers 0",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        // A DaemonSet that is gone leaves no series behind.
        let text = m.render(&Facts::default());
        assert!(!text.contains("daemonset=\"agent\""), "{text}");
    }
}
