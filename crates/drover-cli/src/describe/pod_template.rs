//! What a pod and a pod template share: containers (with their state when
//! there is a pod), volumes, and the `Pod Template:` section of a DaemonSet
//! (kubectl's `describeContainers`, `describeVolumes`, `DescribePodTemplate`).

use super::layout::{annotations_multiline, labels_multiline, tolerations_multiline, W};
use crate::timefmt::describe_time;
use drover_api::{Container, ContainerState, Pod, PodTemplateSpec, Probe, Volume};

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

fn ports(c: &Container, host: bool) -> String {
    c.ports
        .iter()
        .map(|p| {
            let port = if host {
                p.host_port.unwrap_or(0)
            } else {
                p.container_port
            };
            let proto = p.protocol.as_ref().map(|x| x.as_str()).unwrap_or("TCP");
            if p.name.is_empty() {
                format!("{port}/{proto}")
            } else {
                format!("{port}/{proto} ({})", p.name)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A probe as kubectl shows it: `http-get http://:8080/healthz delay=0s …`.
pub fn format_probe(p: &Probe) -> String {
    let attrs = format!(
        "delay={}s timeout={}s period={}s successThreshold={} failureThreshold={}",
        p.initial_delay_seconds.unwrap_or(0),
        p.timeout_seconds.unwrap_or(1),
        p.period_seconds.unwrap_or(10),
        p.success_threshold.unwrap_or(1),
        p.failure_threshold.unwrap_or(3)
    );
    if let Some(e) = &p.exec {
        return format!("exec [{}] {attrs}", e.command.join(" "));
    }
    if let Some(h) = &p.http_get {
        let scheme = h
            .scheme
            .as_ref()
            .map(|s| s.as_str().to_ascii_lowercase())
            .unwrap_or_else(|| "http".into());
        let port = h.port.to_string();
        let host = if port.is_empty() {
            h.host.clone()
        } else {
            format!("{}:{port}", h.host)
        };
        return format!("http-get {scheme}://{host}{} {attrs}", h.path);
    }
    if let Some(t) = &p.tcp_socket {
        return format!("tcp-socket {}:{} {attrs}", t.host, t.port);
    }
    format!("unknown {attrs}")
}

fn container_state(w: &mut W, name: &str, s: &ContainerState) {
    if let Some(r) = &s.running {
        w.w(2, format!("{name}:\tRunning\n"));
        w.w(
            3,
            format!("Started:\t{}\n", describe_time(r.started_at.as_deref())),
        );
    } else if let Some(wt) = &s.waiting {
        w.w(2, format!("{name}:\tWaiting\n"));
        if !wt.reason.is_empty() {
            w.w(3, format!("Reason:\t{}\n", wt.reason));
        }
        // kubectl shows the reason only; the message says what to fix
        // (the missing image, the refused field), so drover shows it too.
        if !wt.message.is_empty() {
            w.w(3, format!("Message:\t{}\n", wt.message));
        }
    } else if let Some(t) = &s.terminated {
        w.w(2, format!("{name}:\tTerminated\n"));
        if !t.reason.is_empty() {
            w.w(3, format!("Reason:\t{}\n", t.reason));
        }
        if !t.message.is_empty() {
            w.w(3, format!("Message:\t{}\n", t.message));
        }
        w.w(3, format!("Exit Code:\t{}\n", t.exit_code));
        if let Some(sig) = t.signal.filter(|s| *s > 0) {
            w.w(3, format!("Signal:\t{sig}\n"));
        }
        w.w(
            3,
            format!("Started:\t{}\n", describe_time(t.started_at.as_deref())),
        );
        w.w(
            3,
            format!("Finished:\t{}\n", describe_time(t.finished_at.as_deref())),
        );
    } else {
        w.w(2, format!("{name}:\tWaiting\n"));
    }
}

fn env_value(pod: Option<&Pod>, field_path: &str) -> String {
    let Some(p) = pod else { return String::new() };
    match field_path {
        "metadata.name" => p.metadata.name.clone(),
        "metadata.namespace" => p.metadata.namespace.clone(),
        "metadata.uid" => p.metadata.uid.clone(),
        "spec.nodeName" => p.spec.node_name.clone(),
        "spec.serviceAccountName" => p.spec.service_account_name.clone(),
        "status.hostIP" => p.status.host_ip.clone(),
        "status.podIP" => p.status.pod_ip.clone(),
        _ => String::new(),
    }
}

/// kubectl's `describeContainers`: `space` is "  " inside a pod template.
pub(super) fn containers(w: &mut W, containers: &[Container], pod: Option<&Pod>, space: &str) {
    let none = if containers.is_empty() { " <none>" } else { "" };
    w.w(0, format!("{space}Containers:{none}\n"));
    let name_indent = if space.is_empty() { "" } else { " " };
    for c in containers {
        let status = pod.and_then(|p| {
            p.status
                .container_statuses
                .iter()
                .find(|s| s.name == c.name)
        });
        w.w(1, format!("{name_indent}{}:\n", c.name));
        if let Some(s) = status {
            w.w(2, format!("Container ID:\t{}\n", s.container_id));
        }
        w.w(2, format!("Image:\t{}\n", c.image));
        if let Some(s) = status {
            w.w(2, format!("Image ID:\t{}\n", s.image_id));
        }
        let p = ports(c, false);
        if p.contains(',') {
            w.w(2, format!("Ports:\t{p}\n"));
        } else {
            w.w(2, format!("Port:\t{}\n", or_none(&p)));
        }
        let hp = ports(c, true);
        if hp.contains(',') {
            w.w(2, format!("Host Ports:\t{hp}\n"));
        } else {
            w.w(2, format!("Host Port:\t{}\n", or_none(&hp)));
        }
        if !c.command.is_empty() {
            w.w(2, "Command:\n");
            for line in c.command.iter().flat_map(|x| x.split('\n')) {
                w.w(3, format!("{line}\n"));
            }
        }
        if !c.args.is_empty() {
            w.w(2, "Args:\n");
            for line in c.args.iter().flat_map(|x| x.split('\n')) {
                w.w(3, format!("{line}\n"));
            }
        }
        if let Some(s) = status {
            container_state(w, "State", &s.state);
            if s.last_state.terminated.is_some() {
                container_state(w, "Last State", &s.last_state);
            }
            w.w(
                2,
                format!("Ready:\t{}\n", if s.ready { "True" } else { "False" }),
            );
            w.w(2, format!("Restart Count:\t{}\n", s.restart_count));
        }
        for (title, list) in [
            ("Limits", &c.resources.limits),
            ("Requests", &c.resources.requests),
        ] {
            if !list.is_empty() {
                w.w(2, format!("{title}:\n"));
                for (k, v) in list {
                    w.w(3, format!("{k}:\t{v}\n"));
                }
            }
        }
        for (title, probe) in [
            ("Liveness", &c.liveness_probe),
            ("Readiness", &c.readiness_probe),
            ("Startup", &c.startup_probe),
        ] {
            if let Some(p) = probe {
                w.w(2, format!("{title}:\t{}\n", format_probe(p)));
            }
        }
        if !c.env_from.is_empty() {
            w.w(2, "Environment Variables from:\n");
            for f in &c.env_from {
                let (name, from, optional) = match (&f.config_map_ref, &f.secret_ref) {
                    (Some(r), _) => (&r.name, "ConfigMap", r.optional == Some(true)),
                    (None, Some(r)) => (&r.name, "Secret", r.optional == Some(true)),
                    (None, None) => continue,
                };
                let prefix = if f.prefix.is_empty() {
                    String::new()
                } else {
                    format!(" with prefix '{}'", f.prefix)
                };
                w.w(3, format!("{name}\t{from}{prefix}\tOptional: {optional}\n"));
            }
        }
        let none = if c.env.is_empty() { "\t<none>" } else { "" };
        w.w(2, format!("Environment:{none}\n"));
        for e in &c.env {
            match &e.value_from {
                None => {
                    for (i, line) in e.value.split('\n').enumerate() {
                        if i == 0 {
                            w.w(3, format!("{}:\t{line}\n", e.name));
                        } else {
                            w.w(3, format!("\t{line}\n"));
                        }
                    }
                }
                Some(from) => {
                    if let Some(f) = &from.field_ref {
                        let api = if f.api_version.is_empty() {
                            "v1"
                        } else {
                            &f.api_version
                        };
                        w.w(
                            3,
                            format!(
                                "{}:\t{} ({api}:{})\n",
                                e.name,
                                env_value(pod, &f.field_path),
                                f.field_path
                            ),
                        );
                    } else if let Some(r) = &from.resource_field_ref {
                        let (list, name) = match r.resource.split_once('.') {
                            Some(("limits", n)) => (&c.resources.limits, n),
                            Some((_, n)) => (&c.resources.requests, n),
                            None => (&c.resources.requests, r.resource.as_str()),
                        };
                        let value = match list.get(name) {
                            Some(q) => q.to_string(),
                            None if r.resource.starts_with("limits.") => "node allocatable".into(),
                            None => "0".into(),
                        };
                        w.w(3, format!("{}:\t{value} ({})\n", e.name, r.resource));
                    } else if let Some(r) = &from.secret_key_ref {
                        let optional = r.optional == Some(true);
                        w.w(
                            3,
                            format!(
                                "{}:\t<set to the key '{}' in secret '{}'>\tOptional: {optional}\n",
                                e.name, r.key, r.name
                            ),
                        );
                    } else if let Some(r) = &from.config_map_key_ref {
                        let optional = r.optional == Some(true);
                        w.w(
                            3,
                            format!(
                                "{}:\t<set to the key '{}' of config map '{}'>\tOptional: {optional}\n",
                                e.name, r.key, r.name
                            ),
                        );
                    } else {
                        w.w(
                            3,
                            format!("{}:\t<set from a source drover does not know>\n", e.name),
                        );
                    }
                }
            }
        }
        let none = if c.volume_mounts.is_empty() {
            "\t<none>"
        } else {
            ""
        };
        w.w(2, format!("Mounts:{none}\n"));
        let mut mounts: Vec<_> = c.volume_mounts.iter().collect();
        mounts.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
        for m in mounts {
            let mut flags = vec![if m.read_only {
                "ro".to_string()
            } else {
                "rw".to_string()
            }];
            if !m.sub_path.is_empty() {
                flags.push(format!("path={:?}", m.sub_path));
            }
            w.w(
                3,
                format!("{} from {} ({})\n", m.mount_path, m.name, flags.join(",")),
            );
        }
    }
}

pub(super) fn volumes(w: &mut W, volumes: &[Volume], space: &str) {
    if volumes.is_empty() {
        w.w(0, format!("{space}Volumes:\t<none>\n"));
        return;
    }
    w.w(0, format!("{space}Volumes:\n"));
    let name_indent = if space.is_empty() { "" } else { " " };
    for v in volumes {
        w.w(1, format!("{name_indent}{}:\n", v.name));
        if let Some(h) = &v.host_path {
            w.w(2, "Type:\tHostPath (bare host directory volume)\n");
            w.w(2, format!("Path:\t{}\n", h.path));
            w.w(
                2,
                format!(
                    "HostPathType:\t{}\n",
                    h.r#type.as_ref().map(|t| t.as_str()).unwrap_or("")
                ),
            );
        } else if let Some(e) = &v.empty_dir {
            w.w(
                2,
                "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n",
            );
            w.w(2, format!("Medium:\t{}\n", e.medium));
            let limit = e
                .size_limit
                .as_ref()
                .map(|q| q.to_string())
                .unwrap_or_else(|| "<unset>".into());
            w.w(2, format!("SizeLimit:\t{limit}\n"));
        } else if let Some(cm) = &v.config_map {
            w.w(2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n");
            w.w(2, format!("Name:\t{}\n", cm.name));
            w.w(2, format!("Optional:\t{}\n", cm.optional == Some(true)));
        } else if let Some(sec) = &v.secret {
            w.w(2, "Type:\tSecret (a volume populated by a Secret)\n");
            w.w(2, format!("SecretName:\t{}\n", sec.secret_name));
            w.w(2, format!("Optional:\t{}\n", sec.optional == Some(true)));
        } else if let Some(p) = &v.projected {
            w.w(
                2,
                "Type:\tProjected (a volume that contains injected data from multiple sources)\n",
            );
            let opt = |o: Option<bool>| o.map_or("<nil>".to_string(), |b| b.to_string());
            for source in &p.sources {
                if let Some(sec) = &source.secret {
                    w.w(2, format!("SecretName:\t{}\n", sec.name));
                    w.w(2, format!("SecretOptionalName:\t{}\n", opt(sec.optional)));
                } else if source.downward_api.is_some() {
                    w.w(2, "DownwardAPI:\ttrue\n");
                } else if let Some(cm) = &source.config_map {
                    w.w(2, format!("ConfigMapName:\t{}\n", cm.name));
                    w.w(2, format!("ConfigMapOptional:\t{}\n", opt(cm.optional)));
                }
            }
        } else if let Some(kind) = v.extra.keys().next() {
            w.w(
                2,
                format!("Type:\t{kind} (kept, but drover does not act on it)\n"),
            );
        } else {
            w.w(1, "<unknown>\n");
        }
    }
}

/// A pod template as `describe` prints it (`rollout history --revision`).
pub fn describe_pod_template(t: &PodTemplateSpec) -> String {
    let mut w = W::default();
    pod_template(&mut w, t);
    w.finish()
}

/// kubectl's `DescribePodTemplate`.
pub(super) fn pod_template(w: &mut W, t: &PodTemplateSpec) {
    w.w(0, "Pod Template:\n");
    labels_multiline(w, "  Labels", &t.metadata.labels);
    if !t.metadata.annotations.is_empty() {
        annotations_multiline(w, "  Annotations", &t.metadata.annotations);
    }
    if !t.spec.service_account_name.is_empty() {
        w.w(
            1,
            format!("Service Account:\t{}\n", t.spec.service_account_name),
        );
    }
    containers(w, &t.spec.containers, None, "  ");
    volumes(w, &t.spec.volumes, "  ");
    if !t.spec.priority_class_name.is_empty() {
        w.w(
            1,
            format!("Priority Class Name:\t{}\n", t.spec.priority_class_name),
        );
    }
    labels_multiline(w, "  Node-Selectors", &t.spec.node_selector);
    tolerations_multiline(w, "  Tolerations", &t.spec.tolerations);
}
