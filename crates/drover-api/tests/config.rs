//! ConfigMaps, Secrets, Namespaces and ServiceAccounts: parsing, defaults
//! (stringData folded into data), validation as the API server's, and the
//! kubelet's resolution of env and volumes (pure).

use drover_api::defaults::default_manifest;
use drover_api::pod_config::{references, resolve_env, resolve_volumes, ConfigSource};
use drover_api::validation::{validate_manifest, validate_manifest_update};
use drover_api::{parse_manifests, ConfigMap, Manifest, Pod, Secret};
use std::collections::BTreeMap;

fn one(yaml: &str) -> Manifest {
    let mut v = parse_manifests(yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.len(), 1);
    let mut m = v.remove(0);
    default_manifest(&mut m);
    m
}

fn errors(m: &Manifest) -> String {
    validate_manifest(m)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn a_config_map_is_read_and_its_keys_checked() {
    let m = one("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata:\n  a.conf: x\n  B_2: yy\nbinaryData:\n  bin: AAEC\n");
    assert_eq!(errors(&m), "");
    let Manifest::ConfigMap(cm) = &m else {
        panic!()
    };
    assert_eq!(cm.metadata.namespace, "default");
    assert_eq!(cm.data["a.conf"], "x");
    for bad in ["a/b", "..x", ".", "sp ace"] {
        let m = one(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: app}}\ndata:\n  {bad:?}: x\n"
        ));
        let e = errors(&m);
        assert!(
            e.contains("ConfigMap \"app\" is invalid: data: Invalid value"),
            "{bad}: {e}"
        );
    }
    let e = errors(&one(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {k: x}\nbinaryData: {k: AAEC}\n",
    ));
    assert!(e.contains("duplicate of key present in data"), "{e}");
    let e = errors(&one(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\nbinaryData: {k: '!!notbase64'}\n",
    ));
    assert!(
        e.contains("binaryData[k]: Invalid value") && e.contains("base64"),
        "{e}"
    );
}

#[test]
fn a_megabyte_is_the_limit() {
    let big = "x".repeat(1024 * 1024);
    let mut cm = ConfigMap::default();
    cm.metadata.name = "big".into();
    cm.metadata.namespace = "default".into();
    cm.data.insert("k".into(), big);
    let e = validate_manifest(&Manifest::ConfigMap(Box::new(cm.clone()))).unwrap_err();
    assert!(
        e.to_string()
            .contains("Too long: must have at most 1048576 bytes"),
        "{e}"
    );
    cm.data.insert("k".into(), "x".repeat(1000));
    assert!(validate_manifest(&Manifest::ConfigMap(Box::new(cm))).is_ok());
    let mut s = Secret::default();
    s.metadata.name = "big".into();
    s.metadata.namespace = "default".into();
    s.string_data
        .insert("k".into(), "y".repeat(1024 * 1024 + 1));
    let mut m = Manifest::Secret(Box::new(s));
    default_manifest(&mut m);
    assert!(errors(&m).contains("Too long"), "{}", errors(&m));
}

#[test]
fn string_data_is_folded_into_data_and_the_type_defaults_to_opaque() {
    let m = one("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {user: admin}\ndata: {pass: aHVudGVyMg==}\n");
    let Manifest::Secret(s) = &m else { panic!() };
    assert_eq!(s.r#type, "Opaque");
    assert!(s.string_data.is_empty());
    assert_eq!(s.data["user"], "YWRtaW4=");
    assert_eq!(s.data["pass"], "aHVudGVyMg==");
    assert_eq!(errors(&m), "");
    let e = errors(&one("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/tls\ndata: {tls.crt: eA==}\n"));
    assert!(e.contains("data[tls.key]: Required value"), "{e}");
}

#[test]
fn immutable_objects_refuse_changes() {
    let old = one(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: a}\nimmutable: true\n",
    );
    let new = one(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: b}\nimmutable: true\n",
    );
    let e = validate_manifest_update(&new, &old)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field is immutable when `immutable` is set"),
        "{e}"
    );
    let unset = one("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: a}\n");
    assert!(validate_manifest_update(&unset, &old).is_err());
    assert!(validate_manifest_update(&old, &old).is_ok());
    // A mutable one changes freely, and may become immutable.
    assert!(validate_manifest_update(&new, &unset).is_ok());
    let s1 = one("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: a}\n");
    let s2 =
        one("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: Other\nstringData: {k: a}\n");
    let e = validate_manifest_update(&s2, &s1).unwrap_err().to_string();
    assert!(
        e.contains("type: Invalid value: \"Other\": field is immutable"),
        "{e}"
    );
}

#[test]
fn namespaces_and_service_accounts_parse_with_a_daemon_set() {
    let stream = "apiVersion: v1\nkind: Namespace\nmetadata: {name: logging}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: fluentd, namespace: logging}\n";
    let v = parse_manifests(stream).unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].namespace(), "");
    assert_eq!(v[1].reference(), "serviceaccount/fluentd");
    let bad = one("apiVersion: v1\nkind: Namespace\nmetadata: {name: Bad_Name}\n");
    assert!(validate_manifest(&bad).is_err());
}

#[test]
fn pod_fields_are_validated() {
    let pod = |extra: &str| {
        one(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  nodeName: node1\n  containers:\n  - name: c\n    image: i\n{extra}"
        ))
    };
    let ok = pod("    envFrom:\n    - configMapRef: {name: app}\n      prefix: APP_\n    env:\n    - name: X\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n  volumes:\n  - name: v\n    configMap: {name: app, items: [{key: a, path: dir/a}], defaultMode: 0400}\n");
    assert_eq!(errors(&ok), "");
    let e = errors(&pod("  volumes:\n  - name: v\n    configMap: {name: app, items: [{key: a, path: ../a}], defaultMode: 01000}\n"));
    assert!(
        e.contains("items[0].path: Invalid value: \"../a\": must not contain '..'"),
        "{e}"
    );
    assert!(
        e.contains("defaultMode: Invalid value: 512: must be a number between 0 and 0777"),
        "{e}"
    );
    let e = errors(&pod(
        "  volumes:\n  - name: v\n    secret: {}\n    emptyDir: {}\n",
    ));
    assert!(e.contains("secret.secretName: Required value"), "{e}");
    assert!(e.contains("may not specify more than 1 volume type"), "{e}");
    let e = errors(&pod("    envFrom:\n    - prefix: X_\n"));
    assert!(
        e.contains("must specify one of: `configMapRef` or `secretRef`"),
        "{e}"
    );
    let e = errors(&pod(
        "    env:\n    - name: X\n      valueFrom: {configMapKeyRef: {name: app}}\n",
    ));
    assert!(e.contains("configMapKeyRef.key: Required value"), "{e}");
}

struct Objects(BTreeMap<String, ConfigMap>, BTreeMap<String, Secret>);

impl ConfigSource for Objects {
    fn config_map(&self, ns: &str, name: &str) -> Option<&ConfigMap> {
        self.0.get(&format!("{ns}/{name}"))
    }
    fn secret(&self, ns: &str, name: &str) -> Option<&Secret> {
        self.1.get(&format!("{ns}/{name}"))
    }
}

fn objects() -> Objects {
    let Manifest::ConfigMap(cm) = one("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: '1', b: 'x$(Y)', 1x: z}\n") else { panic!() };
    let Manifest::Secret(s) =
        one("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: hunter2}\n")
    else {
        panic!()
    };
    Objects(
        [("default/app".to_string(), *cm)].into(),
        [("default/s".to_string(), *s)].into(),
    )
}

fn pod_of(yaml: &str) -> Pod {
    let Manifest::Pod(p) = one(yaml) else {
        panic!()
    };
    *p
}

#[test]
fn env_is_resolved_as_the_kubelet_does() {
    let pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeName: node1\n  containers:\n  - name: c\n    image: i\n    envFrom:\n    - configMapRef: {name: app}\n      prefix: APP_\n    - secretRef: {name: gone, optional: true}\n    env:\n    - name: APP_a\n      value: over\n    - name: PASS\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n    - name: OPT\n      valueFrom: {configMapKeyRef: {name: app, key: nokey, optional: true}}\n");
    let r = references(&pod.spec);
    assert_eq!(r.config_maps.iter().collect::<Vec<_>>(), ["app"]);
    assert_eq!(r.secrets.iter().collect::<Vec<_>>(), ["gone", "s"]);
    let env = resolve_env(&pod, &pod.spec.containers[0], &objects()).unwrap();
    let pairs: Vec<(&str, &str)> = env
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_str()))
        .collect();
    // `$` is escaped for the runtime's $(VAR) expansion; env overrides
    // envFrom.
    assert_eq!(
        pairs,
        [
            ("APP_1x", "z"),
            ("APP_b", "x$$(Y)"),
            ("APP_a", "over"),
            ("PASS", "hunter2")
        ]
    );
    // Without a prefix, 1x is not a variable name: skipped, as the kubelet does.
    let mut bare = pod.spec.containers[0].clone();
    bare.env.clear();
    bare.env_from[0].prefix.clear();
    let env = resolve_env(&pod, &bare, &objects()).unwrap();
    let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);

    let missing = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeName: node1\n  containers:\n  - name: c\n    image: i\n    env:\n    - name: X\n      valueFrom: {configMapKeyRef: {name: app, key: nokey}}\n");
    let e = resolve_env(&missing, &missing.spec.containers[0], &objects()).unwrap_err();
    assert_eq!(
        e.message,
        "couldn't find key nokey in ConfigMap default/app"
    );
    let missing = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeName: node1\n  containers:\n  - name: c\n    image: i\n    envFrom: [{secretRef: {name: x}}]\n");
    let e = resolve_env(&missing, &missing.spec.containers[0], &objects()).unwrap_err();
    assert_eq!(e.message, "secret \"x\" not found");
}

#[test]
fn volumes_are_resolved_with_items_modes_and_optional() {
    let pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: web}}\nspec:\n  nodeName: node1\n  containers: [{name: c, image: i}]\n  volumes:\n  - name: all\n    configMap: {name: app, defaultMode: 0600}\n  - name: some\n    secret: {secretName: s, items: [{key: k, path: sub/pass, mode: 0400}]}\n  - name: opt\n    configMap: {name: gone, optional: true}\n  - name: proj\n    projected:\n      sources:\n      - configMap: {name: app, items: [{key: a, path: a.txt}]}\n      - secret: {name: s}\n      - downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}\n");
    let v = resolve_volumes(&pod, &objects()).unwrap();
    let all = &v["all"];
    assert!(!all.secret);
    assert_eq!(all.files.keys().collect::<Vec<_>>(), ["1x", "a", "b"]);
    assert_eq!(all.files["a"].mode, 0o600);
    let some = &v["some"];
    assert!(some.secret);
    assert_eq!(some.files["sub/pass"].data, b"hunter2");
    assert_eq!(some.files["sub/pass"].mode, 0o400);
    assert!(v["opt"].files.is_empty());
    let proj = &v["proj"];
    assert!(proj.secret);
    assert_eq!(
        proj.files.keys().collect::<Vec<_>>(),
        ["a.txt", "k", "labels"]
    );
    assert_eq!(proj.files["labels"].data, b"app=\"web\"\n");
    assert_eq!(proj.files["k"].mode, 0o644);

    let missing = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  nodeName: node1\n  containers: [{name: c, image: i}]\n  volumes:\n  - name: v\n    configMap: {name: app, items: [{key: nokey, path: x}]}\n");
    let e = resolve_volumes(&missing, &objects()).unwrap_err();
    assert_eq!(
        e.message,
        "configmap references non-existent config key: nokey"
    );
    assert_eq!(e.volume.as_deref(), Some("v"));
}

#[test]
fn a_secret_key_ref_is_required_unless_optional() {
    let pod = |secret: &str, key: &str, optional: &str| {
        pod_of(&format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  nodeName: node1\n  containers:\n  - name: c\n    image: i\n    env:\n    - {{name: A, value: x}}\n    - name: PASS\n      valueFrom: {{secretKeyRef: {{name: {secret}, key: {key}{optional}}}}}\n"))
    };
    let names = |p: &Pod| -> Vec<(String, String)> {
        resolve_env(p, &p.spec.containers[0], &objects())
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect()
    };
    let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
    // Present: its value, whether optional or not.
    for optional in ["", ", optional: false", ", optional: true"] {
        assert_eq!(
            names(&pod("s", "k", optional)),
            [pair("A", "x"), pair("PASS", "hunter2")],
            "{optional}"
        );
    }
    // Missing key or Secret: an error, unless optional (then left out).
    for optional in ["", ", optional: false"] {
        let p = pod("s", "nokey", optional);
        let e = resolve_env(&p, &p.spec.containers[0], &objects()).unwrap_err();
        assert_eq!(e.message, "couldn't find key nokey in Secret default/s");
        assert_eq!(e.volume, None);
        let p = pod("gone", "k", optional);
        let e = resolve_env(&p, &p.spec.containers[0], &objects()).unwrap_err();
        assert_eq!(e.message, "secret \"gone\" not found");
    }
    assert_eq!(
        names(&pod("s", "nokey", ", optional: true")),
        [pair("A", "x")]
    );
    assert_eq!(
        names(&pod("gone", "k", ", optional: true")),
        [pair("A", "x")]
    );
}

#[test]
fn references_are_empty_only_without_config_maps_and_secrets() {
    let spec = |extra: &str| {
        pod_of(&format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  nodeName: node1\n  containers:\n  - name: c\n    image: i\n{extra}"))
            .spec
    };
    let none = references(&spec(
        "    env: [{name: A, value: x}]\n  volumes:\n  - {name: v, emptyDir: {}}\n",
    ));
    assert!(none.is_empty(), "{none:?}");
    let cm = references(&spec("    envFrom: [{configMapRef: {name: app}}]\n"));
    assert!(!cm.is_empty());
    assert_eq!(cm.config_maps.iter().collect::<Vec<_>>(), ["app"]);
    let secret = references(&spec(
        "  volumes:\n  - name: v\n    projected: {sources: [{secret: {name: s}}]}\n",
    ));
    assert!(!secret.is_empty());
    assert!(secret.config_maps.is_empty());
    assert_eq!(secret.secrets.iter().collect::<Vec<_>>(), ["s"]);
}

#[test]
fn downward_api_files_hold_the_pod_name_namespace_uid_labels_and_annotations() {
    let mut pod = pod_of("apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web, tier: front}, annotations: {note: hi}}\nspec:\n  nodeName: node1\n  containers: [{name: c, image: i}]\n  volumes:\n  - name: info\n    projected:\n      sources:\n      - downwardAPI:\n          items:\n          - {path: name, fieldRef: {fieldPath: metadata.name}}\n          - {path: ns, fieldRef: {fieldPath: metadata.namespace}}\n          - {path: uid, fieldRef: {fieldPath: metadata.uid}}\n          - {path: labels, fieldRef: {fieldPath: metadata.labels}}\n          - {path: annotations, fieldRef: {fieldPath: metadata.annotations}}\n");
    pod.metadata.uid = "6b1f3c2e-8d4a-4f0e-9c7b-2a5d1e0f3b9c".into();
    let v = resolve_volumes(&pod, &objects()).unwrap();
    let files: Vec<(&str, &[u8])> = v["info"]
        .files
        .iter()
        .map(|(k, f)| (k.as_str(), f.data.as_slice()))
        .collect();
    assert_eq!(
        files,
        [
            ("annotations", b"note=\"hi\"\n".as_slice()),
            ("labels", b"app=\"web\"\ntier=\"front\"\n".as_slice()),
            ("name", b"web".as_slice()),
            ("ns", b"default".as_slice()),
            ("uid", b"6b1f3c2e-8d4a-4f0e-9c7b-2a5d1e0f3b9c".as_slice()),
        ]
    );
    assert!(!v["info"].secret);
}

/// As the kubelet: a volume's missing Secret or ConfigMap (or a missing key
/// of its items) stops the pod unless the source is `optional: true`; then
/// the volume holds what exists (nothing for a missing object).
#[test]
fn a_secret_or_config_map_volume_is_required_unless_optional() {
    let volume = |source: &str| {
        pod_of(&format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  nodeName: node1\n  containers: [{{name: c, image: i}}]\n  volumes:\n  - name: v\n    {source}\n"))
    };
    let resolve = |source: &str| resolve_volumes(&volume(source), &objects());
    for optional in ["", ", optional: false"] {
        let e = resolve(&format!("secret: {{secretName: gone{optional}}}")).unwrap_err();
        assert_eq!(e.message, "secret \"gone\" not found", "{optional}");
        assert_eq!(e.volume.as_deref(), Some("v"));
        let e = resolve(&format!(
            "secret: {{secretName: s, items: [{{key: nokey, path: x}}]{optional}}}"
        ))
        .unwrap_err();
        assert_eq!(
            e.message,
            "secret references non-existent secret key: nokey"
        );
        let e = resolve(&format!("configMap: {{name: gone{optional}}}")).unwrap_err();
        assert_eq!(e.message, "configmap \"gone\" not found", "{optional}");
        let e = resolve(&format!(
            "projected: {{sources: [{{secret: {{name: gone{optional}}}}}]}}"
        ))
        .unwrap_err();
        assert_eq!(e.message, "secret \"gone\" not found", "{optional}");
        let e = resolve(&format!(
            "projected: {{sources: [{{configMap: {{name: gone{optional}}}}}]}}"
        ))
        .unwrap_err();
        assert_eq!(e.message, "configmap \"gone\" not found", "{optional}");
    }
    // Optional: a missing object gives an empty volume (a tmpfs for a
    // Secret), a missing key is left out.
    let v = resolve("secret: {secretName: gone, optional: true}").unwrap();
    assert!(v["v"].files.is_empty());
    assert!(v["v"].secret);
    let v = resolve(
        "secret: {secretName: s, optional: true, items: [{key: nokey, path: x}, {key: k, path: z}]}",
    )
    .unwrap();
    assert_eq!(v["v"].files.keys().collect::<Vec<_>>(), ["z"]);
    assert_eq!(v["v"].files["z"].data, b"hunter2");
    let v = resolve("configMap: {name: gone, optional: true}").unwrap();
    assert!(v["v"].files.is_empty());
    assert!(!v["v"].secret);
    let v = resolve(
        "projected: {sources: [{secret: {name: gone, optional: true}}, {configMap: {name: gone, optional: true}}, {secret: {name: s}}]}",
    )
    .unwrap();
    assert_eq!(v["v"].files.keys().collect::<Vec<_>>(), ["k"]);
    // A present Secret is read whether optional or not.
    for optional in ["", ", optional: false", ", optional: true"] {
        let v = resolve(&format!("secret: {{secretName: s{optional}}}")).unwrap();
        assert_eq!(v["v"].files["k"].data, b"hunter2", "{optional}");
    }
}
