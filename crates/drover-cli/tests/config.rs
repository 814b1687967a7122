//! ConfigMaps, Secrets, Namespaces and ServiceAccounts through the CLI
//! against an in-process server: `create configmap|secret generic` from
//! literals and files, `get` with kubectl's columns, `describe` (a Secret's
//! values never shown), immutability, and a manifest that bundles
//! Namespace, ServiceAccount, ConfigMap, Secret and a DaemonSet applied as
//! a whole.

use clap::Parser;
use drover_api::FieldValidation;
use drover_cli::create::{self, CreateCmd};
use drover_cli::delete::{self, DeleteOptions};
use drover_cli::kubectl::{self, GetOptions, Source};
use drover_cli::printers::Output;
use drover_cli::Client;
use drover_server::Server;
use drover_testkit::{client_of, fast_options, Ran};
use std::time::Duration;

struct Cluster {
    _tmp: tempfile::TempDir,
    _server: Server,
    client: Client,
}

async fn start() -> Cluster {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut o = fast_options(tmp.path().join("m0"));
    o.controller.node_timeout = Duration::from_secs(3600);
    let server = Server::start(o).await.expect("server starts");
    let client = client_of(&server);
    Cluster {
        _tmp: tmp,
        _server: server,
        client,
    }
}

/// `drover create …` as the command line parses it.
#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    what: CreateCmd,
}

async fn create(c: &Client, args: &[&str]) -> Ran {
    let parsed = Args::try_parse_from(std::iter::once("create").chain(args.iter().copied()))
        .expect("arguments parse");
    let mut out = Vec::new();
    let r = create::create(c, &parsed.what, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

async fn get(c: &Client, kind: &str, output: Option<Output>) -> Ran {
    let o = GetOptions {
        kind: kind.into(),
        output,
        ..GetOptions::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = kubectl::get(c, &o, &mut out, &mut err).await;
    Ran::new(out, err, r)
}

async fn describe(c: &Client, kind: &str, name: &str) -> Ran {
    let mut out = Vec::new();
    let r = kubectl::describe(c, kind, &[name.to_string()], None, &mut out).await;
    Ran::new(out, Vec::new(), r)
}

async fn apply(c: &Client, text: &str) -> Ran {
    let s = vec![Source {
        name: "inline.yaml".into(),
        text: text.into(),
    }];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let r = kubectl::apply(
        c,
        &s,
        None,
        None,
        FieldValidation::Strict,
        &mut out,
        &mut err,
    )
    .await;
    Ran::new(out, err, r)
}

fn cells(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_describe_config_maps_and_secrets() {
    let cl = start().await;
    let c = &cl.client;
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("app.conf");
    std::fs::write(&conf, "level=debug\n").unwrap();
    let from_file = format!("--from-file={}", conf.display());
    let r = create(
        c,
        &["configmap", "app", "--from-literal=mode=fast", &from_file],
    )
    .await
    .ok();
    assert_eq!(r.out, "configmap/app created\n");
    create(c, &["cm", "app", "--from-literal=a=b"])
        .await
        .failed_with("Error from server (AlreadyExists): configmaps \"app\" already exists");
    let r = get(c, "cm", None).await.ok();
    let t = cells(&r.out);
    assert_eq!(t[0], ["NAME", "DATA", "AGE"]);
    assert_eq!(t[1][..2], ["app".to_string(), "2".to_string()]);
    let r = describe(c, "configmap", "app").await.ok();
    assert!(
        r.out.contains("Data\n====\napp.conf:\n----\nlevel=debug\n"),
        "{}",
        r.out
    );
    assert!(r.out.contains("mode:\n----\nfast\n"), "{}", r.out);

    let key_file = format!("--from-file=token={}", conf.display());
    let r = create(
        c,
        &[
            "secret",
            "generic",
            "db",
            "--from-literal=password=hunter22",
            &key_file,
        ],
    )
    .await
    .ok();
    assert_eq!(r.out, "secret/db created\n");
    let r = get(c, "secrets", None).await.ok();
    let t = cells(&r.out);
    assert_eq!(t[0], ["NAME", "TYPE", "DATA", "AGE"]);
    assert_eq!(t[1][..3], ["db".to_string(), "Opaque".into(), "2".into()]);
    assert!(!r.out.contains("hunter22"));
    let r = describe(c, "secret", "db").await.ok();
    assert!(r.out.contains("Type:  Opaque"), "{}", r.out);
    assert!(
        r.out.contains("password:  8 bytes\ntoken:     12 bytes\n"),
        "{}",
        r.out
    );
    assert!(!r.out.contains("hunter22") && !r.out.contains("aHVudGVy") && !r.out.contains("debug"));
    // -o yaml shows base64 data, as kubectl does.
    let r = get(c, "secret", Some(Output::Yaml)).await.ok();
    assert!(r.out.contains("password: aHVudGVyMjI="), "{}", r.out);
    let r = create(
        c,
        &[
            "secret",
            "generic",
            "tls",
            "--type=kubernetes.io/tls",
            "--from-literal=tls.crt=x",
        ],
    )
    .await;
    r.failed_with("data[tls.key]: Required value");
    // A client dry run prints the object and writes nothing.
    let r = create(
        c,
        &[
            "cm",
            "draft",
            "--from-literal=k=v",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    )
    .await
    .ok();
    assert!(
        r.out.contains("kind: ConfigMap") && r.out.contains("k: v"),
        "{}",
        r.out
    );
    describe(c, "cm", "draft").await.failed_with("not found");
    let mut out = Vec::new();
    let d = DeleteOptions {
        kind: Some("cm".into()),
        names: vec!["app".into()],
        ..Default::default()
    };
    delete::delete(c, &d, &mut out).await.unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "configmap \"app\" deleted\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_applies_whole_and_immutable_objects_stay() {
    let cl = start().await;
    let c = &cl.client;
    let bundle = "apiVersion: v1\nkind: Namespace\nmetadata: {name: logging}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: fluentd, namespace: logging}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: fluentd-config, namespace: logging}\ndata: {fluent.conf: '<source>'}\nimmutable: true\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: es, namespace: logging}\nstringData: {password: s3cret}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: fluentd, namespace: logging}\nspec:\n  selector: {matchLabels: {app: fluentd}}\n  template:\n    metadata: {labels: {app: fluentd}}\n    spec:\n      serviceAccountName: fluentd\n      containers:\n      - name: fluentd\n        image: local/busybox:1\n        envFrom: [{secretRef: {name: es}}]\n        volumeMounts: [{name: config, mountPath: /fluentd/etc}]\n      volumes:\n      - name: config\n        configMap: {name: fluentd-config}\n";
    let r = apply(c, bundle).await.ok();
    assert_eq!(
        r.out,
        "namespace/logging created\nserviceaccount/fluentd created\nconfigmap/fluentd-config created\nsecret/es created\ndaemonset.apps/fluentd created\n"
    );
    assert_eq!(r.err, "", "no warning: every field is known");
    let r = get(c, "ns", None).await.ok();
    let t = cells(&r.out);
    assert_eq!(t[0], ["NAME", "STATUS", "AGE"]);
    assert_eq!(t[1][..2], ["logging".to_string(), "Active".into()]);
    let mut o = GetOptions {
        kind: "sa".into(),
        namespace: Some("logging".into()),
        ..GetOptions::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    kubectl::get(c, &o, &mut out, &mut err).await.unwrap();
    let t = cells(&String::from_utf8(out).unwrap());
    assert_eq!(t[0], ["NAME", "SECRETS", "AGE"]);
    assert_eq!(t[1][..2], ["fluentd".to_string(), "0".into()]);
    // The immutable ConfigMap refuses a change, and the whole stream with it.
    let changed = bundle.replace("'<source>'", "'<match>'");
    apply(c, &changed)
        .await
        .failed_with("field is immutable when `immutable` is set");
    o.kind = "cm".into();
    o.output = Some(Output::Json);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    kubectl::get(c, &o, &mut out, &mut err).await.unwrap();
    assert!(String::from_utf8(out).unwrap().contains("<source>"));
    // A bad key is refused with the API server's words.
    apply(c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {'a/b': x}\n")
        .await
        .failed_with("ConfigMap \"bad\" is invalid: data: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters");
}
