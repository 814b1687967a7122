//! The kubectl-style commands: `apply`, `get`, `describe`, `delete`,
//! `label`, `taint`, `cordon`, `uncordon`, `events`, `completion`.
//!
//! Every command takes a connected [`Client`] and writers for stdout and
//! stderr, so tests run them in-process and check what a user would see.
//! A server's refusal comes back as [`Reported`] text worded like kubectl's
//! (`Error from server (NotFound): …`); when a command acts on several
//! objects it does what it can and reports every failure at the end.

use crate::client::{Client, ClientError, ObjectWatch};
use crate::custom_columns::LabelColumns;
use crate::describe;
use crate::edit;
use crate::errors::{kube, refusal, server_line, Reported};
use crate::field_selector::{FieldSelector, Filter};
use crate::printers::{self, print_objects, table_headers, table_row, Output, TableOptions};
pub use crate::sources::{parse_sources, parse_sources_in, read_sources, Source};
use crate::table::{self, Widths};
use anyhow::{anyhow, bail, Result};
use drover_api::selector::Selector;
use drover_api::{Event, FieldValidation, Kind, Manifest, Node, Pod, DEFAULT_NAMESPACE};
use drover_proto::reason::Reason;
use std::io::Write;
use std::time::{Duration, SystemTime};
use tonic::Code;

/// How many times a read-modify-write retries after a conflict.
const CONFLICT_RETRIES: usize = 5;

/// `--dry-run[=client|server]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Print what would happen (drover's server still validates).
    Client,
    /// The same, worded like kubectl's server-side dry run.
    Server,
}

/// The shells `completion` writes scripts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub(crate) fn namespace_or_default(ns: Option<&str>) -> &str {
    ns.filter(|n| !n.is_empty()).unwrap_or(DEFAULT_NAMESPACE)
}

/// `drover apply -f FILE|DIR|- …`: every object of every file is sent in one
/// request, so the server refuses them all if one is invalid, or if one
/// has a field no Kubernetes object has while `validate` is strict. Each
/// object carries the last-applied annotation, as kubectl's
/// ([`crate::last_applied`]).
pub async fn apply(
    c: &Client,
    sources: &[Source],
    namespace: Option<&str>,
    dry_run: Option<DryRun>,
    validate: FieldValidation,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    let mut manifests = parse_sources_in(sources, namespace)?;
    for m in &mut manifests {
        crate::last_applied::annotate(m)?;
    }
    let list = printers::list_value(&manifests);
    let text = serde_json::to_string(&list)?;
    let results = c
        .apply_with(&text, dry_run.is_some(), validate)
        .await
        .map_err(kube)?;
    let suffix = match dry_run {
        None => "",
        Some(DryRun::Client) => " (dry run)",
        Some(DryRun::Server) => " (server dry run)",
    };
    for r in results {
        for w in &r.warnings {
            writeln!(err, "Warning: {w}")?;
        }
        writeln!(out, "{} {}{suffix}", r.reference, r.action)?;
    }
    Ok(())
}

/// What `get` was asked for.
#[derive(Debug, Clone, Default)]
pub struct GetOptions {
    pub kind: String,
    pub names: Vec<String>,
    pub output: Option<Output>,
    pub selector: Option<String>,
    /// `--field-selector`, e.g. `involvedObject.name=web-abc`.
    pub field_selector: Option<String>,
    pub namespace: Option<String>,
    pub all_namespaces: bool,
    pub watch: bool,
    /// `--show-labels`.
    pub show_labels: bool,
    /// `-L key,…`.
    pub label_columns: Vec<String>,
}

impl GetOptions {
    fn labels(&self) -> LabelColumns {
        LabelColumns {
            keys: self.label_columns.clone(),
            show_labels: self.show_labels,
        }
    }
}

/// The namespace a list or watch covers: empty for all (and for nodes).
pub(crate) fn scope(kind: Kind, namespace: Option<&str>, all: bool) -> String {
    if !kind.namespaced() || all {
        String::new()
    } else {
        namespace_or_default(namespace).to_string()
    }
}

fn no_resources(kind: Kind, ns: &str) -> String {
    if kind.namespaced() && !ns.is_empty() {
        format!("No resources found in {ns} namespace.")
    } else {
        "No resources found".into()
    }
}

/// kubectl's two ways to name objects: `KIND NAME…` or `KIND/NAME…` (one
/// kind per command here). Answers the kind and the names.
pub fn resource_args(kind: &str, names: &[String]) -> Result<(String, Vec<String>)> {
    if !kind.contains('/') {
        if names.iter().any(|n| n.contains('/')) {
            bail!(
                "there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'drover get ds/NAME' instead of 'drover get ds ds/NAME')"
            );
        }
        return Ok((kind.to_string(), names.to_vec()));
    }
    let mut first_kind: Option<(Kind, String)> = None;
    let mut out = Vec::with_capacity(names.len() + 1);
    for arg in std::iter::once(kind).chain(names.iter().map(String::as_str)) {
        let Some((k, n)) = arg.split_once('/') else {
            bail!("{arg:?}: give every object as TYPE/NAME once one is (e.g. ds/{arg})");
        };
        if n.is_empty() || n.contains('/') {
            bail!("{arg:?}: expected TYPE/NAME, e.g. ds/fluentd");
        }
        let parsed = Kind::parse(k)?;
        match &first_kind {
            None => first_kind = Some((parsed, k.to_string())),
            Some((f, fs)) if *f != parsed => {
                bail!(
                    "{arg:?}: one kind per command (the first was {fs}); run one command per kind"
                )
            }
            Some(_) => {}
        }
        out.push(n.to_string());
    }
    let kind = first_kind.map(|(_, s)| s).unwrap_or_default();
    Ok((kind, out))
}

/// `drover get KIND [NAME…] [-o …] [-l …] [-n NS | -A] [-w]`.
pub async fn get(
    c: &Client,
    o: &GetOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    let several = o.kind.contains(',') || o.kind.eq_ignore_ascii_case("all");
    if several && !o.kind.contains('/') {
        return get_kinds(c, o, out, err).await;
    }
    let (kind_arg, names) = resource_args(&o.kind, &o.names)?;
    let o = &GetOptions {
        kind: kind_arg,
        names,
        ..o.clone()
    };
    let kind = Kind::parse(&o.kind)?;
    let selector = o.selector.as_deref().unwrap_or("");
    if !o.names.is_empty() && !selector.is_empty() {
        bail!("a selector (-l) can't be combined with names: give one or the other");
    }
    let filter = Filter {
        labels: if selector.is_empty() {
            None
        } else {
            Some(Selector::parse(selector).map_err(|e| anyhow!("{e}"))?)
        },
        fields: FieldSelector::parse(kind, o.field_selector.as_deref().unwrap_or(""))?,
    };
    let ns = scope(kind, o.namespace.as_deref(), o.all_namespaces);
    let topts = TableOptions {
        wide: o.output == Some(Output::Wide),
        all_namespaces: o.all_namespaces,
        now: SystemTime::now(),
    };
    let mut errors = Vec::new();
    let mut items = Vec::new();
    let mut resource_version = String::new();
    if o.names.is_empty() || o.watch {
        let list = c
            .list_objects(kind.plural(), &ns, selector)
            .await
            .map_err(kube)?;
        resource_version = list.resource_version;
        if o.names.is_empty() {
            items = list.items;
        } else {
            for n in &o.names {
                match list.items.iter().find(|m| m.name() == n) {
                    Some(m) => items.push(m.clone()),
                    None => errors.push(server_line(
                        Code::NotFound,
                        Some(Reason::NotFound),
                        &format!("{} {n:?} not found", kind.resource()),
                    )),
                }
            }
        }
    } else {
        let get_ns = if kind.namespaced() {
            namespace_or_default(o.namespace.as_deref())
        } else {
            ""
        };
        for n in &o.names {
            match c.get_object(kind.plural(), get_ns, n).await {
                Ok(m) => items.push(m),
                Err(e) if e.code() == Some(Code::NotFound) => errors.extend(refusal(&e)),
                Err(e) => return Err(kube(e)),
            }
        }
    }
    items.retain(|m| filter.fields.matches(m));
    let single = o.names.len() == 1 && !o.watch;
    let mut widths = Widths::default();
    let extra = o.labels();
    let output = o.output.as_ref();
    // -w with a template: each object on its own, as the changes that follow.
    let one_by_one = o.watch
        && matches!(
            output,
            Some(Output::JsonPath(_) | Output::JsonPathAsJson(_))
        );
    let groups: Vec<&[Manifest]> = if one_by_one {
        items.chunks(1).collect()
    } else {
        vec![&items[..]]
    };
    for g in groups {
        let single = single || one_by_one;
        print_objects(kind, g, single, output, &topts, &extra, &mut widths, out)?;
    }
    let table_output = Output::is_table(output);
    if items.is_empty() && errors.is_empty() && table_output && !o.watch {
        writeln!(err, "{}", no_resources(kind, &ns))?;
    }
    if o.watch {
        for e in &errors {
            writeln!(err, "{e}")?;
        }
        out.flush()?;
        return watch(
            c,
            kind,
            &ns,
            &o.names,
            &filter,
            resource_version,
            output,
            &extra,
            widths,
            out,
        )
        .await;
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Reported(errors.join("\n")).into())
    }
}

/// The kinds of `get ds,po`, in the order given, each once; `all` is
/// the kinds of that category ([`Kind::CATEGORY_ALL`]).
pub fn parse_kinds(list: &str) -> Result<Vec<Kind>> {
    let mut kinds = Vec::new();
    for k in list.split(',') {
        if k.is_empty() {
            bail!("{list:?}: empty resource type; give them as TYPE,TYPE (e.g. ds,pods)");
        }
        let expanded = if k.eq_ignore_ascii_case("all") {
            Kind::CATEGORY_ALL.to_vec()
        } else {
            vec![Kind::parse(k)?]
        };
        for kind in expanded {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    Ok(kinds)
}

/// `drover get ds,po …`: every kind listed in turn, as kubectl does: one
/// table per kind (names as `TYPE/NAME`), or one list for `-o json|yaml`.
async fn get_kinds(
    c: &Client,
    o: &GetOptions,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    let kinds = parse_kinds(&o.kind)?;
    if !o.names.is_empty() {
        bail!(
            "names can't be combined with several kinds ({}): give one kind, or name objects as TYPE/NAME with one command per kind",
            o.kind
        );
    }
    if o.field_selector.is_some() {
        bail!(
            "--field-selector selects on one kind at a time ({} given): run one `drover get KIND --field-selector …` per kind",
            o.kind
        );
    }
    if o.watch {
        bail!(
            "-w follows one kind at a time ({} given): run one `drover get KIND -w` per kind",
            o.kind
        );
    }
    let selector = o.selector.as_deref().unwrap_or("");
    if !selector.is_empty() {
        Selector::parse(selector).map_err(|e| anyhow!("{e}"))?;
    }
    let topts = TableOptions {
        wide: o.output == Some(Output::Wide),
        all_namespaces: o.all_namespaces,
        now: SystemTime::now(),
    };
    let mut all = Vec::new();
    let mut sections = Vec::new();
    for kind in kinds {
        let ns = scope(kind, o.namespace.as_deref(), o.all_namespaces);
        let list = c
            .list_objects(kind.plural(), &ns, selector)
            .await
            .map_err(kube)?;
        if list.items.is_empty() {
            continue;
        }
        if matches!(o.output, None | Some(Output::Wide)) {
            let name_col = usize::from(o.all_namespaces && kind.namespaced());
            let extra = o.labels();
            let rows: Vec<Vec<String>> = list
                .items
                .iter()
                .map(|m| {
                    let mut r = table_row(m, o.output.as_ref(), &topts, &extra);
                    if let Some(cell) = r.get_mut(name_col) {
                        *cell = printers::name(m);
                    }
                    r
                })
                .collect();
            let headers = table_headers(kind, o.output.as_ref(), &topts, &extra);
            let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
            sections.push(table::render(&headers, &rows));
        }
        all.extend(list.items);
    }
    if matches!(o.output, None | Some(Output::Wide)) {
        write!(out, "{}", sections.join("\n"))?
    } else {
        // One table of custom columns for every kind, as kubectl prints it.
        print_objects(
            Kind::Pod,
            &all,
            false,
            o.output.as_ref(),
            &topts,
            &LabelColumns::default(),
            &mut Widths::default(),
            out,
        )?
    }
    if all.is_empty() {
        let ns = if o.all_namespaces {
            String::new()
        } else {
            namespace_or_default(o.namespace.as_deref()).to_string()
        };
        writeln!(err, "{}", no_resources(Kind::Pod, &ns))?;
    }
    Ok(())
}

fn retryable(e: &ClientError) -> bool {
    matches!(
        e.code(),
        Some(Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Internal)
    )
}

/// `get -w`: one row (or object) per change, from `resource_version` on,
/// following the cluster across servers when the stream breaks.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn watch(
    c: &Client,
    kind: Kind,
    ns: &str,
    names: &[String],
    filter: &Filter,
    mut resource_version: String,
    output: Option<&Output>,
    extra: &LabelColumns,
    mut widths: Widths,
    out: &mut impl Write,
) -> Result<()> {
    let mut printed_header = !widths.is_empty();
    let mut stream: Option<ObjectWatch> = None;
    loop {
        let s = match stream.as_mut() {
            Some(s) => s,
            None => {
                let w = c
                    .watch_objects(kind.plural(), ns, &resource_version)
                    .await
                    .map_err(kube)?;
                stream.insert(w)
            }
        };
        let event = match s.next().await {
            Ok(Some(e)) => e,
            Ok(None) => {
                // The server ended the stream: follow on (another) server.
                stream = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) if retryable(&e) => {
                stream = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) if e.code() == Some(Code::OutOfRange) => {
                // Our resourceVersion was compacted away: relist, go on from there.
                let list = c.list_objects(kind.plural(), ns, "").await.map_err(kube)?;
                resource_version = list.resource_version;
                stream = None;
                continue;
            }
            Err(e) => return Err(kube(e)),
        };
        let rv = &event.object.metadata().resource_version;
        if !rv.is_empty() {
            resource_version = rv.clone();
        }
        let mut m = event.object;
        if event.r#type == "DELETED" {
            // The pod is going: kubectl shows it Terminating (drover deletes
            // at once and the agent stops the containers after).
            let meta = m.metadata_mut();
            if meta.deletion_timestamp.is_none() {
                meta.deletion_timestamp = Some(now_rfc3339());
            }
        }
        if !names.is_empty() && !names.iter().any(|n| n == m.name()) {
            continue;
        }
        if !filter.matches(&m) {
            continue;
        }
        match output {
            None | Some(Output::Wide) | Some(Output::CustomColumns(_)) => {
                let topts = TableOptions {
                    wide: output == Some(&Output::Wide),
                    all_namespaces: ns.is_empty() && kind.namespaced(),
                    now: SystemTime::now(),
                };
                let row = table_row(&m, output, &topts, extra);
                let row: Vec<&str> = row.iter().map(String::as_str).collect();
                if !printed_header {
                    let headers = table_headers(kind, output, &topts, extra);
                    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
                    widths.fit(&headers);
                    widths.fit(&row);
                    write!(out, "{}", widths.line(&headers))?;
                    printed_header = true;
                }
                widths.fit(&row);
                write!(out, "{}", widths.line(&row))?;
            }
            Some(Output::Json) => {
                write!(out, "{}", printers::to_json(&printers::object_value(&m)))?
            }
            Some(Output::Yaml) => write!(
                out,
                "---\n{}",
                printers::to_yaml(&printers::object_value(&m))
            )?,
            Some(Output::JsonPath(t)) => write!(out, "{}", t.render(&printers::object_value(&m)))?,
            Some(Output::JsonPathAsJson(t)) => write!(
                out,
                "{}",
                printers::jsonpath_as_json(t, &printers::object_value(&m))
            )?,
            Some(Output::Name) => writeln!(out, "{}", printers::name(&m))?,
        }
        out.flush()?;
    }
}

async fn list_all<T>(
    c: &Client,
    kind: Kind,
    ns: &str,
    pick: impl Fn(Manifest) -> Option<T>,
) -> Result<Vec<T>> {
    Ok(c.list_objects(kind.plural(), ns, "")
        .await
        .map_err(kube)?
        .items
        .into_iter()
        .filter_map(pick)
        .collect())
}

pub(crate) fn as_pod(m: Manifest) -> Option<Pod> {
    match m {
        Manifest::Pod(p) => Some(*p),
        _ => None,
    }
}

pub(crate) fn as_node(m: Manifest) -> Option<Node> {
    match m {
        Manifest::Node(n) => Some(*n),
        _ => None,
    }
}

pub(crate) fn as_replica_set(m: Manifest) -> Option<drover_api::ReplicaSet> {
    match m {
        Manifest::ReplicaSet(rs) => Some(*rs),
        _ => None,
    }
}

pub(crate) fn as_event(m: Manifest) -> Option<Event> {
    match m {
        Manifest::Event(e) => Some(*e),
        _ => None,
    }
}

/// The text `describe` prints for one object.
async fn describe_one(c: &Client, m: &Manifest, now: SystemTime) -> Result<String> {
    Ok(match m {
        Manifest::DaemonSet(ds) => {
            let ns = &ds.metadata.namespace;
            // Every namespace's: whether a pod fits a node depends on all
            // the node's pods (the DaemonSet's own are told apart by owner).
            let pods = list_all(c, Kind::Pod, "", as_pod).await?;
            let nodes = list_all(c, Kind::Node, "", as_node).await?;
            let revisions = list_all(c, Kind::ControllerRevision, ns, |m| match m {
                Manifest::ControllerRevision(r) => Some(*r),
                _ => None,
            })
            .await?;
            let events = list_all(c, Kind::Event, ns, as_event).await?;
            describe::describe_daemon_set(ds, &pods, &nodes, &revisions, &events, now)
        }
        Manifest::Deployment(d) => {
            let ns = &d.metadata.namespace;
            let sets = list_all(c, Kind::ReplicaSet, ns, as_replica_set).await?;
            let events = list_all(c, Kind::Event, ns, as_event).await?;
            describe::describe_deployment(d, &sets, &events, now)
        }
        Manifest::ReplicaSet(rs) => {
            let ns = &rs.metadata.namespace;
            let pods = list_all(c, Kind::Pod, ns, as_pod).await?;
            let events = list_all(c, Kind::Event, ns, as_event).await?;
            describe::describe_replica_set(rs, &pods, &events, now)
        }
        Manifest::Pod(p) => {
            let events = list_all(c, Kind::Event, &p.metadata.namespace, as_event).await?;
            // An unbound pod: why it waits, from every node and pod.
            let waiting = if p.spec.node_name.is_empty() {
                let pods = list_all(c, Kind::Pod, "", as_pod).await?;
                let nodes = list_all(c, Kind::Node, "", as_node).await?;
                describe::waiting(p, &nodes, &pods)
            } else {
                None
            };
            describe::describe_pod(p, &events, waiting.as_ref(), now)
        }
        Manifest::Node(n) => {
            let pods = list_all(c, Kind::Pod, "", as_pod).await?;
            let events = list_all(c, Kind::Event, "", as_event).await?;
            describe::describe_node(n, &pods, &events, now)
        }
        Manifest::ConfigMap(cm) => {
            let evs = list_all(c, Kind::Event, &cm.metadata.namespace, as_event).await?;
            let m = &cm.metadata;
            let mine = describe::events_for(&evs, "ConfigMap", &m.namespace, &m.name, &m.uid);
            describe::describe_config_map(cm, &mine, now)
        }
        Manifest::Secret(s) => {
            let evs = list_all(c, Kind::Event, &s.metadata.namespace, as_event).await?;
            let m = &s.metadata;
            let mine = describe::events_for(&evs, "Secret", &m.namespace, &m.name, &m.uid);
            describe::describe_secret(s, &mine, now)
        }
        Manifest::Namespace(ns) => describe::describe_namespace(ns),
        Manifest::ServiceAccount(sa) => describe::describe_service_account(sa, &[], now),
        other => bail!(
            "describe shows daemonsets, deployments, replicasets, pods, nodes, configmaps, secrets, namespaces and serviceaccounts; for {} use `drover get {} -o yaml`",
            other.kind(),
            Kind::of(other).plural()
        ),
    })
}

/// `drover describe ds|pod|node [NAME…] [-n NS]` (every object of the kind
/// without names).
pub async fn describe(
    c: &Client,
    kind: &str,
    names: &[String],
    namespace: Option<&str>,
    out: &mut impl Write,
) -> Result<()> {
    let (kind_arg, names) = resource_args(kind, names)?;
    let names = &names[..];
    let kind = Kind::parse(&kind_arg)?;
    if matches!(
        kind,
        Kind::Event | Kind::ControllerRevision | Kind::PriorityClass
    ) {
        bail!("describe shows daemonsets, deployments, replicasets, pods, nodes, configmaps, secrets, namespaces and serviceaccounts; for {} use `drover get {} -o yaml`", kind.plural(), kind.plural());
    }
    let ns = if kind.namespaced() {
        namespace_or_default(namespace)
    } else {
        ""
    };
    let mut errors = Vec::new();
    let mut objects = Vec::new();
    if names.is_empty() {
        objects = c
            .list_objects(kind.plural(), ns, "")
            .await
            .map_err(kube)?
            .items;
        if objects.is_empty() {
            bail!("{}", no_resources(kind, ns));
        }
    }
    for n in names {
        match c.get_object(kind.plural(), ns, n).await {
            Ok(m) => objects.push(m),
            Err(e) if e.code() == Some(Code::NotFound) => errors.extend(refusal(&e)),
            Err(e) => return Err(kube(e)),
        }
    }
    let now = SystemTime::now();
    for (i, m) in objects.iter().enumerate() {
        if i > 0 {
            write!(out, "\n\n")?;
        }
        write!(out, "{}", describe_one(c, m, now).await?)?;
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Reported(errors.join("\n")).into())
    }
}

/// Reads an object, changes it with `f`, writes it back with
/// compare-and-swap on the version read, and starts over on a conflict.
/// `f` returns the message to print and whether anything changed (nothing
/// is written when not).
pub(crate) async fn read_modify_write<F>(
    c: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    mut f: F,
) -> Result<(Manifest, String)>
where
    F: FnMut(&mut Manifest) -> Result<(String, bool)>,
{
    let mut last = None;
    for _ in 0..CONFLICT_RETRIES {
        let mut m = c
            .get_object(kind.plural(), namespace, name)
            .await
            .map_err(kube)?;
        let (msg, changed) = f(&mut m)?;
        if !changed {
            return Ok((m, msg));
        }
        match c.update_object(&m).await {
            Ok(new) => return Ok((new, msg)),
            Err(e) if e.code() == Some(Code::Aborted) => last = Some(e),
            Err(e) => return Err(kube(e)),
        }
    }
    Err(kube(last.expect("a conflict was seen")))
}

/// `drover label KIND NAME k=v… k-… [--overwrite]`.
pub async fn label(
    c: &Client,
    kind: &str,
    name: &str,
    args: &[String],
    overwrite: bool,
    namespace: Option<&str>,
    out: &mut impl Write,
) -> Result<()> {
    let kind = Kind::parse(kind)?;
    let changes = edit::parse_label_args(args)?;
    let ns = if kind.namespaced() {
        namespace_or_default(namespace)
    } else {
        ""
    };
    let mut not_found = Vec::new();
    let (m, msg) = read_modify_write(c, kind, ns, name, |m| {
        let o = edit::apply_labels(&mut m.metadata_mut().labels, &changes, overwrite)?;
        not_found = o.not_found.clone();
        Ok((o.message.to_string(), o.changed()))
    })
    .await?;
    for k in not_found {
        writeln!(out, "label {k:?} not found.")?;
    }
    writeln!(out, "{} {msg}", m.reference())?;
    Ok(())
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// `drover taint node NAME k=v:Effect… k:Effect-… k-… [--overwrite]`.
pub async fn taint(
    c: &Client,
    kind: &str,
    name: &str,
    args: &[String],
    overwrite: bool,
    out: &mut impl Write,
) -> Result<()> {
    if Kind::parse(kind).ok() != Some(Kind::Node) {
        bail!("invalid resource type {kind}, only node types are supported");
    }
    let changes = edit::parse_taint_args(args)?;
    let now = now_rfc3339();
    let (m, msg) = read_modify_write(c, Kind::Node, "", name, |m| {
        let Manifest::Node(n) = m else {
            bail!("{} is not a node", m.reference());
        };
        let before = n.spec.taints.clone();
        let op = edit::apply_taints(name, &mut n.spec.taints, &changes, overwrite, &now)?;
        Ok((op.to_string(), n.spec.taints != before))
    })
    .await?;
    writeln!(out, "{} {msg}", m.reference())?;
    Ok(())
}

/// `drover cordon NODE…` (`unschedulable` true) and `uncordon NODE…`.
pub async fn cordon(
    c: &Client,
    nodes: &[String],
    unschedulable: bool,
    out: &mut impl Write,
) -> Result<()> {
    if nodes.is_empty() {
        bail!("give the name of at least one node");
    }
    let mut errors = Vec::new();
    for name in nodes {
        let r = read_modify_write(c, Kind::Node, "", name, |m| {
            let Manifest::Node(n) = m else {
                bail!("{} is not a node", m.reference());
            };
            let (msg, changed) = edit::set_unschedulable(&mut n.spec.unschedulable, unschedulable);
            Ok((msg.to_string(), changed))
        })
        .await;
        match r {
            Ok((m, msg)) => writeln!(out, "{} {msg}", m.reference())?,
            Err(e) => errors.push(crate::errors::error_text(&e)),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Reported(errors.join("\n")).into())
    }
}

/// `drover completion bash|zsh|fish`: the completion script of `cmd`.
pub fn completion(shell: Shell, cmd: &mut clap::Command, out: &mut impl Write) -> Result<()> {
    let name = cmd.get_name().to_string();
    let sh = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // clap_complete panics when its writer fails (`| head`): write to a
    // buffer, then report a write error as an error.
    let mut buf = Vec::new();
    clap_complete::generate(sh, cmd, name, &mut buf);
    out.write_all(&buf)?;
    Ok(())
}

#[cfg(test)]
mod resource_args_tests {
    use super::resource_args;

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn type_slash_name_and_separate_forms() {
        assert_eq!(
            resource_args("ds", &v(&["a", "b"])).unwrap(),
            ("ds".into(), v(&["a", "b"]))
        );
        assert_eq!(
            resource_args("ds/a", &v(&["daemonset/b"])).unwrap(),
            ("ds".into(), v(&["a", "b"]))
        );
        assert_eq!(
            resource_args("po/x", &[]).unwrap(),
            ("po".into(), v(&["x"]))
        );
        let e = resource_args("ds", &v(&["ds/a"])).unwrap_err().to_string();
        assert!(e.contains("no need to specify a resource type"), "{e}");
        let e = resource_args("ds/a", &v(&["pod/b"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("one kind per command"), "{e}");
        let e = resource_args("ds/a", &v(&["b"])).unwrap_err().to_string();
        assert!(e.contains("TYPE/NAME"), "{e}");
        assert!(resource_args("ds/", &[]).is_err());
        assert!(resource_args("nope/a", &[]).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_messages() {
        assert_eq!(scope(Kind::Pod, None, false), "default");
        assert_eq!(scope(Kind::Pod, Some("kube-system"), false), "kube-system");
        assert_eq!(scope(Kind::Pod, Some("x"), true), "");
        assert_eq!(scope(Kind::Node, Some("x"), false), "");
        assert_eq!(
            no_resources(Kind::DaemonSet, "default"),
            "No resources found in default namespace."
        );
        assert_eq!(no_resources(Kind::DaemonSet, ""), "No resources found");
        assert_eq!(no_resources(Kind::Node, ""), "No resources found");
    }

    #[test]
    fn sources_from_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("b.yaml"),
            "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("a.json"),
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let d = dir.path().display().to_string();
        let mut stdin = "apiVersion: v1\nkind: Node\nmetadata: {name: c}\n".as_bytes();
        let s = read_sources(&[d.clone(), "-".into()], &mut stdin).unwrap();
        assert_eq!(s.len(), 3);
        assert!(s[0].name.ends_with("a.json"));
        assert!(s[1].name.ends_with("b.yaml"));
        assert_eq!(s[2].name, "STDIN");
        let names: Vec<String> = parse_sources(&s)
            .unwrap()
            .iter()
            .map(|m| m.name().to_string())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let e = read_sources(&[format!("{d}/missing.yaml")], &mut "".as_bytes()).unwrap_err();
        assert!(e.to_string().starts_with("the path "), "{e}");
        let bad = Source {
            name: "bad.yaml".into(),
            text: "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\n".into(),
        };
        let e = parse_sources(&[bad]).unwrap_err().to_string();
        assert!(e.starts_with("error parsing bad.yaml: document 1 (apps/v1 StatefulSet \"x\"): kind StatefulSet is not supported"), "{e}");
        let empty = Source {
            name: "e.yaml".into(),
            text: "---\n".into(),
        };
        assert_eq!(
            parse_sources(&[empty]).unwrap_err().to_string(),
            "no objects passed to apply"
        );
    }

    #[test]
    fn completion_scripts() {
        let mut cmd = clap::Command::new("drover").subcommand(clap::Command::new("get"));
        for sh in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            completion(sh, &mut cmd, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains("drover"), "{sh:?}");
            assert!(text.contains("get"), "{sh:?}");
        }
    }
}
