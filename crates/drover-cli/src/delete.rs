//! `drover delete KIND NAME… | KIND -l SELECTOR | KIND --all | -f FILE`,
//! as kubectl's: every object named, selected or read from files, then
//! every refusal reported at the end.

use crate::client::{Client, ClientError};
use crate::errors::{kube, refusal, Reported};
use crate::kubectl::{namespace_or_default, resource_args};
use crate::sources::{parse_sources, Source};
use anyhow::{bail, Result};
use drover_api::Kind;
use std::io::Write;

/// What `delete` was asked for.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub kind: Option<String>,
    pub names: Vec<String>,
    pub selector: Option<String>,
    pub all: bool,
    pub namespace: Option<String>,
    /// Objects read from `-f`.
    pub sources: Vec<Source>,
}

/// `drover delete KIND NAME… | KIND -l SELECTOR | KIND --all | -f FILE`:
/// deletes what it can, then reports every object it could not delete.
pub async fn delete(c: &Client, o: &DeleteOptions, out: &mut impl Write) -> Result<()> {
    let mut targets: Vec<(Kind, String, String)> = Vec::new();
    if !o.sources.is_empty() {
        if o.kind.is_some() || !o.names.is_empty() {
            bail!("give either -f FILE or a kind and names, not both");
        }
        for m in parse_sources(&o.sources)? {
            targets.push((
                Kind::of(&m),
                m.namespace().to_string(),
                m.name().to_string(),
            ));
        }
    } else {
        let Some(kind) = &o.kind else {
            bail!("you must provide one or more resources by argument or filename (drover delete ds NAME, delete ds -l SELECTOR, delete -f FILE)");
        };
        let (kind, names) = resource_args(kind, &o.names)?;
        let kind = Kind::parse(&kind)?;
        let selector = o.selector.as_deref().unwrap_or("");
        let ns = if kind.namespaced() {
            namespace_or_default(o.namespace.as_deref()).to_string()
        } else {
            String::new()
        };
        if !names.is_empty() {
            if !selector.is_empty() || o.all {
                bail!("names can't be combined with -l or --all");
            }
            for n in &names {
                targets.push((kind, ns.clone(), n.clone()));
            }
        } else if !selector.is_empty() || o.all {
            let list = c
                .list_objects(kind.plural(), &ns, selector)
                .await
                .map_err(kube)?;
            if list.items.is_empty() {
                writeln!(out, "No resources found")?;
                return Ok(());
            }
            for m in list.items {
                targets.push((kind, m.namespace().to_string(), m.name().to_string()));
            }
        } else {
            bail!("resource(s) were provided, but no name was specified (give names, -l SELECTOR or --all)");
        }
    }
    let mut errors = Vec::new();
    for (kind, ns, name) in targets {
        match c.delete_object(kind.plural(), &ns, &name).await {
            Ok(_) => writeln!(out, "{} {name:?} deleted", kind.singular())?,
            Err(e @ ClientError::Server { .. }) => errors.extend(refusal(&e)),
            Err(e) => return Err(kube(e)),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Reported(errors.join("\n")).into())
    }
}
