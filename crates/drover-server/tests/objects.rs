//! The object API against a one-member server: apply, get, list, update with
//! compare-and-swap, delete, watch, and manifests that are refused whole.

use drover_proto::v1::objects_client::ObjectsClient;
use drover_proto::v1::{self as pb};
use drover_server::Server;
use drover_testkit::{authed, grpc_channel, loopback_options};
use serde_json::Value;
use tonic::transport::Channel;
use tonic::{Code, Request};

const DS: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  labels: {team: infra}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - name: agent
        image: busybox:1.36
        stdin: true
"#;

struct Api {
    _tmp: tempfile::TempDir,
    server: Server,
    c: ObjectsClient<Channel>,
    token: String,
}

impl Api {
    async fn start() -> Api {
        let tmp = tempfile::tempdir().unwrap();
        let server = Server::start(loopback_options(tmp.path().join("s")))
            .await
            .unwrap();
        let ch = grpc_channel(server.grpc_addr, server.trust.ca.cert_pem()).await;
        Api {
            token: server.identity.admin_token.clone(),
            _tmp: tmp,
            server,
            c: ObjectsClient::new(ch),
        }
    }

    fn req<T>(&self, body: T) -> Request<T> {
        authed(body, &self.token)
    }

    async fn apply(&mut self, text: &str) -> Result<Vec<pb::ApplyResult>, tonic::Status> {
        let r = self.req(pb::ApplyRequest {
            manifests: text.into(),
            // An empty mode: strict, the default.
            ..Default::default()
        });
        Ok(self.c.apply(r).await?.into_inner().results)
    }

    async fn get(&mut self, kind: &str, name: &str) -> Result<Value, tonic::Status> {
        let r = self.req(pb::ObjectRef {
            kind: kind.into(),
            namespace: String::new(),
            name: name.into(),
        });
        let o = self.c.get(r).await?.into_inner().object;
        Ok(serde_json::from_slice(&o).unwrap())
    }

    async fn list(&mut self, kind: &str, sel: &str) -> Vec<Value> {
        let r = self.req(pb::ListObjectsRequest {
            kind: kind.into(),
            namespace: String::new(),
            label_selector: sel.into(),
        });
        self.c
            .list(r)
            .await
            .unwrap()
            .into_inner()
            .items
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap())
            .collect()
    }
}

#[tokio::test]
async fn apply_creates_then_configures_then_is_unchanged() {
    let mut api = Api::start().await;
    let r = api.apply(DS).await.unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].reference, "daemonset.apps/agent");
    assert_eq!(r[0].action, "created");
    assert!(
        r[0].warnings
            .iter()
            .any(|w| w.contains("containers[0].stdin")),
        "{:?}",
        r[0].warnings
    );
    let ds = api.get("ds", "agent").await.unwrap();
    let meta = &ds["metadata"];
    assert_eq!(meta["namespace"], "default");
    assert_eq!(meta["generation"], 1);
    assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    let rv1: u64 = meta["resourceVersion"].as_str().unwrap().parse().unwrap();
    // The unknown field is kept, not dropped.
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["stdin"],
        true
    );

    assert_eq!(api.apply(DS).await.unwrap()[0].action, "unchanged");
    let changed = DS.replace("busybox:1.36", "busybox:1.37");
    assert_eq!(api.apply(&changed).await.unwrap()[0].action, "configured");
    let ds2 = api.get("daemonsets.apps", "agent").await.unwrap();
    assert_eq!(ds2["metadata"]["generation"], 2);
    assert_eq!(ds2["metadata"]["uid"], meta["uid"]);
    let rv2: u64 = ds2["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    // Labels only: configured, generation unchanged.
    let relabeled = changed.replace("team: infra", "team: edge");
    assert_eq!(api.apply(&relabeled).await.unwrap()[0].action, "configured");
    assert_eq!(
        api.get("ds", "agent").await.unwrap()["metadata"]["generation"],
        2
    );
    assert_eq!(api.list("ds", "team=edge").await.len(), 1);
    assert_eq!(api.list("ds", "team=infra").await.len(), 0);
    api.server.shutdown().await;
}

#[tokio::test]
async fn a_bad_document_refuses_the_whole_stream() {
    let mut api = Api::start().await;
    let stream = format!(
        "{DS}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: Bad_Name}}\nspec:\n  containers: [{{name: c, image: x}}]\n"
    );
    let e = api.apply(&stream).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("metadata.name"), "{}", e.message());
    assert!(api.list("ds", "").await.is_empty(), "nothing was written");
    // Changing an immutable selector is refused and changes nothing.
    api.apply(DS).await.unwrap();
    let moved = DS
        .replace("matchLabels: {app: agent}", "matchLabels: {app: other}")
        .replace("labels: {app: agent}", "labels: {app: other}");
    let e = api.apply(&moved).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("spec.selector"), "{}", e.message());
    let ds = api.get("ds", "agent").await.unwrap();
    assert_eq!(ds["spec"]["selector"]["matchLabels"]["app"], "agent");
    // An unsupported kind names the document.
    let e = api
        .apply("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: d}\n")
        .await
        .unwrap_err();
    assert!(e.message().contains("StatefulSet"), "{}", e.message());
    api.server.shutdown().await;
}

#[tokio::test]
async fn update_is_compare_and_swap_and_delete_answers_the_object() {
    let mut api = Api::start().await;
    api.apply("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
        .await
        .unwrap();
    let mut node = api.get("no", "n1").await.unwrap();
    let stale = node.clone();
    node["metadata"]["labels"] = serde_json::json!({"disk": "ssd"});
    let r = api.req(pb::UpdateObjectRequest {
        object: serde_json::to_vec(&node).unwrap(),
    });
    api.c.update(r).await.unwrap();
    // The same resourceVersion again: the object has been modified.
    let mut again = stale;
    again["spec"] = serde_json::json!({"unschedulable": true});
    let r = api.req(pb::UpdateObjectRequest {
        object: serde_json::to_vec(&again).unwrap(),
    });
    let e = api.c.update(r).await.unwrap_err();
    assert_eq!(e.code(), Code::Aborted);
    assert!(e.message().contains("has been modified"), "{}", e.message());
    let n = api.get("nodes", "n1").await.unwrap();
    assert_eq!(n["metadata"]["labels"]["disk"], "ssd");
    assert!(n["spec"]["unschedulable"].is_null());

    let r = api.req(pb::ObjectRef {
        kind: "node".into(),
        namespace: String::new(),
        name: "n1".into(),
    });
    let gone: Value =
        serde_json::from_slice(&api.c.delete(r).await.unwrap().into_inner().object).unwrap();
    assert_eq!(gone["metadata"]["name"], "n1");
    let e = api.get("node", "n1").await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(e.message(), "nodes \"n1\" not found");
    api.server.shutdown().await;
}

#[tokio::test]
async fn watch_reports_added_modified_deleted() {
    let mut api = Api::start().await;
    let r = api.req(pb::ListObjectsRequest {
        kind: "ds".into(),
        namespace: String::new(),
        label_selector: String::new(),
    });
    let rv = api.c.list(r).await.unwrap().into_inner().resource_version;
    let r = api.req(pb::WatchObjectsRequest {
        kind: "ds".into(),
        namespace: "default".into(),
        resource_version: rv,
    });
    let mut w = api.c.watch(r).await.unwrap().into_inner();
    api.apply(DS).await.unwrap();
    api.apply(&DS.replace("1.36", "1.37")).await.unwrap();
    let r = api.req(pb::ObjectRef {
        kind: "ds".into(),
        namespace: String::new(),
        name: "agent".into(),
    });
    api.c.delete(r).await.unwrap();
    // The controller writes the DaemonSet's status too: more MODIFIED
    // events may come in between.
    let mut kinds = Vec::new();
    while kinds.last().map(String::as_str) != Some("DELETED") {
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), w.message())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        let o: Value = serde_json::from_slice(&e.object).unwrap();
        assert_eq!(o["metadata"]["name"], "agent");
        kinds.push(e.r#type);
    }
    assert_eq!(kinds[0], "ADDED");
    assert!(
        kinds[1..kinds.len() - 1].iter().all(|k| k == "MODIFIED"),
        "{kinds:?}"
    );
    assert!(kinds.len() >= 3, "{kinds:?}");
    api.server.shutdown().await;
}
