//! Lists served from the informer's memory, as the Kubernetes API server
//! serves consistent lists from its watch cache: the list is as new as
//! every write acknowledged before it (a raft ReadIndex round gives the
//! store's last change; the informer must have reached it), but nothing is
//! read from the store or decoded. 10,000 pods listed this way cost
//! clones of objects already decoded, not a scan and a decode of each.
//!
//! The kinds the informer holds (nodes, DaemonSets, Deployments,
//! ReplicaSets, pods, PriorityClasses,
//! ConfigMaps, Secrets) are served so; the others, and any list while the
//! informer is loading or more than a second behind the store, are read
//! from the store ([`super::read::list_page`]). The wait is
//! [`crate::cache::Informer::consistent_view`].

use super::paging::{continue_token, sort_key, store_key};
use super::query::Query;
use crate::cache::Snapshot;
use drover_api::{Kind, Manifest, Resource};
use serde_json::{json, Value};
use std::ops::Bound;

/// One page of `kind` from the view: as [`super::read::list_page`] pages
/// the store, in the same order, with the same continue keys.
pub fn page(
    s: &Snapshot,
    kind: Kind,
    namespace: Option<&str>,
    after: Option<&str>,
    q: &Query,
) -> (Vec<Manifest>, Value) {
    let at = Page {
        prefix: crate::api::codec::prefix(kind, namespace),
        after: after.map(|a| store_key(kind, a)),
        q,
        revision: s.revision,
    };
    match kind {
        Kind::Pod => at.read(&s.pods),
        Kind::Node => at.read(&s.nodes),
        Kind::DaemonSet => at.read(&s.daemon_sets),
        Kind::Deployment => at.read(&s.deployments),
        Kind::ReplicaSet => at.read(&s.replica_sets),
        Kind::PriorityClass => at.read(&s.priority_classes),
        Kind::ConfigMap => at.read(&s.config_maps),
        Kind::Secret => at.read(&s.secrets),
        _ => (
            Vec::new(),
            json!({ "resourceVersion": s.revision.to_string() }),
        ),
    }
}

struct Page<'a> {
    prefix: String,
    after: Option<String>,
    q: &'a Query,
    revision: u64,
}

impl Page<'_> {
    fn read<T>(&self, map: &crate::cache::Map<T>) -> (Vec<Manifest>, Value)
    where
        T: Resource + Clone,
        Manifest: From<T>,
    {
        let start = match &self.after {
            // A key before the prefix (a token of another namespace's
            // list) starts at the prefix.
            Some(a) if *a >= self.prefix => Bound::Excluded(a.as_str()),
            _ => Bound::Included(self.prefix.as_str()),
        };
        let mut entries = map
            .range::<_, str>((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&self.prefix));
        let mut items: Vec<Manifest> = Vec::new();
        let mut meta = json!({ "resourceVersion": self.revision.to_string() });
        let selected = self.q.labels.is_some() || !self.q.fields.is_empty();
        while let Some((_, object)) = entries.next() {
            if let Some(labels) = &self.q.labels {
                if !labels.matches(&object.metadata().labels) {
                    continue;
                }
            }
            let m = Manifest::from(T::clone(object));
            if !self.q.selects(&m) {
                continue;
            }
            if self.q.limit.is_some_and(|limit| items.len() == limit) {
                // One more passes: the page ends before it.
                if let Some(last) = items.last() {
                    meta["continue"] = json!(continue_token(&sort_key(last)));
                    if !selected {
                        meta["remainingItemCount"] = json!(1 + entries.count());
                    }
                }
                break;
            }
            items.push(m);
        }
        (items, meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pod(ns: &str, name: &str, app: &str) -> (String, Arc<drover_api::Pod>) {
        let mut p = drover_api::Pod::default();
        p.metadata.name = name.into();
        p.metadata.namespace = ns.into();
        p.metadata.labels.insert("app".into(), app.into());
        (crate::api::codec::key(Kind::Pod, ns, name), Arc::new(p))
    }

    fn names(items: &[Manifest]) -> Vec<String> {
        items
            .iter()
            .map(|m| format!("{}/{}", m.namespace(), m.name()))
            .collect()
    }

    #[test]
    fn pages_follow_the_store_order_and_continue_keys() {
        let mut s = Snapshot {
            revision: 42,
            ..Default::default()
        };
        for (ns, name, app) in [
            ("a", "p1", "x"),
            ("a", "p2", "y"),
            ("b", "p1", "x"),
            ("b", "p3", "x"),
        ] {
            let (k, p) = pod(ns, name, app);
            s.pods.insert(k, p);
        }
        let mut q = Query::parse(Some("limit=2")).unwrap();
        let (items, meta) = page(&s, Kind::Pod, None, None, &q);
        assert_eq!(names(&items), ["a/p1", "a/p2"]);
        assert_eq!(meta["resourceVersion"], "42");
        assert_eq!(meta["remainingItemCount"], 2);
        let token = meta["continue"].as_str().unwrap().to_string();
        let after = super::super::paging::read_continue(&token).unwrap();
        q.continue_token = Some(token);
        let (items, meta) = page(&s, Kind::Pod, None, Some(&after), &q);
        assert_eq!(names(&items), ["b/p1", "b/p3"]);
        assert!(meta.get("continue").is_none());
        // One namespace; a continue key of another namespace starts at its
        // beginning.
        let (items, _) = page(&s, Kind::Pod, Some("b"), Some("a/p2"), &q);
        assert_eq!(names(&items), ["b/p1", "b/p3"]);
        // Selectors: no remaining count (not known without reading on).
        let q = Query::parse(Some("labelSelector=app%3Dx&limit=1")).unwrap();
        let (items, meta) = page(&s, Kind::Pod, None, None, &q);
        assert_eq!(names(&items), ["a/p1"]);
        assert!(meta.get("remainingItemCount").is_none());
        assert!(meta.get("continue").is_some());
    }
}
