//! What `get` prints: kubectl's tables (with `-o wide` and `-A`, the label
//! columns of `-L` and `--show-labels`), and the `-o json`, `-o yaml`,
//! `-o name`, `-o jsonpath[-as-json]=` and `-o custom-columns=` forms. The
//! columns themselves are `drover_api::columns` (shared with the server's
//! `Table` answers).
//!
//! Everything here is pure: objects and "now" in, text out.

use crate::custom_columns::{self, Column, LabelColumns};
use crate::jsonpath::Template;
use crate::table;
use crate::table::Widths;
use anyhow::Result;
pub use drover_api::columns::*;
use drover_api::{Kind, Manifest};
use serde_json::{json, Value};
use std::io::Write;

/// `-o FORMAT`.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// The table with more columns.
    Wide,
    /// JSON with Kubernetes field names: the object, or a `List`.
    Json,
    /// YAML, the same content as JSON.
    Yaml,
    /// `kind.group/name`, one per line.
    Name,
    /// `jsonpath=TEMPLATE`: kubectl's template over the object or the `List`.
    JsonPath(Template),
    /// `jsonpath-as-json=TEMPLATE`: each path's results as a JSON list.
    JsonPathAsJson(Template),
    /// `custom-columns=HEADER:PATH,…`.
    CustomColumns(Vec<Column>),
}

/// The formats `-o` takes, in kubectl's words.
const FORMATS: &str = "custom-columns, json, jsonpath, jsonpath-as-json, name, wide, yaml";

impl Output {
    /// Reads `-o`'s value as kubectl does.
    pub fn parse(s: &str) -> Result<Output, String> {
        let (format, arg) = match s.split_once('=') {
            Some((f, a)) => (f, Some(a)),
            None => (s, None),
        };
        let template = |what: &str| -> Result<Template, String> {
            match arg {
                None | Some("") => Err(format!(
                    "template format specified but no template given (-o {what}='{{.metadata.name}}')"
                )),
                Some(t) => Template::parse(t).map_err(|e| format!("error parsing jsonpath {t}, {e}")),
            }
        };
        Ok(match (format, arg) {
            ("wide", None) => Output::Wide,
            ("json", None) => Output::Json,
            ("yaml", None) => Output::Yaml,
            ("name", None) => Output::Name,
            ("jsonpath", _) => Output::JsonPath(template("jsonpath")?),
            ("jsonpath-as-json", _) => Output::JsonPathAsJson(template("jsonpath-as-json")?),
            ("custom-columns", _) => {
                Output::CustomColumns(custom_columns::parse(arg.unwrap_or(""))?)
            }
            _ => {
                return Err(format!(
                    "unable to match a printer suitable for the output format {s:?}, allowed formats are: {FORMATS}"
                ))
            }
        })
    }

    /// Whether this is a table (the default, wide or custom columns).
    pub fn is_table(o: Option<&Output>) -> bool {
        matches!(
            o,
            None | Some(Output::Wide) | Some(Output::CustomColumns(_))
        )
    }
}

/// `-o jsonpath-as-json`: each path's results as a JSON list, as kubectl.
pub fn jsonpath_as_json(t: &Template, v: &Value) -> String {
    t.results(v)
        .into_iter()
        .map(|r| to_json(&Value::Array(r.into_iter().cloned().collect())))
        .collect()
}

/// A whole table, header included.
pub fn table(kind: Kind, items: &[Manifest], o: &TableOptions) -> String {
    let rows: Vec<Vec<String>> = items.iter().map(|m| row(m, o)).collect();
    table::render(&headers(kind, o), &rows)
}

/// The object as JSON, keys sorted like kubectl's output.
pub fn object_value(m: &Manifest) -> Value {
    serde_json::to_value(m).unwrap_or(Value::Null)
}

/// What `-o json|yaml` prints for a list (kubectl's shape).
pub fn list_value(items: &[Manifest]) -> Value {
    json!({
        "apiVersion": "v1",
        "items": items.iter().map(object_value).collect::<Vec<_>>(),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    })
}

/// JSON as kubectl prints it: four-space indentation, a final newline.
pub fn to_json(v: &Value) -> String {
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    serde::Serialize::serialize(v, &mut ser).expect("a JSON value always serializes");
    let mut s = String::from_utf8(buf).expect("serde_json writes UTF-8");
    s.push('\n');
    s
}

/// YAML as kubectl prints it (block style, lists not indented under their
/// key).
pub fn to_yaml(v: &Value) -> String {
    let opts = serde_saphyr::ser_options! {
        prefer_block_scalars: false,
    };
    let mut s = serde_saphyr::to_string_with_options(v, opts)
        .unwrap_or_else(|e| format!("# cannot write YAML: {e}\n"));
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// `-o name`: `daemonset.apps/x`.
pub fn name(m: &Manifest) -> String {
    m.reference()
}

/// Prints objects in a `get` output format.
#[allow(clippy::too_many_arguments)]
pub fn print_objects(
    kind: Kind,
    items: &[Manifest],
    single: bool,
    output: Option<&Output>,
    topts: &TableOptions,
    extra: &LabelColumns,
    widths: &mut Widths,
    out: &mut impl Write,
) -> Result<()> {
    let whole = || {
        if single && items.len() == 1 {
            object_value(&items[0])
        } else {
            list_value(items)
        }
    };
    match output {
        None | Some(Output::Wide) | Some(Output::CustomColumns(_)) => {
            if !items.is_empty() {
                let rows: Vec<Vec<String>> = items
                    .iter()
                    .map(|m| table_row(m, output, topts, extra))
                    .collect();
                let headers = table_headers(kind, output, topts, extra);
                let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
                write!(out, "{}", table::render_with(widths, &headers, &rows))?;
            }
        }
        Some(Output::Json) => write!(out, "{}", to_json(&whole()))?,
        Some(Output::Yaml) => write!(out, "{}", to_yaml(&whole()))?,
        Some(Output::JsonPath(t)) => write!(out, "{}", t.render(&whole()))?,
        Some(Output::JsonPathAsJson(t)) => write!(out, "{}", jsonpath_as_json(t, &whole()))?,
        Some(Output::Name) => {
            for m in items {
                writeln!(out, "{}", name(m))?;
            }
        }
    }
    Ok(())
}

/// The headers of a `get` table: the kind's (or the custom columns), then
/// the label columns.
pub fn table_headers(
    kind: Kind,
    output: Option<&Output>,
    topts: &TableOptions,
    extra: &LabelColumns,
) -> Vec<String> {
    if let Some(Output::CustomColumns(cols)) = output {
        return custom_columns::headers(cols);
    }
    let mut h: Vec<String> = headers(kind, topts)
        .into_iter()
        .map(str::to_string)
        .collect();
    h.extend(extra.headers());
    h
}

/// One row of a `get` table, as [`table_headers`] heads it.
pub fn table_row(
    m: &Manifest,
    output: Option<&Output>,
    topts: &TableOptions,
    extra: &LabelColumns,
) -> Vec<String> {
    if let Some(Output::CustomColumns(cols)) = output {
        return custom_columns::cells(cols, m);
    }
    let mut r = row(m, topts);
    r.extend(extra.cells(m));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::parse_manifests;
    use drover_api::Pod;
    use std::time::SystemTime;

    fn now() -> SystemTime {
        crate::timefmt::parse_time("2024-05-03T16:00:00Z").unwrap()
    }

    fn opts(wide: bool, all: bool) -> TableOptions {
        TableOptions {
            wide,
            all_namespaces: all,
            now: now(),
        }
    }

    fn one(yaml: &str) -> Manifest {
        parse_manifests(yaml).unwrap().remove(0)
    }

    fn ds() -> Manifest {
        one(r#"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fluentd, namespace: kube-system, creationTimestamp: "2024-05-01T12:00:00Z"}
spec:
  selector:
    matchLabels: {app: fluentd}
    matchExpressions: [{key: tier, operator: In, values: [b, a]}]
  template:
    metadata: {labels: {app: fluentd, tier: a}}
    spec:
      nodeSelector: {disk: ssd, zone: a}
      containers:
      - {name: fluentd, image: "fluentd:v1"}
      - {name: sidecar, image: "busybox:1.36"}
status: {desiredNumberScheduled: 3, currentNumberScheduled: 2, numberReady: 1, updatedNumberScheduled: 2, numberAvailable: 1}
"#)
    }

    #[test]
    fn daemon_set_tables() {
        let t = table(Kind::DaemonSet, &[ds()], &opts(false, false));
        assert_eq!(
            t,
            "NAME      DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR     AGE\n\
             fluentd   3         2         1       2            1           disk=ssd,zone=a   2d4h\n"
        );
        let t = table(Kind::DaemonSet, &[ds()], &opts(true, true));
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("NAMESPACE     NAME      DESIRED"),
            "{t}"
        );
        assert!(
            lines[0].ends_with("AGE    CONTAINERS        IMAGES                    SELECTOR"),
            "{t}"
        );
        assert!(lines[1].starts_with("kube-system   fluentd   3 "), "{t}");
        assert!(
            lines[1]
                .ends_with("fluentd,sidecar   fluentd:v1,busybox:1.36   app=fluentd,tier in (a,b)"),
            "{t}"
        );
    }

    #[test]
    fn empty_node_selector_reads_none() {
        let m = one("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: i}]}\n");
        let r = row(&m, &opts(true, false));
        assert_eq!(r[6], "<none>");
        assert_eq!(r[7], "<unknown>");
        assert_eq!(r[10], "a=b");
    }

    fn pod(status: &str) -> Manifest {
        one(&format!(
            r#"
apiVersion: v1
kind: Pod
metadata: {{name: web, creationTimestamp: "2024-05-03T15:59:55Z"}}
spec:
  nodeName: n1
  containers: [{{name: a, image: i}}, {{name: b, image: i}}]
status: {status}
"#
        ))
    }

    #[test]
    fn pod_rows() {
        let p = pod(
            r#"{phase: Running, podIP: 10.0.0.5, conditions: [{type: Ready, status: "True"}],
            containerStatuses: [
              {name: a, ready: true, restartCount: 2, state: {running: {startedAt: "2024-05-03T15:59:56Z"}},
               lastState: {terminated: {exitCode: 1, finishedAt: "2024-05-03T15:55:00Z"}}},
              {name: b, ready: true, restartCount: 1, state: {running: {}}}]}"#,
        );
        assert_eq!(
            table(Kind::Pod, std::slice::from_ref(&p), &opts(true, false)),
            "NAME   READY   STATUS    RESTARTS     AGE   IP         NODE   NOMINATED NODE   READINESS GATES\n\
             web    2/2     Running   3 (5m ago)   5s    10.0.0.5   n1     <none>           <none>\n"
        );
        let p = pod("{}");
        assert_eq!(
            row(&p, &opts(true, false)),
            ["web", "0/2", "Pending", "0", "5s", "<none>", "n1", "<none>", "<none>"]
        );
        let p = pod(
            r#"{phase: Pending, containerStatuses: [{name: a, state: {waiting: {reason: CrashLoopBackOff}}}, {name: b, state: {waiting: {reason: ContainerCreating}}}]}"#,
        );
        assert_eq!(pod_status(as_pod(&p)), "CrashLoopBackOff");
        let p = pod(
            r#"{phase: Failed, containerStatuses: [{name: a, state: {terminated: {exitCode: 137, signal: 9}}}, {name: b, state: {terminated: {exitCode: 2}}}]}"#,
        );
        assert_eq!(pod_status(as_pod(&p)), "Signal:9");
        let mut p = pod("{phase: Running}");
        p.metadata_mut().deletion_timestamp = Some("2024-05-03T16:00:00Z".into());
        assert_eq!(pod_status(as_pod(&p)), "Terminating");
    }

    fn as_pod(m: &Manifest) -> &Pod {
        match m {
            Manifest::Pod(p) => p,
            _ => panic!("not a pod"),
        }
    }

    fn node(extra: &str) -> Manifest {
        one(&format!(
            r#"
apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: "2024-05-03T13:00:00Z"
  labels: {{node-role.kubernetes.io/control-plane: "", kubernetes.io/role: worker, disk: ssd}}
{extra}
"#
        ))
    }

    #[test]
    fn node_rows() {
        let n = node(
            r#"spec: {unschedulable: true}
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 10.0.0.1}]
  nodeInfo: {kubeletVersion: drover-0.1.0, osImage: Debian, containerRuntimeVersion: "sim://1"}"#,
        );
        assert_eq!(
            table(Kind::Node, std::slice::from_ref(&n), &opts(false, true)),
            "NAME   STATUS                     ROLES                  AGE   VERSION\n\
             n1     Ready,SchedulingDisabled   control-plane,worker   3h    drover-0.1.0\n"
        );
        assert_eq!(
            row(&n, &opts(true, false))[5..],
            ["10.0.0.1", "<none>", "Debian", "<unknown>", "sim://1"]
        );
        let n = node("status: {conditions: [{type: Ready, status: Unknown}]}");
        assert_eq!(row(&n, &opts(false, false))[1], "NotReady");
        let n = node("");
        assert_eq!(row(&n, &opts(false, false))[1], "Unknown");
    }

    fn event(count: i32) -> Manifest {
        one(&format!(
            r#"
apiVersion: v1
kind: Event
metadata: {{name: fluentd.17c, namespace: default}}
involvedObject: {{kind: DaemonSet, name: fluentd, namespace: default}}
reason: SuccessfulCreate
message: "Created pod: fluentd-abcde  "
type: Normal
source: {{component: daemonset-controller}}
firstTimestamp: "2024-05-03T15:40:00Z"
lastTimestamp: "2024-05-03T15:58:00Z"
count: {count}
"#
        ))
    }

    #[test]
    fn event_rows() {
        assert_eq!(
            table(Kind::Event, &[event(1)], &opts(false, true)),
            "NAMESPACE   LAST SEEN   TYPE     REASON             OBJECT              MESSAGE\n\
             default     2m          Normal   SuccessfulCreate   daemonset/fluentd   Created pod: fluentd-abcde\n"
        );
        let wide = row(&event(3), &opts(true, false));
        assert_eq!(
            wide,
            [
                "2m",
                "Normal",
                "SuccessfulCreate",
                "daemonset/fluentd",
                "",
                "daemonset-controller",
                "Created pod: fluentd-abcde",
                "20m",
                "3",
                "fluentd.17c"
            ]
        );
        let Manifest::Event(e) = event(3) else {
            panic!()
        };
        assert_eq!(event_interval(&e, now()), "2m (x3 over 20m)");
        let Manifest::Event(e) = event(1) else {
            panic!()
        };
        assert_eq!(event_interval(&e, now()), "20m");
    }

    #[test]
    fn controller_revision_rows() {
        let cr = one(r#"
apiVersion: apps/v1
kind: ControllerRevision
metadata:
  name: fluentd-5d4f
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: fluentd, uid: u, controller: true}]
revision: 2
"#);
        assert_eq!(
            row(&cr, &opts(false, false)),
            ["fluentd-5d4f", "daemonset.apps/fluentd", "2", "<unknown>"]
        );
    }

    #[test]
    fn json_list_shape_like_kubectl() {
        let v = list_value(&[ds()]);
        let text = to_json(&v);
        assert!(text.starts_with("{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {\n            \"apiVersion\": \"apps/v1\",\n            \"kind\": \"DaemonSet\","), "{text}");
        assert!(text.ends_with("    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n"), "{text}");
        let empty = to_json(&list_value(&[]));
        assert_eq!(empty, "{\n    \"apiVersion\": \"v1\",\n    \"items\": [],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n");
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back["items"][0]["spec"]["template"]["spec"]["nodeSelector"]["disk"],
            "ssd"
        );
    }

    #[test]
    fn yaml_like_kubectl() {
        let y = to_yaml(&list_value(&[ds()]));
        assert!(
            y.starts_with(
                "apiVersion: v1\nitems:\n- apiVersion: apps/v1\n  kind: DaemonSet\n  metadata:\n"
            ),
            "{y}"
        );
        assert!(
            y.ends_with("kind: List\nmetadata:\n  resourceVersion: \"\"\n")
                || y.ends_with("kind: List\nmetadata:\n  resourceVersion: ''\n"),
            "{y}"
        );
        let back: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, list_value(&[ds()]));
        let y = to_yaml(&object_value(&ds()));
        assert!(
            y.starts_with("apiVersion: apps/v1\nkind: DaemonSet\n"),
            "{y}"
        );
    }

    #[test]
    fn names() {
        assert_eq!(name(&ds()), "daemonset.apps/fluentd");
        assert_eq!(name(&pod("{}")), "pod/web");
        assert_eq!(name(&node("")), "node/n1");
    }
}
