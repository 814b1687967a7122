//! The Node an agent registers in its hello: name, labels and taints from
//! flags, and what it reports of the machine (addresses, capacity, system
//! info).
//!
//! Like the kubelet, an agent adds the well-known labels
//! `kubernetes.io/hostname`, `kubernetes.io/os` and `kubernetes.io/arch`
//! (a `--label` with the same key wins), so that manifests that select
//! on them (`nodeSelector: {kubernetes.io/os: linux}`) work unchanged.

use drover_api::{Node, NodeAddress, NodeSystemInfo, Quantity, Taint};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// What a node reports of its machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeFacts {
    /// `InternalIP` (and `Hostname`).
    pub addresses: Vec<NodeAddress>,
    /// `cpu`, `memory`, `pods`.
    pub capacity: BTreeMap<String, Quantity>,
    /// The capacity minus what the node keeps for itself ([`allocatable`]);
    /// empty: the capacity.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Versions and identity.
    pub node_info: NodeSystemInfo,
}

/// Kubernetes' (Go's) name of this machine's architecture.
pub fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// The operating system, as Kubernetes names it (`linux`, `darwin`, …).
pub fn os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    }
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn os_image() -> String {
    let text = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| os().to_string())
}

fn memory_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn address(kind: &str, address: &str) -> NodeAddress {
    NodeAddress {
        r#type: kind.into(),
        address: address.into(),
        ..Default::default()
    }
}

fn info(runtime_version: &str) -> NodeSystemInfo {
    NodeSystemInfo {
        kubelet_version: format!("drover-{}", crate::VERSION),
        container_runtime_version: runtime_version.to_string(),
        operating_system: os().into(),
        architecture: arch().into(),
        ..Default::default()
    }
}

/// The facts of the machine this process runs on: its CPUs and memory, its
/// kernel and OS, its machine and boot ids.
pub fn machine_facts(name: &str, host_ip: &str, runtime_version: &str) -> NodeFacts {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), Quantity(cpus.to_string()));
    if let Some(kib) = memory_kib() {
        capacity.insert("memory".to_string(), Quantity(format!("{kib}Ki")));
    }
    capacity.insert("pods".to_string(), Quantity("110".into()));
    let mut node_info = info(runtime_version);
    node_info.kernel_version = read_trimmed("/proc/sys/kernel/osrelease");
    node_info.os_image = os_image();
    node_info.machine_id = read_trimmed("/etc/machine-id");
    node_info.boot_id = read_trimmed("/proc/sys/kernel/random/boot_id");
    NodeFacts {
        addresses: vec![address("InternalIP", host_ip), address("Hostname", name)],
        capacity,
        allocatable: BTreeMap::new(),
        node_info,
    }
}

/// The fixed facts of a simulated node: 4 CPUs, 8 GiB, 110 pods.
pub fn sim_facts(name: &str, host_ip: &str, runtime_version: &str) -> NodeFacts {
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), Quantity("4".into()));
    capacity.insert("memory".to_string(), Quantity("8Gi".into()));
    capacity.insert("pods".to_string(), Quantity("110".into()));
    let mut node_info = info(runtime_version);
    node_info.os_image = "drover sim".into();
    NodeFacts {
        addresses: vec![address("InternalIP", host_ip), address("Hostname", name)],
        capacity,
        allocatable: BTreeMap::new(),
        node_info,
    }
}

/// The IP of simulated node number `index`: 100.64.0.0/10 (shared address
/// space, never routed), .1 upwards.
pub fn sim_host_ip(index: usize) -> String {
    let n = (index as u32 % ((1 << 22) - 2)) + 1;
    let ip = (100u32 << 24) | (64 << 16) | n;
    std::net::Ipv4Addr::from(ip).to_string()
}

/// The well-known labels of a node, with the user's labels over them.
pub fn labels(name: &str, user: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert("kubernetes.io/hostname".to_string(), name.to_string());
    l.insert("kubernetes.io/os".to_string(), os().to_string());
    l.insert("kubernetes.io/arch".to_string(), arch().to_string());
    l.extend(user.iter().map(|(k, v)| (k.clone(), v.clone())));
    l
}

/// `capacity` minus `reserved`, resource by resource (never below zero), as
/// the kubelet computes allocatable from `--system-reserved`: CPU in
/// millicores (`3500m`), the rest in whole units (bytes for memory).
pub fn allocatable(
    capacity: &BTreeMap<String, Quantity>,
    reserved: &BTreeMap<String, Quantity>,
) -> BTreeMap<String, Quantity> {
    capacity
        .iter()
        .map(|(name, total)| {
            let Some(minus) = reserved.get(name) else {
                return (name.clone(), total.clone());
            };
            let left = if name == "cpu" {
                match (total.to_millis(), minus.to_millis()) {
                    (Ok(t), Ok(m)) => Quantity(format!("{}m", (t - m).max(0))),
                    _ => total.clone(),
                }
            } else {
                match (total.to_units(), minus.to_units()) {
                    (Ok(t), Ok(m)) => Quantity((t - m).max(0).to_string()),
                    _ => total.clone(),
                }
            };
            (name.clone(), left)
        })
        .collect()
}

/// The Node of a hello.
pub fn node_object(
    name: &str,
    labels: &BTreeMap<String, String>,
    taints: &[Taint],
    facts: &NodeFacts,
) -> Node {
    let mut n = Node::default();
    n.metadata.name = name.to_string();
    n.metadata.labels = self::labels(name, labels);
    n.spec.taints = taints.to_vec();
    n.status.addresses = facts.addresses.clone();
    n.status.capacity = facts.capacity.clone();
    n.status.allocatable = if facts.allocatable.is_empty() {
        facts.capacity.clone()
    } else {
        facts.allocatable.clone()
    };
    n.status.node_info = facts.node_info.clone();
    n
}

/// The local address this machine uses to reach `server` (`host:port`):
/// no packet is sent, the kernel only picks the route.
pub async fn outbound_ip(server: &str) -> Option<IpAddr> {
    let addr = tokio::net::lookup_host(server).await.ok()?.next()?;
    let bind = if addr.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let sock = tokio::net::UdpSocket::bind(bind).await.ok()?;
    sock.connect(addr).await.ok()?;
    sock.local_addr().ok().map(|a| a.ip())
}

/// The IP the node reports: the local address towards the first server that
/// resolves, else 127.0.0.1.
pub async fn host_ip(servers: &[String]) -> String {
    for s in servers {
        if let Some(ip) = outbound_ip(s).await {
            if !ip.is_unspecified() {
                return ip.to_string();
            }
        }
    }
    "127.0.0.1".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocatable_is_capacity_minus_reserved_never_below_zero() {
        let q = |s: &str| Quantity(s.into());
        let capacity: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), q("4")),
            ("memory".to_string(), q("8Gi")),
            ("pods".to_string(), q("110")),
        ]
        .into();
        let reserved: BTreeMap<String, Quantity> = [
            ("cpu".to_string(), q("500m")),
            ("memory".to_string(), q("1Gi")),
            ("pods".to_string(), q("200")),
        ]
        .into();
        let a = allocatable(&capacity, &reserved);
        assert_eq!(a["cpu"], q("3500m"));
        assert_eq!(a["memory"], q(&(7u64 << 30).to_string()));
        assert_eq!(a["pods"], q("0"));
        assert_eq!(allocatable(&capacity, &BTreeMap::new()), capacity);
        let mut facts = sim_facts("n", "10.0.0.1", "sim://x");
        facts.allocatable = a.clone();
        let n = node_object("n", &BTreeMap::new(), &[], &facts);
        assert_eq!(n.status.allocatable, a);
        assert_eq!(n.status.capacity, capacity);
    }

    #[test]
    fn a_node_for_hello_is_valid_and_carries_flags_and_facts() {
        let mut user = BTreeMap::new();
        user.insert("zone".to_string(), "a".to_string());
        user.insert("kubernetes.io/os".to_string(), "custom".to_string());
        let taints = vec!["dedicated=edge:NoSchedule".parse().unwrap()];
        for facts in [
            sim_facts("edge-1", "100.64.0.1", "sim://x"),
            machine_facts("edge-1", "10.0.0.1", "sim://x"),
        ] {
            let n = node_object("edge-1", &user, &taints, &facts);
            drover_api::validation::validate_node(&n).unwrap();
            assert_eq!(n.metadata.labels["zone"], "a");
            assert_eq!(n.metadata.labels["kubernetes.io/os"], "custom");
            assert_eq!(n.metadata.labels["kubernetes.io/hostname"], "edge-1");
            assert_eq!(n.spec.taints[0].key, "dedicated");
            assert_eq!(n.status.addresses[0].r#type, "InternalIP");
            assert!(n.status.capacity.contains_key("cpu"));
            assert_eq!(
                n.status.node_info.kubelet_version,
                format!("drover-{}", crate::VERSION)
            );
            assert_eq!(n.status.node_info.container_runtime_version, "sim://x");
            let v = serde_json::to_value(&n).unwrap();
            assert_eq!(v["kind"], "Node");
            assert!(v["status"]["nodeInfo"]["architecture"].is_string());
        }
    }

    #[test]
    fn sim_ips_are_distinct() {
        assert_eq!(sim_host_ip(0), "100.64.0.1");
        assert_eq!(sim_host_ip(255), "100.64.1.0");
        assert_eq!(sim_host_ip(9_999), "100.64.39.16");
    }

    #[tokio::test]
    async fn the_outbound_ip_of_loopback_is_loopback() {
        assert_eq!(host_ip(&["127.0.0.1:9".to_string()]).await, "127.0.0.1");
    }
}
