//! `describe node NAME`, with the pods bound to it and what they request.

use super::layout::{annotations_multiline, events, events_for, labels_multiline, W};
use crate::printers::node_roles;
use crate::timefmt::{age, describe_time};
use drover_api::{Event, Node, Pod, PodPhase, Quantity, Taint};
use std::collections::BTreeMap;
use std::time::SystemTime;

fn taints_multiline(w: &mut W, title: &str, taints: &[Taint]) {
    w.w(0, format!("{title}:\t"));
    if taints.is_empty() {
        w.w(0, "<none>\n");
        return;
    }
    let mut sorted: Vec<&Taint> = taints.iter().collect();
    let key = |t: &Taint| {
        format!(
            "{},{}",
            t.effect.as_ref().map(|e| e.as_str()).unwrap_or(""),
            t.key
        )
    };
    sorted.sort_by_key(|t| key(t));
    for (i, t) in sorted.iter().enumerate() {
        if i != 0 {
            w.w(0, "\t");
        }
        w.w(0, format!("{t}\n"));
    }
}

/// Sums quantities of one resource: `cpu` in millicores (`250m`, `2`),
/// anything else in units (bytes for memory), written with the largest
/// binary suffix that divides it when any term used one.
fn sum_quantity(resource: &str, qs: &[&Quantity]) -> (String, i128) {
    let cpu = resource == "cpu";
    let value: i128 = qs
        .iter()
        .map(|q| if cpu { q.to_millis() } else { q.to_units() }.unwrap_or(0))
        .sum();
    if let [one] = qs {
        return (one.to_string(), value);
    }
    if value == 0 {
        return ("0".into(), 0);
    }
    if cpu {
        return if value % 1000 == 0 {
            (format!("{}", value / 1000), value)
        } else {
            (format!("{value}m"), value)
        };
    }
    let binary = qs.iter().any(|q| q.0.ends_with('i'));
    let (base, suffixes): (i128, [&str; 5]) = if binary {
        (1024, ["Ki", "Mi", "Gi", "Ti", "Pi"])
    } else {
        (1000, ["k", "M", "G", "T", "P"])
    };
    let mut text = value.to_string();
    let mut unit = base;
    for s in suffixes {
        if value % unit != 0 {
            break;
        }
        text = format!("{}{s}", value / unit);
        unit *= base;
    }
    (text, value)
}

fn pod_resources(p: &Pod, resource: &str, limits: bool) -> (String, i128) {
    let qs: Vec<&Quantity> = p
        .spec
        .containers
        .iter()
        .filter_map(|c| {
            if limits {
                c.resources.limits.get(resource)
            } else {
                c.resources.requests.get(resource)
            }
        })
        .collect();
    sum_quantity(resource, &qs)
}

fn percent(value: i128, of: i128) -> i128 {
    if of <= 0 {
        0
    } else {
        value * 100 / of
    }
}

/// `describe node NAME`, with the pods bound to it.
pub fn describe_node(n: &Node, pods: &[Pod], all_events: &[Event], now: SystemTime) -> String {
    let mut w = W::default();
    let m = &n.metadata;
    w.w(0, format!("Name:\t{}\n", m.name));
    w.w(0, format!("Roles:\t{}\n", node_roles(n)));
    labels_multiline(&mut w, "Labels", &m.labels);
    annotations_multiline(&mut w, "Annotations", &m.annotations);
    w.w(
        0,
        format!(
            "CreationTimestamp:\t{}\n",
            describe_time(m.creation_timestamp.as_deref())
        ),
    );
    taints_multiline(&mut w, "Taints", &n.spec.taints);
    w.w(0, format!("Unschedulable:\t{}\n", n.spec.unschedulable));
    if !n.status.conditions.is_empty() {
        w.w(
            0,
            "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n",
        );
        w.w(
            1,
            "----\t------\t-----------------\t------------------\t------\t-------\n",
        );
        for c in &n.status.conditions {
            w.w(
                1,
                format!(
                    "{} \t{} \t{} \t{} \t{} \t{}\n",
                    c.r#type,
                    c.status.as_ref().map(|x| x.as_str()).unwrap_or(""),
                    describe_time(c.last_heartbeat_time.as_deref()),
                    describe_time(c.last_transition_time.as_deref()),
                    c.reason,
                    c.message
                ),
            );
        }
    }
    w.w(0, "Addresses:\n");
    for a in &n.status.addresses {
        w.w(1, format!("{}:\t{}\n", a.r#type, a.address));
    }
    for (title, list) in [
        ("Capacity", &n.status.capacity),
        ("Allocatable", &n.status.allocatable),
    ] {
        if !list.is_empty() {
            w.w(0, format!("{title}:\n"));
            for (k, v) in list {
                w.w(0, format!("  {k}:\t{v}\n"));
            }
        }
    }
    let info = &n.status.node_info;
    w.w(0, "System Info:\n");
    for (k, v) in [
        ("Machine ID", &info.machine_id),
        ("System UUID", &info.system_uuid),
        ("Boot ID", &info.boot_id),
        ("Kernel Version", &info.kernel_version),
        ("OS Image", &info.os_image),
        ("Operating System", &info.operating_system),
        ("Architecture", &info.architecture),
        ("Container Runtime Version", &info.container_runtime_version),
        ("Kubelet Version", &info.kubelet_version),
    ] {
        w.w(0, format!("  {k}:\t{v}\n"));
    }
    let mut on: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            p.spec.node_name == m.name
                && !matches!(
                    p.status.phase,
                    Some(PodPhase::Succeeded) | Some(PodPhase::Failed)
                )
        })
        .collect();
    on.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let alloc = if n.status.allocatable.is_empty() {
        &n.status.capacity
    } else {
        &n.status.allocatable
    };
    let total = |r: &str| {
        alloc
            .get(r)
            .and_then(|q| {
                if r == "cpu" {
                    q.to_millis()
                } else {
                    q.to_units()
                }
                .ok()
            })
            .unwrap_or(0)
    };
    w.w(
        0,
        format!("Non-terminated Pods:\t({} in total)\n", on.len()),
    );
    w.w(
        1,
        "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n",
    );
    w.w(
        1,
        "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n",
    );
    let mut sums: BTreeMap<(&str, bool), Vec<&Quantity>> = BTreeMap::new();
    for p in &on {
        let cell = |r: &str, limits: bool| {
            let (text, v) = pod_resources(p, r, limits);
            format!("{text} ({}%)", percent(v, total(r)))
        };
        w.w(
            1,
            format!(
                "{}\t{}\t\t{}\t{}\t{}\t{}\t{}\n",
                p.metadata.namespace,
                p.metadata.name,
                cell("cpu", false),
                cell("cpu", true),
                cell("memory", false),
                cell("memory", true),
                age(p.metadata.creation_timestamp.as_deref(), now)
            ),
        );
        for c in &p.spec.containers {
            for (limits, list) in [(false, &c.resources.requests), (true, &c.resources.limits)] {
                for (r, q) in list {
                    sums.entry((r.as_str(), limits)).or_default().push(q);
                }
            }
        }
    }
    w.w(
        0,
        "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n",
    );
    w.w(1, "Resource\tRequests\tLimits\n");
    w.w(1, "--------\t--------\t------\n");
    for r in ["cpu", "memory", "ephemeral-storage"] {
        let cell = |limits: bool| {
            let qs = sums.get(&(r, limits)).cloned().unwrap_or_default();
            let (text, v) = sum_quantity(r, &qs);
            format!("{text} ({}%)", percent(v, total(r)))
        };
        w.w(1, format!("{r}\t{}\t{}\n", cell(false), cell(true)));
    }
    let evs = events_for(all_events, "Node", "", &m.name, "");
    events(&mut w, &evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::describe::fixtures::*;

    #[test]
    fn node_layout() {
        let nd = node(
            r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: "2024-05-03T12:00:00Z"
  labels: {kubernetes.io/hostname: n1, node-role.kubernetes.io/worker: ""}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}, {key: a, effect: NoExecute}]
status:
  conditions: [{type: Ready, status: "True", lastHeartbeatTime: "2024-05-03T15:59:59Z", lastTransitionTime: "2024-05-03T12:00:00Z", reason: AgentReady, message: agent is posting ready status}]
  addresses: [{type: InternalIP, address: 10.0.0.1}, {type: Hostname, address: n1}]
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
  nodeInfo: {kernelVersion: 6.1.0, osImage: Debian GNU/Linux 12 (bookworm), containerRuntimeVersion: "sim://1", kubeletVersion: drover-0.1.0, operatingSystem: linux, architecture: amd64}
"#,
        );
        let mut p1 = daemon_pod("master-agent-1", "n1", "Running");
        p1.metadata.creation_timestamp = Some("2024-05-03T15:00:00Z".into());
        let p2 = daemon_pod("master-agent-2", "n1", "Running");
        let done = daemon_pod("old", "n1", "Succeeded");
        let elsewhere = daemon_pod("x", "n2", "Running");
        let text = describe_node(&nd, &[p1, p2, done, elsewhere], &[], now());
        let want = "\
Name:               n1
Roles:              worker
Labels:             kubernetes.io/hostname=n1
                    node-role.kubernetes.io/worker=
Annotations:        <none>
CreationTimestamp:  Fri, 03 May 2024 12:00:00 +0000
Taints:             a:NoExecute
                    dedicated=gpu:NoSchedule
Unschedulable:      true
Conditions:
  Type    Status  LastHeartbeatTime                 LastTransitionTime                Reason       Message
  ----    ------  -----------------                 ------------------                ------       -------
  Ready   True    Fri, 03 May 2024 15:59:59 +0000   Fri, 03 May 2024 12:00:00 +0000   AgentReady   agent is posting ready status
Addresses:
  InternalIP:  10.0.0.1
  Hostname:    n1
Capacity:
  cpu:     2
  memory:  4Gi
  pods:    110
System Info:
  Machine ID:                 
  System UUID:                
  Boot ID:                    
  Kernel Version:             6.1.0
  OS Image:                   Debian GNU/Linux 12 (bookworm)
  Operating System:           linux
  Architecture:               amd64
  Container Runtime Version:  sim://1
  Kubelet Version:            drover-0.1.0
Non-terminated Pods:          (2 in total)
  Namespace                   Name              CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------                   ----              ------------  ----------  ---------------  -------------  ---
  default                     master-agent-1    100m (5%)     0 (0%)      200Mi (4%)       200Mi (4%)     60m
  default                     master-agent-2    100m (5%)     0 (0%)      200Mi (4%)       200Mi (4%)     <unknown>
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests    Limits
  --------           --------    ------
  cpu                200m (10%)  0 (0%)
  memory             400Mi (9%)  400Mi (9%)
  ephemeral-storage  0 (0%)      0 (0%)
Events:              <none>
";
        assert_eq!(text, want, "\n{text}");
    }

    #[test]
    fn quantity_sums() {
        let q = |s: &str| Quantity(s.into());
        assert_eq!(sum_quantity("cpu", &[&q("100m"), &q("900m")]).0, "1");
        assert_eq!(sum_quantity("cpu", &[&q("100m"), &q("1")]).0, "1100m");
        assert_eq!(sum_quantity("cpu", &[&q("0.5")]), ("0.5".into(), 500));
        assert_eq!(sum_quantity("memory", &[&q("512Mi"), &q("512Mi")]).0, "1Gi");
        assert_eq!(sum_quantity("memory", &[&q("1G"), &q("500M")]).0, "1500M");
        assert_eq!(sum_quantity("memory", &[]).0, "0");
        assert_eq!(percent(1, 0), 0);
    }
}
