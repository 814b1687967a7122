//! A pod's container mapped to a Docker container the way the kubelet maps
//! it. Pure: the caller brings what it learned from the engine and the
//! node (the sandbox, the pod IP, the image's user, the mounts).
//!
//! | pod spec | Docker |
//! |---|---|
//! | `command` / `args` | `Entrypoint` / `Cmd`, with `$(VAR)` expanded from the env |
//! | `env` (`value`, `valueFrom.fieldRef`, `valueFrom.resourceFieldRef`) | `Env`, `$(VAR)` expanded from the variables before it |
//! | `workingDir`, `tty`, `stdin`, `stdinOnce` | `WorkingDir`, `Tty`, `OpenStdin`, `StdinOnce` |
//! | `hostNetwork` / else | `NetworkMode: host` / `container:<sandbox>` |
//! | `hostPID`, `shareProcessNamespace` | `PidMode: host`, `container:<sandbox>` |
//! | `hostIPC` / else | `IpcMode: host` / `container:<sandbox>` |
//! | `resources.limits.memory` | `Memory` (= `MemorySwap`: no swap) |
//! | `resources.limits.cpu` | `CpuQuota` over a 100 ms `CpuPeriod` (the kubelet's CFS quota) |
//! | `resources.requests.cpu` | `CpuShares` (1 CPU = 1024) |
//! | `securityContext` `runAsUser`/`runAsGroup` | `User: uid[:gid]` |
//! | `runAsNonRoot` | refused (`CreateContainerConfigError`) when the user would be root |
//! | `privileged`, `readOnlyRootFilesystem`, `capabilities` | `Privileged`, `ReadonlyRootfs`, `CapAdd`/`CapDrop` |
//! | `allowPrivilegeEscalation: false`, `seccompProfile: Unconfined` | `SecurityOpt` `no-new-privileges`, `seccomp=unconfined` |
//! | pod `fsGroup`, `supplementalGroups` | `GroupAdd` |
//! | `ports` (with `hostPort`) | port bindings on the pod's sandbox ([`ports`]) |
//! | `terminationGracePeriodSeconds` | `StopTimeout` |
//!
//! `envFrom` and `valueFrom.configMapKeyRef`/`secretKeyRef` arrive resolved
//! by the agent (literal `env` entries, [`drover_api::pod_config`]). What
//! cannot be honoured is refused when the container could not work without
//! it and reported as a warning, by field name, otherwise.

use super::volumes::VolumeError;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, PortBinding, PortMap};
use drover_api::{Container, Pod, Protocol, Quantity};
use std::collections::{BTreeMap, HashMap};

/// What a container is built from, besides its spec.
pub(crate) struct Inputs<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The container's index in the pod's containers.
    pub index: usize,
    /// The node's name (`spec.nodeName`).
    pub node_name: &'a str,
    /// The node's IP (`status.hostIP`).
    pub host_ip: &'a str,
    /// The pod's IP (`status.podIP`): the sandbox's, or the node's with
    /// `hostNetwork`.
    pub pod_ip: &'a str,
    /// The id of the pod's sandbox container; `None` with `hostNetwork`.
    pub sandbox: Option<&'a str>,
    /// The image (`spec.image` as the engine knows it).
    pub image: &'a str,
    /// The image's `Config.User` (`""` is root).
    pub image_user: &'a str,
    /// The node's CPUs and memory (bytes), for `resourceFieldRef` of a
    /// container without limits (the kubelet uses the node's allocatable).
    pub node_cpus: u64,
    /// See `node_cpus`.
    pub node_memory: u64,
    /// Labels of the container.
    pub labels: HashMap<String, String>,
    /// Its mounts (from [`super::volumes`]).
    pub mounts: Vec<Mount>,
}

/// A container's create body, and the fields it could not honour.
#[derive(Debug)]
pub(crate) struct Mapped {
    pub body: ContainerCreateBody,
    pub warnings: Vec<String>,
}

/// A spec that cannot be run as it is (`CreateContainerConfigError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct ConfigError(pub String);

impl From<VolumeError> for ConfigError {
    fn from(e: VolumeError) -> Self {
        ConfigError(e.to_string())
    }
}

/// The kubelet's name for a pod in messages: `name_namespace(uid)`.
pub(crate) fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name, pod.metadata.namespace, pod.metadata.uid
    )
}

/// Container fields that change nothing here and need no warning.
const QUIET_CONTAINER_FIELDS: &[&str] = &["terminationMessagePath", "terminationMessagePolicy"];

/// Builds the create body of container `inputs.index` of `inputs.pod`.
pub(crate) fn container(inputs: Inputs<'_>) -> Result<Mapped, ConfigError> {
    let pod = inputs.pod;
    let spec = pod.spec.containers.get(inputs.index).ok_or_else(|| {
        ConfigError(format!(
            "pod {}: there is no container #{}",
            pod_ref(pod),
            inputs.index
        ))
    })?;
    let what = |field: &str| format!("container {:?} of pod {}: {field}", spec.name, pod_ref(pod));
    let mut warnings = Vec::new();

    for (key, value) in &spec.extra {
        match key.as_str() {
            "tty" | "stdin" | "stdinOnce" => {}
            k if QUIET_CONTAINER_FIELDS.contains(&k) => {}
            k => warnings.push(what(&format!(
                "{k} is not supported by the Docker runtime and is ignored ({value})"
            ))),
        }
    }
    let flag = |key: &str| spec.extra.get(key).and_then(|v| v.as_bool());

    let env = env(&inputs, spec).map_err(|e| ConfigError(what(&e)))?;
    let vars: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let expand_all =
        |list: &[String]| -> Vec<String> { list.iter().map(|s| expand(s, &vars)).collect() };

    let sc = spec.security_context.clone().unwrap_or_default();
    let psc = pod.spec.security_context.clone().unwrap_or_default();
    let user = user(&inputs, spec).map_err(|e| ConfigError(what(&e)))?;

    let mut host = HostConfig {
        mounts: Some(inputs.mounts),
        privileged: sc.privileged,
        readonly_rootfs: sc.read_only_root_filesystem,
        ..Default::default()
    };
    if let Some(caps) = &sc.capabilities {
        if !caps.add.is_empty() {
            host.cap_add = Some(caps.add.clone());
        }
        if !caps.drop.is_empty() {
            host.cap_drop = Some(caps.drop.clone());
        }
    }
    let mut security_opt = Vec::new();
    if sc.allow_privilege_escalation == Some(false) {
        security_opt.push("no-new-privileges".to_string());
    }
    let seccomp = sc
        .extra
        .get("seccompProfile")
        .or_else(|| psc.extra.get("seccompProfile"));
    if let Some(p) = seccomp {
        match p.get("type").and_then(|t| t.as_str()) {
            Some("Unconfined") => security_opt.push("seccomp=unconfined".into()),
            Some("RuntimeDefault") => {}
            _ => warnings.push(what(&format!(
                "securityContext.seccompProfile {p} is not supported (Unconfined and RuntimeDefault are); the engine's default profile applies"
            ))),
        }
    }
    if !security_opt.is_empty() {
        host.security_opt = Some(security_opt);
    }
    for key in sc.extra.keys().filter(|k| *k != "seccompProfile") {
        warnings.push(what(&format!(
            "securityContext.{key} is not supported by the Docker runtime and is ignored"
        )));
    }
    let groups: Vec<String> = psc
        .fs_group
        .into_iter()
        .chain(psc.supplemental_groups.iter().copied())
        .map(|g| g.to_string())
        .collect();
    if !groups.is_empty() {
        host.group_add = Some(groups);
    }

    resources(spec, &mut host, &mut warnings, &what)?;

    match (pod.spec.host_network, inputs.sandbox) {
        (true, _) => {
            host.network_mode = Some("host".into());
            host.extra_hosts = host_aliases(pod);
            let (dns, search, options) = dns(pod);
            host.dns = dns;
            host.dns_search = search;
            host.dns_options = options;
        }
        (false, Some(sandbox)) => host.network_mode = Some(format!("container:{sandbox}")),
        (false, None) => {
            return Err(ConfigError(what("the pod has no network sandbox")));
        }
    }
    let share_pid = pod
        .spec
        .extra
        .get("shareProcessNamespace")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    if pod.spec.host_pid {
        host.pid_mode = Some("host".into());
    } else if let (true, Some(sandbox)) = (share_pid, inputs.sandbox) {
        host.pid_mode = Some(format!("container:{sandbox}"));
    }
    if pod.spec.host_ipc {
        host.ipc_mode = Some("host".into());
    } else if let Some(sandbox) = inputs.sandbox {
        host.ipc_mode = Some(format!("container:{sandbox}"));
    }

    let grace = pod
        .spec
        .termination_grace_period_seconds
        .unwrap_or(30)
        .max(0);
    let body = ContainerCreateBody {
        image: Some(inputs.image.to_string()),
        entrypoint: (!spec.command.is_empty()).then(|| expand_all(&spec.command)),
        cmd: (!spec.args.is_empty()).then(|| expand_all(&spec.args)),
        env: Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        working_dir: (!spec.working_dir.is_empty()).then(|| spec.working_dir.clone()),
        user,
        tty: flag("tty"),
        open_stdin: flag("stdin"),
        stdin_once: flag("stdinOnce"),
        labels: Some(inputs.labels),
        stop_timeout: Some(grace),
        host_config: Some(host),
        ..Default::default()
    };
    Ok(Mapped { body, warnings })
}

/// The pod's port bindings, which belong to its sandbox (the containers
/// join its network namespace): `exposed` keys (`80/tcp`) and bindings for
/// the ports with a `hostPort`.
pub(crate) fn ports(pod: &Pod) -> (Vec<String>, PortMap) {
    let mut exposed = Vec::new();
    let mut map = PortMap::new();
    for c in &pod.spec.containers {
        for p in &c.ports {
            let proto = match &p.protocol {
                Some(Protocol::Udp) => "udp",
                Some(Protocol::Sctp) => "sctp",
                _ => "tcp",
            };
            let key = format!("{}/{proto}", p.container_port);
            if !exposed.contains(&key) {
                exposed.push(key.clone());
            }
            if let Some(host_port) = p.host_port.filter(|hp| *hp > 0) {
                let binding = PortBinding {
                    host_ip: (!p.host_ip.is_empty()).then(|| p.host_ip.clone()),
                    host_port: Some(host_port.to_string()),
                };
                map.entry(key)
                    .or_insert_with(|| Some(Vec::new()))
                    .get_or_insert_with(Vec::new)
                    .push(binding);
            }
        }
    }
    (exposed, map)
}

/// `hostAliases` as Docker's extra hosts (`name:ip`).
pub(crate) fn host_aliases(pod: &Pod) -> Option<Vec<String>> {
    let aliases = pod.spec.extra.get("hostAliases")?.as_array()?;
    let mut out = Vec::new();
    for a in aliases {
        let Some(ip) = a.get("ip").and_then(|v| v.as_str()) else {
            continue;
        };
        for h in a
            .get("hostnames")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(h) = h.as_str() {
                out.push(format!("{h}:{ip}"));
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

type DnsSettings = (
    Option<Vec<String>>,
    Option<Vec<String>>,
    Option<Vec<String>>,
);

/// `dnsConfig` as Docker's dns servers, search domains and options.
pub(crate) fn dns(pod: &Pod) -> DnsSettings {
    let Some(cfg) = pod.spec.extra.get("dnsConfig") else {
        return (None, None, None);
    };
    let strings = |key: &str| -> Option<Vec<String>> {
        let v: Vec<String> = cfg
            .get(key)?
            .as_array()?
            .iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect();
        (!v.is_empty()).then_some(v)
    };
    let options = cfg.get("options").and_then(|v| v.as_array()).map(|opts| {
        opts.iter()
            .filter_map(|o| {
                let name = o.get("name")?.as_str()?;
                Some(match o.get("value").and_then(|v| v.as_str()) {
                    Some(v) => format!("{name}:{v}"),
                    None => name.to_string(),
                })
            })
            .collect::<Vec<_>>()
    });
    (
        strings("nameservers"),
        strings("searches"),
        options.filter(|o| !o.is_empty()),
    )
}

/// Pod fields that change nothing here and need no warning.
const QUIET_POD_FIELDS: &[&str] = &[
    "dnsPolicy",
    "schedulerName",
    "enableServiceLinks",
    "priority",
    "preemptionPolicy",
    "automountServiceAccountToken",
    "serviceAccount",
    "hostname",
    "hostAliases",
    "dnsConfig",
    "shareProcessNamespace",
];

/// Warnings for the pod-level fields the Docker runtime does not honour.
pub(crate) fn pod_warnings(pod: &Pod) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in &pod.spec.extra {
        if QUIET_POD_FIELDS.contains(&key.as_str()) {
            continue;
        }
        let why = match key.as_str() {
            "initContainers" => "init containers are not run by drover".to_string(),
            _ => format!("not supported by the Docker runtime and ignored ({value})"),
        };
        out.push(format!("pod {}: spec.{key}: {why}", pod_ref(pod)));
    }
    if let Some(sc) = &pod.spec.security_context {
        for key in sc.extra.keys().filter(|k| *k != "seccompProfile") {
            out.push(format!(
                "pod {}: spec.securityContext.{key} is not supported by the Docker runtime and is ignored",
                pod_ref(pod)
            ));
        }
    }
    out
}

/// The hostname of the pod's sandbox: `spec.hostname`, else the pod's
/// name, cut to 63 characters (as the kubelet does).
pub(crate) fn hostname(pod: &Pod) -> String {
    let name = pod
        .spec
        .extra
        .get("hostname")
        .and_then(|v| v.as_str())
        .unwrap_or(&pod.metadata.name);
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}

fn env(i: &Inputs<'_>, spec: &Container) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (n, e) in spec.env.iter().enumerate() {
        let field = format!("env[{n}] ({})", e.name);
        let value = match &e.value_from {
            None => {
                let vars: HashMap<&str, &str> =
                    out.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                expand(&e.value, &vars)
            }
            Some(from) => {
                if let Some(f) = &from.field_ref {
                    field_value(i, &f.field_path)
                        .map_err(|e| format!("{field}.valueFrom.fieldRef.fieldPath: {e}"))?
                } else if let Some(r) = &from.resource_field_ref {
                    resource_value(i, spec, r)
                        .map_err(|e| format!("{field}.valueFrom.resourceFieldRef: {e}"))?
                } else if from.config_map_key_ref.is_some() || from.secret_key_ref.is_some() {
                    return Err(format!(
                        "{field}.valueFrom: a ConfigMap or Secret key the agent did not resolve"
                    ));
                } else {
                    let kinds: Vec<&str> = from.extra.keys().map(String::as_str).collect();
                    return Err(format!(
                        "{field}.valueFrom: {} needs objects drover does not have; only fieldRef and resourceFieldRef are supported",
                        if kinds.is_empty() { "an empty source".to_string() } else { kinds.join(", ") }
                    ));
                }
            }
        };
        out.retain(|(k, _)| *k != e.name);
        out.push((e.name.clone(), value));
    }
    Ok(out)
}

/// Whether the container's environment needs the pod's IP (then its
/// sandbox must run, and have its address, before the container is
/// created; otherwise the two can be made at once).
pub fn needs_pod_ip(c: &drover_api::Container) -> bool {
    c.env.iter().any(|e| {
        e.value_from
            .as_ref()
            .and_then(|f| f.field_ref.as_ref())
            .is_some_and(|f| f.field_path.starts_with("status.podIP"))
    })
}

/// The downward API's field paths.
fn field_value(i: &Inputs<'_>, path: &str) -> Result<String, String> {
    let pod = i.pod;
    let subscript = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?.strip_prefix("['")?;
        Some(rest.strip_suffix("']")?.to_string())
    };
    Ok(match path {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "spec.nodeName" => i.node_name.to_string(),
        "spec.serviceAccountName" => pod.spec.service_account_name.clone(),
        "status.hostIP" | "status.hostIPs" => i.host_ip.to_string(),
        "status.podIP" | "status.podIPs" => i.pod_ip.to_string(),
        _ => {
            if let Some(k) = subscript("metadata.labels") {
                pod.metadata.labels.get(&k).cloned().unwrap_or_default()
            } else if let Some(k) = subscript("metadata.annotations") {
                pod.metadata
                    .annotations
                    .get(&k)
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(format!(
                    "{path:?} is not supported (supported: metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.podIP)"
                ));
            }
        }
    })
}

/// `resourceFieldRef`: a limit or request of a container, divided by the
/// divisor and rounded up; a limit that is not set is the node's capacity,
/// a request that is not set is the limit (as the API server defaults it).
fn resource_value(
    i: &Inputs<'_>,
    own: &Container,
    r: &drover_api::ResourceFieldSelector,
) -> Result<String, String> {
    let c = if r.container_name.is_empty() {
        own
    } else {
        i.pod
            .spec
            .containers
            .iter()
            .find(|c| c.name == r.container_name)
            .ok_or_else(|| format!("containerName: no container {:?}", r.container_name))?
    };
    let (kind, name) = r.resource.split_once('.').ok_or_else(|| {
        format!(
            "resource {:?}: expected limits.cpu, limits.memory, requests.cpu or requests.memory",
            r.resource
        )
    })?;
    let node_default = match name {
        "cpu" => i128::from(i.node_cpus) * 1_000_000_000,
        "memory" => i128::from(i.node_memory) * 1_000_000_000,
        _ => {
            return Err(format!(
                "resource {:?} is not supported (limits.cpu, limits.memory, requests.cpu, requests.memory are)",
                r.resource
            ))
        }
    };
    let nanos = |q: &Quantity| q.to_nanos().map_err(|e| format!("{name} {:?}: {e}", q.0));
    let limit = match c.resources.limits.get(name) {
        Some(q) => Some(nanos(q)?),
        None => None,
    };
    let value = match kind {
        "limits" => limit.unwrap_or(node_default),
        "requests" => match c.resources.requests.get(name) {
            Some(q) => nanos(q)?,
            None => limit.unwrap_or(0),
        },
        _ => {
            return Err(format!(
                "resource {:?}: expected limits.* or requests.*",
                r.resource
            ))
        }
    };
    let divisor = match &r.divisor {
        Some(d) => nanos(d)?,
        None => 1_000_000_000,
    };
    if divisor <= 0 {
        return Err("divisor must be positive".into());
    }
    let q = value / divisor + i128::from(value % divisor > 0);
    Ok(q.to_string())
}

/// The kubelet's `$(VAR)` expansion: a reference to a defined variable is
/// replaced by its value, `$$` is a literal `$`, anything else (an
/// undefined variable, an unclosed `$(`) stays as written.
pub(crate) fn expand(input: &str, vars: &HashMap<&str, &str>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' || i + 1 >= b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b[i + 1] {
            b'$' => {
                out.push(b'$');
                i += 2;
            }
            b'(' => match b[i + 2..].iter().position(|c| *c == b')') {
                Some(len) => {
                    let name = &input[i + 2..i + 2 + len];
                    match vars.get(name) {
                        Some(v) => out.extend_from_slice(v.as_bytes()),
                        None => out.extend_from_slice(&b[i..i + 3 + len]),
                    }
                    i += 3 + len;
                }
                None => {
                    out.extend_from_slice(b"$(");
                    i += 2;
                }
            },
            _ => {
                out.push(b'$');
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `User` of the container, after checking `runAsNonRoot`.
fn user(i: &Inputs<'_>, spec: &Container) -> Result<Option<String>, String> {
    let sc = spec.security_context.as_ref();
    let psc = i.pod.spec.security_context.as_ref();
    let uid = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| psc.and_then(|s| s.run_as_user));
    let gid = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| psc.and_then(|s| s.run_as_group));
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| psc.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let image_user = i.image_user.split(':').next().unwrap_or("");
    if non_root {
        let pod = pod_ref(i.pod);
        match uid {
            Some(0) => {
                return Err(format!(
                    "securityContext.runAsNonRoot: the container's runAsUser 0 breaks the non-root policy (pod: {pod:?}, container: {}); set runAsUser to a non-zero uid",
                    spec.name
                ))
            }
            Some(_) => {}
            None => match image_user.parse::<u64>() {
                Ok(0) => return Err(non_root_image(&pod, &spec.name)),
                Ok(_) => {}
                Err(_) if image_user.is_empty() || image_user == "root" => {
                    return Err(non_root_image(&pod, &spec.name))
                }
                Err(_) => {
                    return Err(format!(
                        "securityContext.runAsNonRoot: the image has the non-numeric user ({image_user}), cannot verify that it is not root (pod: {pod:?}, container: {}); set runAsUser",
                        spec.name
                    ))
                }
            },
        }
    }
    Ok(match (uid, gid) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        (None, Some(g)) => Some(format!(
            "{}:{g}",
            if image_user.is_empty() {
                "0"
            } else {
                image_user
            }
        )),
        (None, None) => None,
    })
}

fn non_root_image(pod: &str, container: &str) -> String {
    format!(
        "securityContext.runAsNonRoot: the container would run as root, the image's user (pod: {pod:?}, container: {container}); set runAsUser to a non-zero uid"
    )
}

/// Limits and requests; other resources than cpu and memory are warned
/// about.
fn resources(
    spec: &Container,
    host: &mut HostConfig,
    warnings: &mut Vec<String>,
    what: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    let r = &spec.resources;
    let parse = |kind: &str, name: &str, q: &Quantity| {
        q.to_nanos().map_err(|e| {
            ConfigError(what(&format!(
                "resources.{kind}.{name} {:?}: {e}; write e.g. 128Mi or 500m",
                q.0
            )))
        })
    };
    let check = |kind: &str, map: &BTreeMap<String, Quantity>, warnings: &mut Vec<String>| {
        for name in map.keys() {
            if name != "cpu" && name != "memory" {
                warnings.push(what(&format!(
                    "resources.{kind}.{name} is not enforced by the Docker runtime"
                )));
            }
        }
    };
    check("limits", &r.limits, warnings);
    check("requests", &r.requests, warnings);
    if let Some(q) = r.limits.get("memory") {
        let bytes = i64::try_from(parse("limits", "memory", q)? / 1_000_000_000)
            .map_err(|_| ConfigError(what("resources.limits.memory is too large")))?;
        host.memory = Some(bytes);
        host.memory_swap = Some(bytes);
    }
    let millis = |n: i128| n / 1_000_000 + i128::from(n % 1_000_000 > 0);
    if let Some(q) = r.limits.get("cpu") {
        let m = millis(parse("limits", "cpu", q)?);
        let quota = i64::try_from(m * 100)
            .map_err(|_| ConfigError(what("resources.limits.cpu is too large")))?;
        host.cpu_period = Some(100_000);
        host.cpu_quota = Some(quota.max(1_000));
    }
    let request = match r.requests.get("cpu") {
        Some(q) => Some(parse("requests", "cpu", q)?),
        None => match r.limits.get("cpu") {
            Some(q) => Some(parse("limits", "cpu", q)?),
            None => None,
        },
    };
    if let Some(n) = request {
        let shares = i64::try_from(millis(n) * 1024 / 1000).unwrap_or(i64::MAX);
        host.cpu_shares = Some(shares.clamp(2, 262_144));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        match drover_api::parse_manifests(yaml).unwrap().remove(0) {
            drover_api::Manifest::Pod(p) => *p,
            other => panic!("not a pod: {other:?}"),
        }
    }

    fn inputs(p: &Pod) -> Inputs<'_> {
        Inputs {
            pod: p,
            index: 0,
            node_name: "edge-1",
            host_ip: "192.0.2.1",
            pod_ip: "172.17.0.5",
            sandbox: Some("sb1"),
            image: &p.spec.containers[0].image,
            image_user: "",
            node_cpus: 4,
            node_memory: 8 << 30,
            labels: HashMap::new(),
            mounts: Vec::new(),
        }
    }

    const POD: &str = "
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: u-1, labels: {app: web}}
spec:
  containers:
  - name: c
    image: busybox:1
    command: [sh, -c]
    args: ['echo $(GREETING) $(MISSING) $$(NODE)']
    workingDir: /tmp
    env:
    - {name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: NS, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: UID, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}
    - {name: HOST_IP, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
    - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
    - {name: APP, valueFrom: {fieldRef: {fieldPath: \"metadata.labels['app']\"}}}
    - {name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
    - {name: GREETING, value: 'hi $(NODE)'}
    resources:
      limits: {memory: 128Mi, cpu: 500m}
      requests: {cpu: 250m}
    securityContext:
      runAsUser: 1000
      runAsGroup: 3000
      privileged: false
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities: {add: [NET_ADMIN], drop: [ALL]}
    ports:
    - {containerPort: 80, hostPort: 8080}
    - {containerPort: 53, protocol: UDP}
";

    #[test]
    fn a_container_is_mapped_as_the_kubelet_maps_it() {
        let p = pod(POD);
        let m = container(inputs(&p)).unwrap();
        assert!(m.warnings.is_empty(), "{:?}", m.warnings);
        let b = m.body;
        let env = b.env.unwrap();
        for want in [
            "NODE=edge-1",
            "POD=p",
            "NS=ns",
            "UID=u-1",
            "HOST_IP=192.0.2.1",
            "POD_IP=172.17.0.5",
            "APP=web",
            "MEM=128",
            "GREETING=hi edge-1",
        ] {
            assert!(env.contains(&want.to_string()), "{want} in {env:?}");
        }
        assert_eq!(b.entrypoint.unwrap(), vec!["sh", "-c"]);
        assert_eq!(
            b.cmd.unwrap(),
            vec!["echo hi edge-1 $(MISSING) $(NODE)".to_string()]
        );
        assert_eq!(b.working_dir.as_deref(), Some("/tmp"));
        assert_eq!(b.user.as_deref(), Some("1000:3000"));
        assert_eq!(b.stop_timeout, Some(30));
        let h = b.host_config.unwrap();
        assert_eq!(h.memory, Some(128 << 20));
        assert_eq!(h.memory_swap, Some(128 << 20));
        assert_eq!((h.cpu_period, h.cpu_quota), (Some(100_000), Some(50_000)));
        assert_eq!(h.cpu_shares, Some(256));
        assert_eq!(h.readonly_rootfs, Some(true));
        assert_eq!(h.privileged, Some(false));
        assert_eq!(h.cap_add, Some(vec!["NET_ADMIN".to_string()]));
        assert_eq!(h.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(h.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert_eq!(h.network_mode.as_deref(), Some("container:sb1"));
        assert_eq!(h.ipc_mode.as_deref(), Some("container:sb1"));
        assert_eq!(h.pid_mode, None);
        assert!(h.port_bindings.is_none(), "ports belong to the sandbox");
        let (exposed, map) = ports(&p);
        assert_eq!(exposed, vec!["80/tcp", "53/udp"]);
        assert_eq!(map.len(), 1);
        assert_eq!(
            map["80/tcp"].as_ref().unwrap()[0].host_port.as_deref(),
            Some("8080")
        );
    }

    #[test]
    fn host_namespaces() {
        let mut p = pod(POD);
        p.spec.host_network = true;
        p.spec.host_pid = true;
        p.spec.host_ipc = true;
        let mut i = inputs(&p);
        i.sandbox = None;
        let h = container(i).unwrap().body.host_config.unwrap();
        assert_eq!(h.network_mode.as_deref(), Some("host"));
        assert_eq!(h.pid_mode.as_deref(), Some("host"));
        assert_eq!(h.ipc_mode.as_deref(), Some("host"));
    }

    #[test]
    fn run_as_non_root_refuses_root() {
        let refuse = |yaml_sc: &str, image_user: &str| {
            let p = pod(&format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ns, uid: u}}\nspec:\n  containers:\n  - name: c\n    image: i\n    securityContext: {yaml_sc}\n"
            ));
            let mut i = inputs(&p);
            i.image_user = image_user;
            container(i).map(|m| m.body.user)
        };
        let e = refuse("{runAsNonRoot: true, runAsUser: 0}", "").unwrap_err();
        assert!(
            e.0.contains("runAsNonRoot") && e.0.contains("container \"c\""),
            "{e}"
        );
        let e = refuse("{runAsNonRoot: true}", "").unwrap_err();
        assert!(e.0.contains("root"), "{e}");
        let e = refuse("{runAsNonRoot: true}", "nobody").unwrap_err();
        assert!(e.0.contains("non-numeric"), "{e}");
        assert_eq!(
            refuse("{runAsNonRoot: true}", "65534").unwrap(),
            None,
            "the image's numeric user is fine"
        );
        assert_eq!(
            refuse("{runAsNonRoot: true, runAsUser: 1}", "").unwrap(),
            Some("1".into())
        );
        assert_eq!(refuse("{runAsGroup: 7}", "").unwrap(), Some("0:7".into()));
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_or_warned_by_name() {
        let p = pod("
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: u}
spec:
  containers:
  - name: c
    image: i
    envFrom: [{configMapRef: {name: x}}]
");
        // The agent resolves envFrom before the runtime sees the container.
        assert!(container(inputs(&p)).is_ok());
        let p = pod("
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: u}
spec:
  containers:
  - name: c
    image: i
    env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}]
");
        let e = container(inputs(&p)).unwrap_err();
        assert!(
            e.0.contains("env[0] (A)") && e.0.contains("did not resolve"),
            "{e}"
        );
        let p = pod("
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: u}
spec:
  containers:
  - name: c
    image: i
    env: [{name: A, valueFrom: {fieldRef: {fieldPath: spec.schedulerName}}}]
");
        let e = container(inputs(&p)).unwrap_err();
        assert!(e.0.contains("spec.schedulerName"), "{e}");
        let p = pod("
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: u}
spec:
  initContainers: [{name: i, image: i}]
  containers:
  - name: c
    image: i
    terminationMessagePath: /dev/termination-log
    resources: {limits: {nvidia.com/gpu: 1}}
    securityContext: {seLinuxOptions: {level: s0}}
");
        let w = container(inputs(&p)).unwrap().warnings;
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().any(|w| w.contains("nvidia.com/gpu")));
        assert!(w.iter().any(|w| w.contains("seLinuxOptions")));
        let w = pod_warnings(&p);
        assert!(w.len() == 1 && w[0].contains("initContainers"), "{w:?}");
    }

    #[test]
    fn expansion_follows_the_kubelet() {
        let vars: HashMap<&str, &str> = [("A", "1"), ("B", "two")].into_iter().collect();
        for (input, want) in [
            ("$(A)", "1"),
            ("x$(A)y$(B)z", "x1ytwoz"),
            ("$$(A)", "$(A)"),
            ("$(C)", "$(C)"),
            ("$(A", "$(A"),
            ("$A", "$A"),
            ("a$", "a$"),
            ("$$", "$"),
            ("é$(A)ü", "é1ü"),
        ] {
            assert_eq!(expand(input, &vars), want, "{input}");
        }
    }

    #[test]
    fn hostname_and_dns() {
        let p = pod("
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns, uid: u}
spec:
  hostname: web-0
  hostAliases: [{ip: 10.1.2.3, hostnames: [foo.local, bar.local]}]
  dnsConfig: {nameservers: [1.1.1.1], searches: [ns.svc], options: [{name: ndots, value: '2'}, {name: edns0}]}
  containers: [{name: c, image: i}]
");
        assert_eq!(hostname(&p), "web-0");
        assert_eq!(
            host_aliases(&p).unwrap(),
            vec!["foo.local:10.1.2.3", "bar.local:10.1.2.3"]
        );
        let (d, s, o) = dns(&p);
        assert_eq!(d.unwrap(), vec!["1.1.1.1"]);
        assert_eq!(s.unwrap(), vec!["ns.svc"]);
        assert_eq!(o.unwrap(), vec!["ndots:2", "edns0"]);
    }
}
