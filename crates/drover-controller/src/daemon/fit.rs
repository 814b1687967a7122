//! Whether a daemon pod fits a node: its resource requests within the
//! node's allocatable minus what the node's other pods request, and its
//! host ports free. These are the scheduler's `NodeResourcesFit` and
//! `NodePorts` checks, which Kubernetes applies to daemon pods too.
//!
//! A node where the pod does not fit still *should run* it (it counts in
//! `desiredNumberScheduled`, so the DaemonSet shows that it is short). Its
//! pod is created unbound and waits, as the scheduler leaves a daemon pod
//! it cannot place: pinned to the node by node affinity, `Pending`,
//! `PodScheduled=False` (`Unschedulable`, the reasons in the scheduler's
//! words: `Insufficient cpu`, `node(s) didn't have free ports for the
//! requested pod ports`), and nominated to the node when lower-priority
//! pods are preempted for it (the room counts as its). The planner binds
//! it once it fits. `describe ds` lists the node under "Nodes without a
//! pod" with the reason. A pod already running stays: a fit is checked
//! before a pod is bound, never against a running one.
//!
//! What counts: every pod bound (or nominated) to the node that has not
//! terminated (phase `Succeeded` or `Failed`), pods being deleted included
//! (their containers may still hold the resources), except the DaemonSet's
//! own pods. A container's request is its `requests`, or its `limits` where it
//! has no request (Kubernetes' defaulting). The node's allocatable is
//! `status.allocatable`, else `status.capacity`; a resource the node does
//! not report is not checked. Host ports: a container port with a
//! `hostPort` (with `hostNetwork`, every container port) conflicts with
//! the same port and protocol on an overlapping `hostIP` (empty or
//! `0.0.0.0` overlaps every address).

use std::collections::HashMap;
use std::fmt;

use drover_api::{Node, Pod, PodPhase, PodSpec, Priorities, Protocol, Quantity};

/// Why a daemon pod does not fit a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfit {
    /// Not enough of a resource is left (amounts in millis for `cpu`, in
    /// units otherwise: bytes, pods).
    Insufficient {
        /// `cpu`, `memory`, `pods`, or another resource name.
        resource: String,
        /// What the daemon pod requests.
        requested: i128,
        /// What the node's other pods request.
        used: i128,
        /// The node's allocatable amount.
        allocatable: i128,
    },
    /// The pod names a PriorityClass that does not exist.
    NoPriorityClass(String),
    /// A host port the daemon pod needs is taken.
    HostPort {
        /// The port.
        port: i32,
        /// Its protocol (`TCP`, `UDP`, `SCTP`).
        protocol: String,
        /// The pod that holds it, `namespace/name`.
        holder: String,
    },
}

fn amount(resource: &str, value: i128) -> String {
    if resource == "cpu" {
        format!("{value}m")
    } else {
        value.to_string()
    }
}

impl fmt::Display for Misfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misfit::Insufficient {
                resource,
                requested,
                used,
                allocatable,
            } => {
                let what = if resource == "pods" {
                    "Too many pods".to_string()
                } else {
                    format!("Insufficient {resource}")
                };
                write!(
                    f,
                    "{what} (the pod requests {}; the node's other pods request {} of {} allocatable)",
                    amount(resource, *requested),
                    amount(resource, *used),
                    amount(resource, *allocatable)
                )
            }
            Misfit::NoPriorityClass(name) => write!(
                f,
                "no PriorityClass with name {name} was found (create it, or name system-node-critical, system-cluster-critical or none)"
            ),
            Misfit::HostPort {
                port,
                protocol,
                holder,
            } => write!(
                f,
                "node(s) didn't have free ports for the requested pod ports ({port}/{protocol} is taken by pod {holder})"
            ),
        }
    }
}

/// A port a pod holds on its node: port, protocol, host IP.
pub(crate) type HostPort = (i32, String, String);

pub(crate) fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let mut out = Vec::new();
    for c in &spec.containers {
        for p in &c.ports {
            let port = match p.host_port {
                Some(h) if h > 0 => h,
                _ if spec.host_network && p.container_port > 0 => p.container_port,
                _ => continue,
            };
            let protocol = p
                .protocol
                .as_ref()
                .map_or_else(|| "TCP".to_string(), |p: &Protocol| p.as_str().to_string());
            out.push((port, protocol, p.host_ip.clone()));
        }
    }
    out
}

pub(crate) fn overlaps(a: &str, b: &str) -> bool {
    let any = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
    any(a) || any(b) || a == b
}

/// A quantity of `resource` as this module counts it: millicores for
/// `cpu`, whole units otherwise; `None` when it does not parse.
pub(crate) fn value_of(resource: &str, q: &Quantity) -> Option<i128> {
    if resource == "cpu" {
        q.to_millis().ok()
    } else {
        q.to_units().ok()
    }
}

/// What a pod requests, by resource (millis for cpu, units otherwise).
/// Quantities that do not parse count as nothing (validation refuses them
/// before they are stored).
pub fn requests(spec: &PodSpec) -> HashMap<String, i128> {
    let mut out: HashMap<String, i128> = HashMap::new();
    for c in &spec.containers {
        let r = &c.resources;
        let mut names: Vec<&String> = r.requests.keys().chain(r.limits.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let q: Option<&Quantity> = r.requests.get(name).or_else(|| r.limits.get(name));
            if let Some(v) = q.and_then(|q| value_of(name, q)) {
                *out.entry(name.clone()).or_default() += v;
            }
        }
    }
    out
}

/// The node a pod counts on: where it is bound, or, unbound, where it is
/// nominated (lower-priority pods were preempted for it); "" for none.
pub fn counted_on(pod: &Pod) -> &str {
    if pod.spec.node_name.is_empty() {
        &pod.status.nominated_node_name
    } else {
        &pod.spec.node_name
    }
}

/// What one pod holds on its node.
#[derive(Debug, Clone)]
struct Held {
    /// Its controller's uid ("" for none).
    owner: String,
    namespace: String,
    name: String,
    uid: String,
    /// Its priority (from its `priorityClassName`).
    priority: i32,
    /// A mirror of a static pod is never preempted (its agent runs it).
    mirror: bool,
    requests: HashMap<String, i128>,
    ports: Vec<HostPort>,
}

/// A pod to preempt so that a daemon pod of higher priority fits its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (the precondition of the delete).
    pub uid: String,
    /// Its priority.
    pub priority: i32,
}

/// What the live pods bound to each node request and hold, for fit
/// checks. Build it once per pass from every pod of the cluster (all
/// namespaces), and [`NodeUsage::add`] the pods a pass creates, so that
/// two DaemonSets planned in one pass do not both take the last of a node.
#[derive(Debug, Default, Clone)]
pub struct NodeUsage {
    by_node: HashMap<String, Vec<Held>>,
    priorities: Priorities,
}

impl NodeUsage {
    /// The usage of every node by `pods`, with the built-in priority
    /// classes only.
    pub fn new<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        Self::with_priorities(pods, Priorities::new([]))
    }

    /// The usage of every node by `pods`, their priorities from `priorities`.
    pub fn with_priorities<'a>(
        pods: impl IntoIterator<Item = &'a Pod>,
        priorities: Priorities,
    ) -> Self {
        let mut usage = NodeUsage {
            by_node: HashMap::new(),
            priorities,
        };
        for p in pods {
            usage.add(p);
        }
        usage
    }

    /// The usage of the nodes `keep` keeps only (by the name a pod counts
    /// on: its `spec.nodeName`, or where it is nominated): the same answers
    /// as [`NodeUsage::with_priorities`] about those nodes, without the
    /// cost of the others (see [`super::Claim::is_settled`]).
    pub fn with_priorities_on<'a>(
        pods: impl IntoIterator<Item = &'a Pod>,
        priorities: Priorities,
        keep: impl Fn(&str) -> bool,
    ) -> Self {
        Self::with_priorities(pods.into_iter().filter(|p| keep(counted_on(p))), priorities)
    }

    /// The priority of a pod with `spec`, and whether it may preempt
    /// (`None`: it names a class that does not exist).
    pub fn priority_of(&self, spec: &PodSpec) -> Option<(i32, bool)> {
        self.priorities.of(&spec.priority_class_name)
    }

    /// Forgets a pod (preempted or deleted in this pass).
    pub fn remove(&mut self, node: &str, uid: &str) {
        if let Some(list) = self.by_node.get_mut(node) {
            list.retain(|h| h.uid != uid);
        }
    }

    /// Counts `pod` on its node (unless it has terminated). An unbound pod
    /// counts only where it is nominated (lower-priority pods were
    /// preempted for it: the room is its); a pod counts once.
    pub fn add(&mut self, pod: &Pod) {
        let done = matches!(
            pod.status.phase,
            Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
        );
        let node = counted_on(pod);
        if node.is_empty() || done {
            return;
        }
        let uid = pod.metadata.uid.as_str();
        if !uid.is_empty()
            && self
                .by_node
                .get(node)
                .is_some_and(|l| l.iter().any(|h| h.uid == uid))
        {
            return;
        }
        let held = Held {
            owner: pod
                .metadata
                .controller_ref()
                .map(|o| o.uid.clone())
                .unwrap_or_default(),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            // A class that no longer exists: as if it named none.
            priority: self
                .priorities
                .of(&pod.spec.priority_class_name)
                .map_or(0, |(p, _)| p),
            mirror: pod.is_mirror(),
            requests: requests(&pod.spec),
            ports: host_ports(&pod.spec),
        };
        self.by_node.entry(node.to_owned()).or_default().push(held);
    }

    /// Why a pod with `spec`, of the controller `owner_uid`, does not fit
    /// `node` (empty: it fits). The owner's own pods do not count.
    pub fn misfits(&self, node: &Node, spec: &PodSpec, owner_uid: &str) -> Vec<Misfit> {
        self.misfits_without(node, spec, owner_uid, &[])
    }

    /// The pods of lower priority whose removal makes a pod with `spec`
    /// fit `node`, as the scheduler's preemption picks them: every pod of
    /// strictly lower priority is a candidate; if the pod fits without all
    /// of them, candidates are spared again from the highest priority down
    /// as long as it still fits. `None` when it cannot fit that way, or
    /// its class says `preemptionPolicy: Never`. Pods of higher or equal
    /// priority are never taken.
    pub fn preemption(&self, node: &Node, spec: &PodSpec, owner_uid: &str) -> Option<Vec<Victim>> {
        let (mine, may_preempt) = self.priority_of(spec)?;
        if !may_preempt {
            return None;
        }
        let mut candidates: Vec<&Held> = self
            .others(node, owner_uid)
            .into_iter()
            .filter(|h| h.priority < mine && !h.mirror)
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let mut gone: Vec<&str> = candidates.iter().map(|h| h.uid.as_str()).collect();
        if !self
            .misfits_without(node, spec, owner_uid, &gone)
            .is_empty()
        {
            return None;
        }
        // Spare the most important first (the newest of equals last).
        candidates.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
        for c in &candidates {
            let trial: Vec<&str> = gone.iter().copied().filter(|u| *u != c.uid).collect();
            if self
                .misfits_without(node, spec, owner_uid, &trial)
                .is_empty()
            {
                gone = trial;
            }
        }
        let mut victims: Vec<Victim> = candidates
            .iter()
            .filter(|h| gone.contains(&h.uid.as_str()))
            .map(|h| Victim {
                namespace: h.namespace.clone(),
                name: h.name.clone(),
                uid: h.uid.clone(),
                priority: h.priority,
            })
            .collect();
        victims.sort_by(|a, b| a.name.cmp(&b.name));
        Some(victims)
    }

    fn others(&self, node: &Node, owner_uid: &str) -> Vec<&Held> {
        self.by_node
            .get(node.metadata.name.as_str())
            .into_iter()
            .flatten()
            .filter(|h| h.owner.is_empty() || h.owner != owner_uid)
            .collect()
    }

    fn misfits_without(
        &self,
        node: &Node,
        spec: &PodSpec,
        owner_uid: &str,
        gone: &[&str],
    ) -> Vec<Misfit> {
        let others: Vec<&Held> = self
            .others(node, owner_uid)
            .into_iter()
            .filter(|h| !gone.contains(&h.uid.as_str()))
            .collect();
        let mut out = Vec::new();
        let wanted = requests(spec);
        let allocatable = if node.status.allocatable.is_empty() {
            &node.status.capacity
        } else {
            &node.status.allocatable
        };
        let mut used: HashMap<&str, i128> = HashMap::new();
        for h in &others {
            for (k, v) in &h.requests {
                *used.entry(k.as_str()).or_default() += v;
            }
        }
        let mut names: Vec<&String> = wanted.keys().collect();
        names.sort();
        for name in names {
            let requested = wanted[name];
            if requested <= 0 {
                continue;
            }
            let Some(total) = allocatable
                .get(name.as_str())
                .and_then(|q| value_of(name, q))
            else {
                continue;
            };
            let in_use = used.get(name.as_str()).copied().unwrap_or(0);
            if in_use + requested > total {
                out.push(Misfit::Insufficient {
                    resource: name.clone(),
                    requested,
                    used: in_use,
                    allocatable: total,
                });
            }
        }
        if let Some(max) = allocatable.get("pods").and_then(|q| q.to_units().ok()) {
            let count = others.len() as i128;
            if count + 1 > max {
                out.push(Misfit::Insufficient {
                    resource: "pods".into(),
                    requested: 1,
                    used: count,
                    allocatable: max,
                });
            }
        }
        for (port, protocol, ip) in host_ports(spec) {
            let holder = others.iter().find(|h| {
                h.ports
                    .iter()
                    .any(|(q, pr, qip)| *q == port && *pr == protocol && overlaps(&ip, qip))
            });
            if let Some(h) = holder {
                out.push(Misfit::HostPort {
                    port,
                    protocol: protocol.clone(),
                    holder: format!("{}/{}", h.namespace, h.name),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::fixtures::{at, ds, node, pod};
    use crate::daemon::{explain, plan, NoPod, PlanInput};
    use drover_api::{ContainerPort, OwnerReference, ResourceRequirements};
    use rand::SeedableRng;

    fn with_capacity(mut n: Node, cpu: &str, memory: &str) -> Node {
        n.status.capacity.insert("cpu".into(), Quantity(cpu.into()));
        n.status
            .capacity
            .insert("memory".into(), Quantity(memory.into()));
        n.status
            .capacity
            .insert("pods".into(), Quantity("110".into()));
        n
    }

    fn requesting(mut d: drover_api::DaemonSet, cpu: &str, memory: &str) -> drover_api::DaemonSet {
        let r = &mut d.spec.template.spec.containers[0].resources;
        *r = ResourceRequirements::default();
        r.requests.insert("cpu".into(), Quantity(cpu.into()));
        r.limits.insert("memory".into(), Quantity(memory.into()));
        d
    }

    fn with_host_port(mut d: drover_api::DaemonSet, port: i32) -> drover_api::DaemonSet {
        d.spec.template.spec.containers[0].ports = vec![ContainerPort {
            container_port: port,
            host_port: Some(port),
            ..Default::default()
        }];
        d
    }

    /// A running pod of another owner on `node`, with the spec of `like`.
    fn other_pod(name: &str, node_name: &str, like: &drover_api::DaemonSet) -> Pod {
        let mut p = pod(name, node_name, "h", true, 0);
        p.metadata.namespace = "monitoring".into();
        p.metadata.owner_references = vec![OwnerReference {
            uid: "other-ds".into(),
            controller: Some(true),
            ..Default::default()
        }];
        p.spec = like.spec.template.spec.clone();
        p.spec.node_name = node_name.into();
        p
    }

    #[test]
    fn a_node_full_of_pods_takes_no_more() {
        // Kubernetes' NodeResourcesFit: the pod count counts the new pod
        // too, so a node with `pods: 2` and two pods of others is full.
        let d = ds("x");
        let mut n = with_capacity(node("n1", true), "4", "8Gi");
        n.status
            .capacity
            .insert("pods".into(), Quantity("2".into()));
        let one = [other_pod("o1", "n1", &d)];
        let usage = NodeUsage::new(one.iter());
        assert_eq!(usage.misfits(&n, &d.spec.template.spec, "mine"), []);
        let two = [other_pod("o1", "n1", &d), other_pod("o2", "n1", &d)];
        let usage = NodeUsage::new(two.iter());
        let misfits = usage.misfits(&n, &d.spec.template.spec, "mine");
        assert_eq!(
            misfits,
            [Misfit::Insufficient {
                resource: "pods".into(),
                requested: 1,
                used: 2,
                allocatable: 2,
            }]
        );
        assert_eq!(
            misfits[0].to_string(),
            "Too many pods (the pod requests 1; the node's other pods request 2 of 2 allocatable)"
        );
    }

    #[test]
    fn requests_count_limits_where_no_request_is_given() {
        let d = requesting(ds("x"), "250m", "1Gi");
        let r = requests(&d.spec.template.spec);
        assert_eq!(r["cpu"], 250);
        assert_eq!(r["memory"], 1 << 30);
    }

    /// The pod the plan created, as the store gives it back (uid, time).
    fn stored(mut p: Pod, uid: &str) -> Pod {
        p.metadata.uid = uid.into();
        p.metadata.creation_timestamp = Some(at(10).to_rfc3339());
        p.metadata.resource_version = "7".into();
        p
    }

    fn scheduled_condition(p: &Pod) -> (Option<drover_api::ConditionStatus>, String, String) {
        let c = p
            .status
            .conditions
            .iter()
            .find(|c| c.r#type == "PodScheduled")
            .expect("a PodScheduled condition");
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    #[test]
    fn a_pod_that_asks_for_more_than_the_node_has_waits_unbound_until_it_fits() {
        use drover_api::ConditionStatus;
        let big = requesting(ds("x"), "1000", "1Mi");
        let nodes = [with_capacity(node("n1", true), "4", "8Gi")];
        let usage = NodeUsage::new(std::iter::empty());
        let input = PlanInput::new(&big, &nodes, [], at(10)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert_eq!(p.status.desired_number_scheduled, 1);
        assert_eq!(p.status.current_number_scheduled, 0);
        // As the scheduler leaves a daemon pod that does not fit: created,
        // Pending, unbound, pinned to its node, with the reason.
        assert_eq!(p.create.len(), 1, "{:?}", p.create);
        let waiting = &p.create[0].pod;
        assert_eq!(waiting.spec.node_name, "");
        assert_eq!(
            drover_api::node_affinity::pinned_node(&waiting.spec),
            Some("n1")
        );
        assert_eq!(waiting.status.phase, Some(PodPhase::Pending));
        assert_eq!(
            waiting.status.nominated_node_name, "",
            "nothing was preempted"
        );
        let message = "0/1 nodes are available: 1 Insufficient cpu (the pod requests 1000000m; the node's other pods request 0m of 4000m allocatable).";
        assert_eq!(
            scheduled_condition(waiting),
            (
                Some(ConditionStatus::False),
                "Unschedulable".into(),
                message.into()
            )
        );
        let e = explain(&big, &nodes, [], None, at(10));
        assert_eq!(e.nodes_without_pod.len(), 1);
        assert!(matches!(e.nodes_without_pod[0].why, NoPod::DoesNotFit(_)));
        assert_eq!(
            e.nodes_without_pod[0].why.lines(),
            ["Insufficient cpu (the pod requests 1000000m; the node's other pods request 0m of 4000m allocatable)"]
        );

        // The next pass: the waiting pod counts as scheduled on its node,
        // nothing more is created, nothing rewritten (same reason), and
        // describe still says why the node has no running pod.
        let waiting = stored(waiting.clone(), "w1");
        let input = PlanInput::new(&big, &nodes, [&waiting], at(11)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
        assert!(p.bind.is_empty() && p.unschedulable.is_empty(), "{p:?}");
        assert_eq!(p.status.current_number_scheduled, 1);
        assert_eq!(p.status.number_ready, 0);
        let e = explain(&big, &nodes, [&waiting], None, at(11));
        assert!(matches!(e.nodes_without_pod[0].why, NoPod::DoesNotFit(_)));

        // The node grows: the waiting pod is bound there, not replaced.
        let roomy = [with_capacity(node("n1", true), "2000", "8Gi")];
        let input = PlanInput::new(&big, &roomy, [&waiting], at(12)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
        assert_eq!(p.bind.len(), 1);
        let bound = &p.bind[0];
        assert_eq!(
            (bound.metadata.uid.as_str(), bound.spec.node_name.as_str()),
            ("w1", "n1")
        );
        assert_eq!(scheduled_condition(bound).0, Some(ConditionStatus::True));

        // Another reason (a smaller node): the waiting pod's condition says so.
        let small = [with_capacity(node("n1", true), "2", "8Gi")];
        let input = PlanInput::new(&big, &small, [&waiting], at(13)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert_eq!(p.unschedulable.len(), 1, "{p:?}");
        assert!(scheduled_condition(&p.unschedulable[0])
            .2
            .contains("of 2000m allocatable"));
        // The node leaves: the waiting pod goes with it.
        let input = PlanInput::new(&big, [], [&waiting], at(14)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert_eq!(p.delete.len(), 1);
        assert_eq!(p.delete[0].reason, crate::daemon::DeletionReason::NodeGone);
    }

    #[test]
    fn what_other_pods_request_counts_and_the_daemon_sets_own_pods_do_not() {
        let d = requesting(ds("x"), "3", "1Mi");
        let nodes = [with_capacity(node("n1", true), "4", "8Gi")];
        let hog = requesting(ds("y"), "1500m", "1Mi");
        let others = [other_pod("hog", "n1", &hog)];
        let usage = NodeUsage::new(others.iter());
        let misfits = usage.misfits(&nodes[0], &d.spec.template.spec, "ds-uid");
        assert_eq!(
            misfits,
            [Misfit::Insufficient {
                resource: "cpu".into(),
                requested: 3000,
                used: 1500,
                allocatable: 4000
            }]
        );
        // The same pods, but owned by the DaemonSet itself: they do not
        // count (its pod on the node is the one being replaced).
        assert!(usage
            .misfits(&nodes[0], &d.spec.template.spec, "other-ds")
            .is_empty());
        // A finished pod holds nothing.
        let mut done = others[0].clone();
        done.status.phase = Some(PodPhase::Succeeded);
        assert!(NodeUsage::new([&done])
            .misfits(&nodes[0], &d.spec.template.spec, "ds-uid")
            .is_empty());
    }

    #[test]
    fn a_host_port_taken_by_another_pod_keeps_the_daemon_pod_off_the_node() {
        let exporter = with_host_port(ds("x"), 9100);
        let nodes = [node("n1", true), node("n2", true)];
        let holder = other_pod("node-exporter-1", "n1", &with_host_port(ds("y"), 9100));
        let usage = NodeUsage::new([&holder]);
        let input = PlanInput::new(&exporter, &nodes, [], at(10)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        let placed: Vec<(&str, Option<&str>)> = p
            .create
            .iter()
            .map(|c| {
                (
                    c.pod.spec.node_name.as_str(),
                    drover_api::node_affinity::pinned_node(&c.pod.spec),
                )
            })
            .collect();
        // Bound on n2; waiting unbound, pinned to n1, where the port is taken.
        assert_eq!(placed, [("", Some("n1")), ("n2", None)]);
        assert_eq!(
            usage.misfits(&nodes[0], &exporter.spec.template.spec, "ds-uid")[0].to_string(),
            "node(s) didn't have free ports for the requested pod ports (9100/TCP is taken by pod monitoring/node-exporter-1)"
        );
        // Another protocol, or another address, does not conflict.
        let mut udp = with_host_port(ds("x"), 9100);
        udp.spec.template.spec.containers[0].ports[0].protocol = Some(Protocol::Udp);
        assert!(usage
            .misfits(&nodes[0], &udp.spec.template.spec, "ds-uid")
            .is_empty());
        let mut a = holder.clone();
        a.spec.containers[0].ports[0].host_ip = "10.0.0.1".into();
        let mut b = exporter.clone();
        b.spec.template.spec.containers[0].ports[0].host_ip = "10.0.0.2".into();
        assert!(NodeUsage::new([&a])
            .misfits(&nodes[0], &b.spec.template.spec, "ds-uid")
            .is_empty());
        // With hostNetwork every container port is a host port.
        let mut net = ds("x");
        net.spec.template.spec.host_network = true;
        net.spec.template.spec.containers[0].ports = vec![ContainerPort {
            container_port: 9100,
            ..Default::default()
        }];
        assert_eq!(
            usage
                .misfits(&nodes[0], &net.spec.template.spec, "ds-uid")
                .len(),
            1
        );
        // Without it, a container port alone holds nothing on the node.
        let mut plain = net.clone();
        plain.spec.template.spec.host_network = false;
        assert!(usage
            .misfits(&nodes[0], &plain.spec.template.spec, "ds-uid")
            .is_empty());
        // The same address conflicts, and so does any address against the
        // wildcard (0.0.0.0, ::, or none).
        let mut same = exporter.clone();
        same.spec.template.spec.containers[0].ports[0].host_ip = "10.0.0.1".into();
        assert_eq!(
            NodeUsage::new([&a])
                .misfits(&nodes[0], &same.spec.template.spec, "ds-uid")
                .len(),
            1
        );
        for wildcard in ["", "0.0.0.0", "::"] {
            let mut w = exporter.clone();
            w.spec.template.spec.containers[0].ports[0].host_ip = wildcard.into();
            assert_eq!(
                NodeUsage::new([&a])
                    .misfits(&nodes[0], &w.spec.template.spec, "ds-uid")
                    .len(),
                1,
                "{wildcard:?} against 10.0.0.1"
            );
        }
    }

    #[test]
    fn a_pod_added_twice_counts_once() {
        let d = requesting(ds("x"), "1", "1Gi");
        let n = with_capacity(node("n1", true), "2", "8Gi");
        let mut other = other_pod("o1", "n1", &d);
        other.metadata.uid = "o1-uid".into();
        let mut usage = NodeUsage::new([&other]);
        usage.add(&other);
        // 1 of 2 CPUs taken: a pod asking for one fits.
        assert_eq!(usage.misfits(&n, &d.spec.template.spec, "mine"), []);
        let mut second = other.clone();
        second.metadata.uid = "o2-uid".into();
        usage.add(&second);
        assert_eq!(usage.misfits(&n, &d.spec.template.spec, "mine").len(), 1);
    }

    fn with_class(mut d: drover_api::DaemonSet, class: &str) -> drover_api::DaemonSet {
        d.spec.template.spec.priority_class_name = class.into();
        d
    }

    #[test]
    fn a_higher_priority_daemon_pod_preempts_only_lower_ones_and_only_what_it_needs() {
        let nodes = [with_capacity(node("n1", true), "4", "8Gi")];
        let classes = [drover_api::PriorityClass {
            metadata: drover_api::ObjectMeta {
                name: "low".into(),
                ..Default::default()
            },
            value: 10,
            ..Default::default()
        }];
        let prio = || Priorities::new(&classes);
        // Two low pods of 1.5 CPU each and one of priority 0 with 1 CPU:
        // a critical pod of 2 CPUs needs one low pod gone, not both.
        let low_a = other_pod(
            "low-a",
            "n1",
            &with_class(requesting(ds("y"), "1500m", "1Mi"), "low"),
        );
        let mut low_b = low_a.clone();
        low_b.metadata.name = "low-b".into();
        low_b.metadata.uid = "uid-low-b".into();
        let zero = other_pod("zero", "n1", &requesting(ds("z"), "1", "1Mi"));
        let usage = NodeUsage::with_priorities([&low_a, &low_b, &zero], prio());
        let critical = with_class(requesting(ds("x"), "2", "1Mi"), "system-node-critical");
        let spec = &critical.spec.template.spec;
        assert!(!usage.misfits(&nodes[0], spec, "ds-uid").is_empty());
        let victims = usage.preemption(&nodes[0], spec, "ds-uid").unwrap();
        let names: Vec<&str> = victims.iter().map(|v| v.name.as_str()).collect();
        // The lowest priority goes first (zero, 1 CPU) and one low pod is
        // still needed; the other is spared.
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&"zero"), "{names:?}");
        // Equal priority is never preempted; nor with preemptionPolicy Never.
        let peer = with_class(requesting(ds("x"), "2", "1Mi"), "low");
        let only_low = NodeUsage::with_priorities([&low_a, &low_b], prio());
        assert_eq!(
            only_low.preemption(&nodes[0], &peer.spec.template.spec, "ds-uid"),
            None
        );
        let mut never = classes[0].clone();
        never.metadata.name = "polite".into();
        never.value = 100;
        never.preemption_policy = Some("Never".into());
        let polite = with_class(requesting(ds("x"), "2", "1Mi"), "polite");
        let u =
            NodeUsage::with_priorities([&low_a, &low_b], Priorities::new([&classes[0], &never]));
        assert_eq!(
            u.preemption(&nodes[0], &polite.spec.template.spec, "ds-uid"),
            None
        );
        // A class that does not exist is reported, never guessed.
        let unknown = with_class(ds("x"), "nope");
        assert_eq!(usage.priority_of(&unknown.spec.template.spec), None);
    }

    #[test]
    fn a_plan_preempts_the_port_holder_then_places_once_it_is_gone() {
        let nodes = [node("n1", true)];
        let holder = other_pod("exporter-1", "n1", &with_host_port(ds("y"), 9100));
        let critical = with_class(with_host_port(ds("x"), 9100), "system-node-critical");
        let usage = NodeUsage::with_priorities([&holder], Priorities::new([]));
        let input = PlanInput::new(&critical, &nodes, [], at(10)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        // The pod waits unbound, nominated to the node (the room is its).
        assert_eq!(p.create.len(), 1);
        let waiting = stored(p.create[0].pod.clone(), "w1");
        assert_eq!(waiting.spec.node_name, "");
        assert_eq!(waiting.status.nominated_node_name, "n1");
        let gone: Vec<(&str, &str)> = p
            .delete
            .iter()
            .map(|d| (d.namespace.as_str(), d.name.as_str()))
            .collect();
        assert_eq!(gone, [("monitoring", "exporter-1")]);
        assert_eq!(p.delete[0].event.reason, "Preempted");
        // A lower-priority DaemonSet planned later in the pass sees the
        // room taken by the nominated pod.
        let after = NodeUsage::with_priorities([&waiting], Priorities::new([]));
        let low = with_host_port(ds("z"), 9100);
        assert!(!after
            .misfits(&nodes[0], &low.spec.template.spec, "z-uid")
            .is_empty());
        // Next pass: the holder is gone, the waiting pod is bound.
        let usage = NodeUsage::with_priorities([&waiting], Priorities::new([]));
        let input = PlanInput::new(&critical, &nodes, [&waiting], at(11)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
        assert_eq!(p.bind.len(), 1);
        assert_eq!(p.bind[0].spec.node_name, "n1");
        assert_eq!(p.bind[0].status.nominated_node_name, "");
    }

    #[test]
    fn a_running_daemon_pod_stays_whatever_the_node_has_left() {
        let d = requesting(ds("x"), "3", "1Mi");
        let nodes = [with_capacity(node("n1", true), "4", "8Gi")];
        let mut mine = pod("agent-1", "n1", "h", true, 0);
        mine.spec = d.spec.template.spec.clone();
        mine.spec.node_name = "n1".into();
        let hog = other_pod("hog", "n1", &requesting(ds("y"), "3", "1Mi"));
        let usage = NodeUsage::new([&mine, &hog]);
        let input = PlanInput::new(&d, &nodes, [&mine], at(10)).with_usage(&usage);
        let p = plan(&input, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert!(p.create.is_empty() && p.delete.is_empty(), "{p:?}");
    }
}
