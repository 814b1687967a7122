//! The same plan made with a [`Memo`] from only the nodes that changed
//! since the last plan, as the server's controller makes it: a property
//! test that drives the planner over a changing cluster hands each of its
//! plans of the whole cluster to [`Shadow::check`], which plans again with
//! the memo and requires the same plan but for the random names: the same
//! deletions, creations by node, adoptions, releases, bindings, status,
//! backoff, decision events and requeue time.

use drover_api::{Node, Pod};
use drover_controller::daemon::{self, DaemonSetPlan, Memo, NameTaken, PlanInput, Scope};
use drover_controller::FastSet;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::collections::BTreeMap;

const HASH_LABEL: &str = "controller-revision-hash";

/// The plan made with a memo from only what changed (see the module documentation).
#[derive(Default)]
pub struct Shadow {
    memo: Memo,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
}

/// A plan without its random parts: what a plan with a memo must share
/// with the plan of the whole cluster.
fn shape(plan: &DaemonSetPlan) -> impl PartialEq + std::fmt::Debug {
    let mut created: Vec<(String, String, Option<String>)> = plan
        .create
        .iter()
        .map(|c| {
            let p = &c.pod;
            let target = daemon::pods::target_node(p).to_owned();
            (
                target,
                p.spec.node_name.clone(),
                p.metadata.labels.get(HASH_LABEL).cloned(),
            )
        })
        .collect();
    created.sort();
    let mut deleted: Vec<(String, String, String)> = plan
        .delete
        .iter()
        .map(|d| {
            (
                d.uid.clone(),
                d.resource_version.clone(),
                format!("{:?}", d.reason),
            )
        })
        .collect();
    deleted.sort();
    let mut events: Vec<(String, String)> = plan
        .events
        .iter()
        .map(|e| (e.reason.clone(), e.message.clone()))
        .collect();
    events.sort();
    let names = |pods: &[Pod]| {
        let mut v: Vec<String> = pods.iter().map(|p| p.metadata.name.clone()).collect();
        v.sort();
        v
    };
    (
        (created, deleted, events),
        (
            names(&plan.adopt),
            names(&plan.release),
            names(&plan.bind),
            names(&plan.unschedulable),
        ),
        (
            plan.status.clone(),
            plan.status_changed,
            plan.backoff.clone(),
            plan.requeue_at,
        ),
        (plan.rollback.clone(), plan.finalize),
    )
}

impl Shadow {
    /// Plans with the memo from what changed since the last call, and
    /// checks the plan against `full`, the plan of the whole cluster.
    pub fn check(
        &mut self,
        input: &PlanInput<'_>,
        nodes: &[Node],
        pods: &[Pod],
        seed: u64,
        full: &DaemonSetPlan,
    ) -> Result<(), TestCaseError> {
        let ds = input.daemon_set;
        let hash = input.revision_hash;
        let by_node = |pods: &[Pod]| {
            let mut m: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
            for p in pods {
                m.entry(daemon::pods::target_node(p).to_owned())
                    .or_default()
                    .push(p.clone());
            }
            for v in m.values_mut() {
                v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            }
            m
        };
        let (before, after) = (by_node(&self.pods), by_node(pods));
        let node_of =
            |ns: &[Node], name: &str| ns.iter().find(|n| n.metadata.name == name).cloned();
        let mut changed: FastSet<String> = FastSet::default();
        for name in nodes
            .iter()
            .chain(self.nodes.iter())
            .map(|n| n.metadata.name.clone())
        {
            if node_of(nodes, &name) != node_of(&self.nodes, &name) {
                changed.insert(name);
            }
        }
        for name in before.keys().chain(after.keys()) {
            if before.get(name) != after.get(name) {
                changed.insert(name.clone());
            }
        }
        changed.extend(self.memo.revisit().map(str::to_owned));
        let scope: FastSet<&str> = changed.iter().map(String::as_str).collect();
        let taken = |ns: &str, name: &str| {
            pods.iter()
                .any(|p| p.metadata.namespace == ns && p.metadata.name == name)
        };
        let valid = self.memo.is_valid_for(ds, hash);
        let (some_nodes, some_pods): (Vec<&Node>, Vec<&Pod>) = if valid {
            (
                nodes
                    .iter()
                    .filter(|n| scope.contains(n.metadata.name.as_str()))
                    .collect(),
                pods.iter()
                    .filter(|p| scope.contains(daemon::pods::target_node(p)))
                    .collect(),
            )
        } else {
            (nodes.iter().collect(), pods.iter().collect())
        };
        let mut partial = PlanInput::new(ds, some_nodes, some_pods, input.now)
            .with_backoff(input.backoff)
            .with_name_taken(NameTaken(&taken));
        if let Some(h) = hash {
            partial = partial.with_revision_hash(h);
        }
        let scope = if valid {
            Scope::Changed(&scope)
        } else {
            Scope::All
        };
        let plan = daemon::plan_memo(
            &partial,
            None,
            &mut self.memo,
            scope,
            &mut StdRng::seed_from_u64(seed),
        );
        prop_assert_eq!(
            shape(&plan),
            shape(full),
            "the plan with a memo ({} nodes diffed of {}) differs",
            partial.nodes.len(),
            nodes.len()
        );
        self.nodes = nodes.to_vec();
        self.pods = pods.to_vec();
        Ok(())
    }
}
