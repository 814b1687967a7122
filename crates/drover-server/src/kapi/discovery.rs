//! Discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/GROUP` and
//! `/apis/GROUP/VERSION`, built from [`Kind::ALL`] (a new kind is listed
//! as soon as it is there). Only the legacy documents are served: kubectl
//! asks for the aggregated ones first (`as=APIGroupDiscoveryList`) and
//! reads a plain `application/json` answer as legacy discovery.

use drover_api::Kind;
use serde_json::{json, Value};

/// The Kubernetes version drover answers to `/version`: the API it
/// imitates (kubectl warns when client and server are more than one minor
/// version apart).
pub const KUBE_MINOR: &str = "32";

/// The groups drover serves, besides the core group: name and version.
pub fn groups() -> Vec<&'static str> {
    let mut g: Vec<&'static str> = Kind::ALL
        .iter()
        .map(|k| k.group())
        .filter(|g| !g.is_empty())
        .collect();
    g.sort_unstable();
    g.dedup();
    g
}

/// The kinds of a group version (`""`/`"v1"` is the core group).
pub fn kinds_of(group: &str, version: &str) -> Vec<Kind> {
    if version != "v1" {
        return Vec::new();
    }
    Kind::ALL
        .into_iter()
        .filter(|k| k.group() == group)
        .collect()
}

/// Whether the kind has a `status` subresource.
pub fn has_status(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Pod | Kind::DaemonSet | Kind::Deployment | Kind::ReplicaSet | Kind::Node
    )
}

/// Whether the kind has a `scale` subresource (an `autoscaling/v1` Scale).
pub fn has_scale(kind: Kind) -> bool {
    matches!(kind, Kind::Deployment | Kind::ReplicaSet)
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBE_MINOR,
        "gitVersion": format!("v1.{KUBE_MINOR}.0+drover-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// `/api`.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    })
}

fn group_value(name: &str) -> Value {
    let gv = json!({ "groupVersion": format!("{name}/v1"), "version": "v1" });
    json!({
        "name": name,
        "versions": [gv.clone()],
        "preferredVersion": gv,
    })
}

/// `/apis`.
pub fn group_list() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups().into_iter().map(group_value).collect::<Vec<_>>(),
    })
}

/// `/apis/GROUP`, or None for a group drover does not have.
pub fn group(name: &str) -> Option<Value> {
    groups().contains(&name).then(|| {
        let mut g = group_value(name);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        g
    })
}

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/api/v1` or `/apis/GROUP/v1`, or None for a group version drover does
/// not have.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let kinds = kinds_of(group, version);
    if kinds.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for k in kinds {
        let mut r = json!({
            "name": k.plural(),
            "singularName": k.name().to_ascii_lowercase(),
            "namespaced": k.namespaced(),
            "kind": k.name(),
            "verbs": VERBS,
        });
        if !k.short_names().is_empty() {
            r["shortNames"] = json!(k.short_names());
        }
        if matches!(
            k,
            Kind::Pod | Kind::DaemonSet | Kind::Deployment | Kind::ReplicaSet
        ) {
            r["categories"] = json!(["all"]);
        }
        resources.push(r);
        if k == Kind::Pod {
            resources.push(json!({
                "name": "pods/log",
                "singularName": "",
                "namespaced": true,
                "kind": "Pod",
                "verbs": ["get"],
            }));
            resources.push(json!({
                "name": "pods/exec",
                "singularName": "",
                "namespaced": true,
                "kind": "PodExecOptions",
                "verbs": ["create", "get"],
            }));
        }
        if has_status(k) {
            resources.push(json!({
                "name": format!("{}/status", k.plural()),
                "singularName": "",
                "namespaced": k.namespaced(),
                "kind": k.name(),
                "verbs": ["get", "patch", "update"],
            }));
        }
        if has_scale(k) {
            resources.push(json!({
                "name": format!("{}/scale", k.plural()),
                "singularName": "",
                "namespaced": true,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_discoverable_once() {
        let mut seen = Vec::new();
        let mut gvs = vec![("".to_string(), "v1")];
        gvs.extend(groups().into_iter().map(|g| (g.to_string(), "v1")));
        for (g, v) in &gvs {
            let list = resource_list(g, v).expect("served");
            for r in list["resources"].as_array().unwrap() {
                let name = r["name"].as_str().unwrap();
                if name.contains('/') {
                    continue;
                }
                seen.push(Kind::parse(name).unwrap());
            }
        }
        seen.sort();
        let mut all = Kind::ALL.to_vec();
        all.sort();
        assert_eq!(seen, all);
        assert!(resource_list("apps", "v2").is_none());
        assert!(resource_list("batch", "v1").is_none());
        assert!(group("apps").is_some());
        assert!(group("batch").is_none());
    }

    #[test]
    fn deployments_and_replica_sets_have_status_and_scale() {
        let apps = resource_list("apps", "v1").expect("served");
        let find = |name: &str| {
            apps["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} in apps/v1"))
        };
        for (plural, short) in [("deployments", "deploy"), ("replicasets", "rs")] {
            let r = find(plural);
            assert_eq!(r["shortNames"], json!([short]));
            assert_eq!(r["categories"], json!(["all"]));
            assert_eq!(r["verbs"], json!(VERBS));
            let scale = find(&format!("{plural}/scale"));
            assert_eq!(
                (&scale["group"], &scale["version"], &scale["kind"]),
                (&json!("autoscaling"), &json!("v1"), &json!("Scale"))
            );
            find(&format!("{plural}/status"));
        }
        assert!(!has_scale(Kind::DaemonSet));
    }
}
