use super::*;
use crate::kubernetes_fields::fields_of;
use std::collections::BTreeSet;

/// Every `$ref` in `v`.
fn refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// The table cannot drift from Kubernetes' fields: each type's properties
/// are exactly the fields `kubernetes_fields` lists for it (drover's own
/// and the kept ones), with a description each.
#[test]
fn every_schema_has_exactly_the_kubernetes_fields() {
    let b = build(&Kind::ALL);
    let mut problems = Vec::new();
    for (schema, drover) in &b.names {
        let Some(k8s) = fields_of(drover) else {
            problems.push(format!("{drover}: not in kubernetes_fields"));
            continue;
        };
        let want: BTreeSet<&str> = k8s.iter().copied().collect();
        let props = b.out[schema]["properties"].as_object().unwrap();
        let have: BTreeSet<&str> = props.keys().map(String::as_str).collect();
        for f in want.difference(&have) {
            problems.push(format!("{drover}.{f}: a Kubernetes field without a schema"));
        }
        for f in have.difference(&want) {
            problems.push(format!("{drover}.{f}: not a Kubernetes field"));
        }
        for (f, p) in props {
            if p["description"].as_str().is_none_or(str::is_empty) {
                problems.push(format!("{drover}.{f}: no description"));
            }
        }
        if b.out[schema]["description"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            problems.push(format!("{drover}: no description"));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A kept field is not also a field drover knows (it would hide it).
#[test]
fn kept_fields_are_not_fields_drover_knows() {
    let b = build(&Kind::ALL);
    for (schema, drover) in &b.names {
        let kept: Vec<&str> = extra::fields(drover).iter().map(|f| f.json).collect();
        for p in b.out[schema]["properties"].as_object().unwrap().keys() {
            let n = kept.iter().filter(|k| **k == p.as_str()).count();
            assert!(n <= 1, "{drover}.{p} is kept twice");
        }
        let s = b.out[schema]["properties"].as_object().unwrap();
        for k in &kept {
            let d = s[*k]["description"].as_str().unwrap();
            assert!(d.ends_with("does not act on it."), "{drover}.{k}: {d}");
        }
    }
    // Every type with kept fields is one the schemas reach.
    let reached: BTreeSet<&str> = b.names.values().copied().collect();
    for t in [
        "ObjectMeta",
        "PodSpec",
        "Container",
        "Volume",
        "PodStatus",
        "NodeStatus",
        "DownwardApiVolumeFile",
    ] {
        assert!(reached.contains(t), "{t}");
    }
}

#[test]
fn every_kind_has_its_schema_and_every_reference_resolves() {
    let all = schemas(&Kind::ALL);
    for k in Kind::ALL {
        let s = &all[&kind_schema_name(k)];
        assert_eq!(
            s["x-kubernetes-group-version-kind"],
            json!([{"group": k.group(), "version": "v1", "kind": k.name()}]),
            "{k:?}"
        );
        assert!(s["properties"]["metadata"]["allOf"][0]["$ref"]
            .as_str()
            .unwrap()
            .ends_with("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    }
    let mut found = Vec::new();
    for v in all.values() {
        refs(v, &mut found);
    }
    for r in found {
        let name = r.strip_prefix("#/components/schemas/").unwrap();
        assert!(all.contains_key(name), "{r} does not resolve");
    }
    // A document for one group has only what its kinds reach.
    let apps = schemas(&[Kind::DaemonSet, Kind::ControllerRevision]);
    assert!(apps.contains_key("io.k8s.api.core.v1.PodSpec"));
    assert!(!apps.contains_key("io.k8s.api.core.v1.NodeSpec"));
}

#[test]
fn the_update_strategy_reads_as_kubernetes_writes_it() {
    let all = schemas(&[Kind::DaemonSet]);
    let spec = &all["io.k8s.api.apps.v1.DaemonSetSpec"];
    assert_eq!(
        spec["properties"]["updateStrategy"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.DaemonSetUpdateStrategy"
    );
    assert_eq!(spec["required"], json!(["selector", "template"]));
    let strategy = &all["io.k8s.api.apps.v1.DaemonSetUpdateStrategy"];
    assert_eq!(
        strategy["properties"]["type"]["enum"],
        json!(["RollingUpdate", "OnDelete"])
    );
    assert_eq!(
        strategy["description"],
        "How a DaemonSet's pods are updated."
    );
    let rolling = &all["io.k8s.api.apps.v1.RollingUpdateDaemonSet"];
    assert_eq!(
        rolling["properties"]["maxUnavailable"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    );
    // Doc lines join into one paragraph.
    let d = rolling["properties"]["maxUnavailable"]["description"]
        .as_str()
        .unwrap();
    assert!(d.starts_with("Nodes whose pod may be unavailable at once: a number or a percentage"));
    assert!(!d.contains('\n'), "{d}");
}

#[test]
fn lists_carry_the_merge_keys_of_the_strategic_merge_patch() {
    let all = schemas(&Kind::ALL);
    let prop = |t: &str, f: &str| all[t]["properties"][f].clone();
    let pod_spec = "io.k8s.api.core.v1.PodSpec";
    let container = "io.k8s.api.core.v1.Container";
    for (t, f, key) in [
        (pod_spec, "containers", "name"),
        (pod_spec, "initContainers", "name"),
        (pod_spec, "volumes", "name"),
        (container, "env", "name"),
        (container, "ports", "containerPort"),
        (container, "volumeMounts", "mountPath"),
        ("io.k8s.api.core.v1.NodeStatus", "conditions", "type"),
        (
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "ownerReferences",
            "uid",
        ),
    ] {
        let p = prop(t, f);
        assert_eq!(p["x-kubernetes-patch-merge-key"], key, "{t}.{f}");
        assert_eq!(p["x-kubernetes-patch-strategy"], "merge", "{t}.{f}");
    }
    let fin = prop(
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
    );
    assert_eq!(fin["x-kubernetes-patch-strategy"], "merge");
    assert!(fin.get("x-kubernetes-patch-merge-key").is_none());
    for (t, f) in [
        (pod_spec, "tolerations"),
        ("io.k8s.api.core.v1.NodeSpec", "taints"),
    ] {
        assert!(
            prop(t, f).get("x-kubernetes-patch-strategy").is_none(),
            "{t}.{f}"
        );
    }
    // Items of a named type refer to it; maps of quantities too.
    assert_eq!(
        prop(pod_spec, "containers")["items"]["$ref"],
        "#/components/schemas/io.k8s.api.core.v1.Container"
    );
    assert_eq!(
        prop("io.k8s.api.core.v1.ResourceRequirements", "limits")["additionalProperties"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"
    );
}

#[test]
fn names_follow_kubernetes() {
    let all = schemas(&[Kind::Pod]);
    for n in [
        "io.k8s.api.core.v1.HTTPGetAction",
        "io.k8s.api.core.v1.TCPSocketAction",
        "io.k8s.api.core.v1.DownwardAPIVolumeFile",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
    ] {
        assert!(all.contains_key(n), "{n}");
    }
    assert_eq!(
        describe(" A `x`\n see [`Y`].\n\n Next.\n"),
        "A `x` see `Y`.\n\nNext."
    );
}

/// The `required` lists are Kubernetes' (its published OpenAPI).
#[test]
fn required_fields_are_those_kubernetes_marks() {
    let all = schemas(&Kind::ALL);
    for (schema, want) in [
        (
            "io.k8s.api.core.v1.PreferredSchedulingTerm",
            json!(["weight", "preference"]),
        ),
        (
            "io.k8s.api.core.v1.NodeSelector",
            json!(["nodeSelectorTerms"]),
        ),
        (
            "io.k8s.api.core.v1.ContainerStatus",
            json!(["name", "ready", "restartCount", "image", "imageID"]),
        ),
        (
            "io.k8s.api.core.v1.NodeSelectorRequirement",
            json!(["key", "operator"]),
        ),
        ("io.k8s.api.core.v1.HTTPGetAction", json!(["port"])),
        ("io.k8s.api.core.v1.TCPSocketAction", json!(["port"])),
        ("io.k8s.api.core.v1.HTTPHeader", json!(["name", "value"])),
        ("io.k8s.api.core.v1.SleepAction", json!(["seconds"])),
        ("io.k8s.api.core.v1.Taint", json!(["key", "effect"])),
        ("io.k8s.api.core.v1.PodSpec", json!(["containers"])),
        ("io.k8s.api.core.v1.Container", json!(["name"])),
        ("io.k8s.api.core.v1.ContainerPort", json!(["containerPort"])),
        (
            "io.k8s.api.core.v1.VolumeMount",
            json!(["name", "mountPath"]),
        ),
        ("io.k8s.api.core.v1.KeyToPath", json!(["key", "path"])),
        (
            "io.k8s.api.core.v1.ObjectFieldSelector",
            json!(["fieldPath"]),
        ),
        (
            "io.k8s.api.apps.v1.DaemonSetSpec",
            json!(["selector", "template"]),
        ),
        (
            "io.k8s.api.apps.v1.DaemonSetStatus",
            json!([
                "currentNumberScheduled",
                "numberMisscheduled",
                "desiredNumberScheduled",
                "numberReady"
            ]),
        ),
        (
            "io.k8s.api.core.v1.ResourceFieldSelector",
            json!(["resource"]),
        ),
    ] {
        assert_eq!(all[schema]["required"], want, "{schema}");
    }
    for schema in [
        "io.k8s.api.core.v1.NodeSelectorTerm",
        "io.k8s.api.core.v1.Toleration",
        "io.k8s.api.core.v1.ExecAction",
    ] {
        assert!(all[schema].get("required").is_none(), "{schema}");
    }
}

/// A kept field's description is its own, a space, then the note.
#[test]
fn a_kept_field_says_after_its_description_that_drover_does_not_act_on_it() {
    let all = schemas(&[Kind::Pod]);
    let meta = &all["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"];
    assert_eq!(
        meta["selfLink"]["description"],
        "A URL of the object; deprecated by Kubernetes and never set. drover keeps this field but does not act on it."
    );
    // drover's own fields carry no note.
    let name = meta["name"]["description"].as_str().unwrap();
    assert!(!name.contains("does not act on it"), "{name}");
    assert!(!name.starts_with(' ') && !name.ends_with(' '), "{name:?}");
}

/// Kubernetes' `metav1.Time` (and `MicroTime`) is a string of format
/// `date-time`; every other string has no format.
#[test]
fn only_time_fields_are_strings_of_format_date_time() {
    let all = schemas(&Kind::ALL);
    let prop = |t: &str, f: &str| all[t]["properties"][f].clone();
    let meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    for (t, f) in [
        (meta, "creationTimestamp"),
        (meta, "deletionTimestamp"),
        ("io.k8s.api.core.v1.NodeCondition", "lastHeartbeatTime"),
        ("io.k8s.api.core.v1.PodCondition", "lastTransitionTime"),
        ("io.k8s.api.core.v1.PodStatus", "startTime"),
        ("io.k8s.api.core.v1.ContainerStateTerminated", "startedAt"),
        ("io.k8s.api.core.v1.ContainerStateTerminated", "finishedAt"),
        ("io.k8s.api.core.v1.Taint", "timeAdded"),
    ] {
        let p = prop(t, f);
        assert_eq!(p["type"], "string", "{t}.{f}: {p}");
        assert_eq!(p["format"], "date-time", "{t}.{f}: {p}");
    }
    for (t, f) in [
        (meta, "name"),
        (meta, "uid"),
        (meta, "resourceVersion"),
        ("io.k8s.api.core.v1.PodCondition", "reason"),
        ("io.k8s.api.core.v1.PodStatus", "hostIP"),
        ("io.k8s.api.core.v1.Container", "image"),
        ("io.k8s.api.core.v1.Taint", "key"),
    ] {
        let p = prop(t, f);
        assert_eq!(p["type"], "string", "{t}.{f}: {p}");
        assert!(p.get("format").is_none(), "{t}.{f}: {p}");
    }
    // Lists and maps of strings have plain string items.
    assert_eq!(prop(meta, "finalizers")["items"], json!({"type": "string"}));
    assert_eq!(
        prop(meta, "labels")["additionalProperties"],
        json!({"type": "string"})
    );
}
