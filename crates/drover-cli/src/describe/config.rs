//! `describe configmap|secret|namespace|serviceaccount` in kubectl's
//! layout. A Secret shows its keys and their sizes in bytes, never a value.

use super::layout::{annotations_multiline, events, labels_multiline, W};
use drover_api::validation::config::decode_base64;
#[cfg(test)]
use drover_api::Manifest;
use drover_api::{ConfigMap, Event, Namespace, ObjectMeta, Secret, ServiceAccount};
use std::time::SystemTime;

fn head(w: &mut W, meta: &ObjectMeta, namespaced: bool) {
    w.w(0, format!("Name:\t{}\n", meta.name));
    if namespaced {
        w.w(0, format!("Namespace:\t{}\n", meta.namespace));
    }
    labels_multiline(w, "Labels", &meta.labels);
    annotations_multiline(w, "Annotations", &meta.annotations);
}

/// `describe configmap`: every key with its value; binary keys with their
/// size.
pub fn describe_config_map(cm: &ConfigMap, evs: &[&Event], now: SystemTime) -> String {
    let mut w = W::default();
    head(&mut w, &cm.metadata, true);
    w.flush();
    let mut text = w.finish();
    text.push_str("\nData\n====\n");
    for (k, v) in &cm.data {
        // kubectl writes the value and a newline, whatever its end.
        text.push_str(&format!("{k}:\n----\n{v}\n"));
    }
    text.push_str("\nBinaryData\n====\n");
    for (k, v) in &cm.binary_data {
        let n = decode_base64(v).map_or(0, |b| b.len());
        text.push_str(&format!("{k}: {n} bytes\n"));
    }
    text.push('\n');
    let mut w = W::default();
    events(&mut w, evs, now);
    text.push_str(&w.finish());
    text
}

/// `describe secret`: its type, and each key with its size (never its
/// value).
pub fn describe_secret(s: &Secret, evs: &[&Event], now: SystemTime) -> String {
    let mut w = W::default();
    head(&mut w, &s.metadata, true);
    w.w(0, "\n");
    w.w(0, format!("Type:\t{}\n", s.r#type));
    w.flush();
    let mut text = w.finish();
    text.push_str("\nData\n====\n");
    let mut w = W::default();
    for (k, v) in &s.data {
        let n = decode_base64(v).map_or(0, |b| b.len());
        w.w(0, format!("{k}:\t{n} bytes\n"));
    }
    text.push_str(&w.finish());
    if !evs.is_empty() {
        let mut w = W::default();
        w.w(0, "\n");
        events(&mut w, evs, now);
        text.push_str(&w.finish());
    }
    text
}

/// `describe namespace`: its status (drover sets no quota or limits).
pub fn describe_namespace(ns: &Namespace) -> String {
    let mut w = W::default();
    head(&mut w, &ns.metadata, false);
    w.w(0, format!("Status:\t{}\n", ns.status.phase));
    w.w(0, "\nNo resource quota.\n\nNo LimitRange resource.\n");
    w.finish()
}

/// `describe serviceaccount`: drover issues no token for it.
pub fn describe_service_account(sa: &ServiceAccount, evs: &[&Event], now: SystemTime) -> String {
    let mut w = W::default();
    head(&mut w, &sa.metadata, true);
    w.w(0, "Image pull secrets:\t<none>\n");
    w.w(0, "Mountable secrets:\t<none>\n");
    w.w(0, "Tokens:\t<none>\n");
    events(&mut w, evs, now);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000)
    }

    #[test]
    fn a_config_map_shows_its_data_like_kubectl() {
        let mut cm = ConfigMap::default();
        cm.metadata.name = "app".into();
        cm.metadata.namespace = "default".into();
        cm.data.insert("a.conf".into(), "x=1\n".into());
        cm.binary_data.insert("bin".into(), "AAEC".into());
        assert_eq!(
            describe_config_map(&cm, &[], now()),
            "Name:         app\nNamespace:    default\nLabels:       <none>\nAnnotations:  <none>\n\nData\n====\na.conf:\n----\nx=1\n\n\nBinaryData\n====\nbin: 3 bytes\n\nEvents:  <none>\n"
        );
    }

    #[test]
    fn a_secret_shows_sizes_never_values() {
        let mut s = Secret::default();
        s.metadata.name = "db".into();
        s.metadata.namespace = "default".into();
        s.r#type = "Opaque".into();
        s.data.insert("password".into(), "aHVudGVyMjI=".into());
        s.data.insert("user".into(), "YWRtaW4=".into());
        let text = describe_secret(&s, &[], now());
        assert_eq!(
            text,
            "Name:         db\nNamespace:    default\nLabels:       <none>\nAnnotations:  <none>\n\nType:  Opaque\n\nData\n====\npassword:  8 bytes\nuser:      5 bytes\n"
        );
        assert!(!text.contains("hunter") && !text.contains("aHVudGVy") && !text.contains("admin"));
    }

    #[test]
    fn a_pod_shows_where_its_env_and_volumes_come_from() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  nodeName: n1\n  containers:\n  - name: c\n    image: i\n    envFrom: [{configMapRef: {name: app}, prefix: APP_}, {secretRef: {name: s, optional: true}}]\n    env:\n    - {name: P, valueFrom: {secretKeyRef: {name: db, key: password}}}\n    - {name: M, valueFrom: {configMapKeyRef: {name: app, key: mode, optional: true}}}\n  volumes:\n  - {name: cfg, configMap: {name: app}}\n  - {name: creds, secret: {secretName: db}}\n  - name: all\n    projected: {sources: [{secret: {name: db}}, {configMap: {name: app, optional: true}}, {downwardAPI: {items: [{path: podname, fieldRef: {fieldPath: metadata.name}}]}}]}\n";
        let Manifest::Pod(p) = drover_api::parse_manifests(yaml).unwrap().remove(0) else {
            panic!("a pod")
        };
        let text = super::super::describe_pod(&p, &[], None, now());
        for line in [
            "    Environment Variables from:\n      app  ConfigMap with prefix 'APP_'  Optional: false\n      s    Secret                        Optional: true\n",
            "      P:     <set to the key 'password' in secret 'db'>   Optional: false\n",
            "      M:     <set to the key 'mode' of config map 'app'>  Optional: true\n",
            "    Type:      ConfigMap (a volume populated by a ConfigMap)\n    Name:      app\n    Optional:  false\n",
            "    Type:        Secret (a volume populated by a Secret)\n    SecretName:  db\n    Optional:    false\n",
            "    Type:                Projected (a volume that contains injected data from multiple sources)\n    SecretName:          db\n    SecretOptionalName:  <nil>\n    ConfigMapName:       app\n    ConfigMapOptional:   true\n    DownwardAPI:         true\n",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
    }
}
