//! Unit tests of InterPodAffinity and PodTopologySpread.

use std::collections::BTreeMap;

use drover_api::{
    Affinity, LabelSelector, Node, NodeInclusionPolicy, Pod, PodAffinity, PodAffinityTerm,
    PodAntiAffinity, TopologySpreadConstraint, UnsatisfiableConstraintAction,
    WeightedPodAffinityTerm,
};

use super::tests::{bound_to, labels, message, node, on, pod, rng};
use super::*;

fn selector(pairs: &[(&str, &str)]) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: labels(pairs),
        ..Default::default()
    })
}

fn term(app: &str, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: selector(&[("app", app)]),
        topology_key: key.into(),
        ..Default::default()
    }
}

fn affinity(p: &mut Pod) -> &mut Affinity {
    p.spec.affinity.get_or_insert_with(Affinity::default)
}

fn with_affinity(mut p: Pod, t: PodAffinityTerm) -> Pod {
    affinity(&mut p)
        .pod_affinity
        .get_or_insert_with(PodAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .push(t);
    p
}

fn with_anti(mut p: Pod, t: PodAffinityTerm) -> Pod {
    affinity(&mut p)
        .pod_anti_affinity
        .get_or_insert_with(PodAntiAffinity::default)
        .required_during_scheduling_ignored_during_execution
        .push(t);
    p
}

/// Required anti-affinity to the pods of its own `app` on the hostname.
pub(crate) fn anti_on_hostname(p: Pod) -> Pod {
    let app = p.metadata.labels.get("app").cloned().unwrap_or_default();
    with_anti(p, term(&app, HOSTNAME_LABEL))
}

/// a, b in zone z1; c in z2; d without a zone.
fn zones() -> Vec<Node> {
    vec![
        node("a", &[("zone", "z1")]),
        node("b", &[("zone", "z1")]),
        node("c", &[("zone", "z2")]),
        node("d", &[]),
    ]
}

fn feasible(c: &Cluster<'_>, p: &Pod) -> Vec<String> {
    c.evaluate(p)
        .feasible
        .iter()
        .map(|s| s.node.to_string())
        .collect()
}

#[test]
fn required_affinity_needs_a_matching_pod_in_the_domain_unless_the_pod_is_the_first_of_its_group() {
    let nodes = zones();
    let db = on(pod("db", &[("app", "db")]), "c");
    let c = Cluster::new(&nodes, [&db]);
    let web = with_affinity(pod("web", &[("app", "web")]), term("db", "zone"));
    assert_eq!(feasible(&c, &web), ["c"]);
    assert_eq!(
        message(&Cluster::new(&nodes[..2], [&db]).schedule(&web, &mut rng(1))),
        "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
    );
    // Nobody matches and the pod matches its own term: any node with the key.
    let group = with_affinity(pod("g", &[("app", "g")]), term("g", "zone"));
    assert_eq!(feasible(&c, &group), ["a", "b", "c"]);
    // Nobody matches and the pod does not match its own term: nowhere.
    let lonely = with_affinity(pod("l", &[("app", "l")]), term("nobody", "zone"));
    assert!(feasible(&c, &lonely).is_empty());
    // Another namespace's db does not count, unless the term names it.
    let mut other = db.clone();
    other.metadata.namespace = "data".into();
    let c = Cluster::new(&nodes, [&other]);
    assert!(feasible(&c, &web).is_empty());
    let mut named = term("db", "zone");
    named.namespaces = vec!["data".into()];
    let web2 = with_affinity(pod("web", &[("app", "web")]), named);
    assert_eq!(feasible(&c, &web2), ["c"]);
    // Or its namespace selector matches the namespace's labels.
    let mut by_labels = term("db", "zone");
    by_labels.namespace_selector = selector(&[("team", "data")]);
    let web3 = with_affinity(pod("web", &[("app", "web")]), by_labels);
    assert!(feasible(&c, &web3).is_empty());
    let ns: NamespaceLabels = BTreeMap::from([("data".to_string(), labels(&[("team", "data")]))]);
    let c = Cluster::new(&nodes, [&other]).with_namespaces(ns);
    assert_eq!(feasible(&c, &web3), ["c"]);
}

#[test]
fn anti_affinity_keeps_the_pod_out_of_the_domain_and_existing_pods_anti_affinity_keeps_it_out_too()
{
    let nodes = zones();
    let web = on(pod("web-1", &[("app", "web")]), "a");
    let c = Cluster::new(&nodes, [&web]);
    let next = with_anti(pod("web-2", &[("app", "web")]), term("web", "zone"));
    // z1 is taken; c is in z2; d has no zone, so the term cannot be broken.
    assert_eq!(feasible(&c, &next), ["c", "d"]);

    // The symmetric rule: a placed pod's anti-affinity against the new pod.
    let picky = with_anti(
        on(pod("picky", &[("app", "picky")]), "c"),
        term("web", "zone"),
    );
    let c = Cluster::new(&nodes, [&picky]);
    let plain = pod("web-3", &[("app", "web")]);
    let u = c.evaluate(&plain).unschedulable();
    assert_eq!(u.by_node["c"], [Reason::ExistingAntiAffinity]);
    assert_eq!(feasible(&c, &plain), ["a", "b", "d"]);
    assert_eq!(
        message(&Cluster::new(&nodes[2..3], [&picky]).schedule(&plain, &mut rng(1))),
        "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."
    );
    // A pod the placed pod's term does not select is not kept out.
    assert_eq!(
        feasible(&c, &pod("db", &[("app", "db")])),
        ["a", "b", "c", "d"]
    );
    // An absent label selector selects no pod; an empty one every pod.
    let mut none = term("x", "zone");
    none.label_selector = None;
    let mut all = term("x", "zone");
    all.label_selector = Some(LabelSelector::default());
    let c = Cluster::new(&nodes, [&web]);
    assert_eq!(feasible(&c, &with_anti(pod("n", &[]), none)).len(), 4);
    assert_eq!(feasible(&c, &with_anti(pod("e", &[]), all)), ["c", "d"]);
}

fn preferring(mut p: Pod, anti: bool, weight: i32, t: PodAffinityTerm) -> Pod {
    let w = WeightedPodAffinityTerm {
        weight,
        pod_affinity_term: t,
        ..Default::default()
    };
    let a = affinity(&mut p);
    if anti {
        a.pod_anti_affinity
            .get_or_insert_with(PodAntiAffinity::default)
            .preferred_during_scheduling_ignored_during_execution
            .push(w);
    } else {
        a.pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .preferred_during_scheduling_ignored_during_execution
            .push(w);
    }
    p
}

fn inter_pod_scores(c: &Cluster<'_>, p: &Pod) -> BTreeMap<String, i64> {
    c.evaluate(p)
        .feasible
        .iter()
        .map(|s| (s.node.to_string(), s.plugins.inter_pod_affinity))
        .collect()
}

#[test]
fn preferred_terms_of_both_sides_score_the_domains() {
    let nodes = zones();
    let cache = on(pod("cache", &[("app", "cache")]), "c");
    let c = Cluster::new(&nodes, [&cache]);
    let near = preferring(
        pod("p", &[("app", "web")]),
        false,
        50,
        term("cache", "zone"),
    );
    let s = inter_pod_scores(&c, &near);
    assert_eq!(s["c"], 100);
    assert_eq!((s["a"], s["b"], s["d"]), (0, 0, 0));
    assert_eq!(bound_to(&c.schedule(&near, &mut rng(1))), Some("c"));
    let away = preferring(pod("p", &[("app", "web")]), true, 50, term("cache", "zone"));
    let s = inter_pod_scores(&c, &away);
    assert_eq!((s["a"], s["b"], s["c"], s["d"]), (100, 100, 0, 100));
    // The placed pod's own preference (and required affinity, at weight
    // 1) for the incoming pod counts too.
    let fan = preferring(
        on(pod("fan", &[("app", "fan")]), "a"),
        false,
        10,
        term("web", "zone"),
    );
    let c = Cluster::new(&nodes, [&fan]);
    let s = inter_pod_scores(&c, &pod("w", &[("app", "web")]));
    assert_eq!((s["a"], s["b"], s["c"], s["d"]), (100, 100, 0, 0));
    let needy = with_affinity(on(pod("needy", &[("app", "n")]), "c"), term("web", "zone"));
    let c = Cluster::new(&nodes, [&needy]);
    let s = inter_pod_scores(&c, &pod("w", &[("app", "web")]));
    assert_eq!((s["a"], s["c"]), (0, 100));
}

fn spread(key: &str, skew: i32, action: UnsatisfiableConstraintAction) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: Some(action),
        label_selector: selector(&[("app", "web")]),
        ..Default::default()
    }
}

fn spreading(mut p: Pod, c: TopologySpreadConstraint) -> Pod {
    p.spec.topology_spread_constraints.push(c);
    p
}

#[test]
fn do_not_schedule_keeps_the_skew_within_max_skew() {
    use UnsatisfiableConstraintAction::DoNotSchedule;
    let nodes = zones();
    let w1 = on(pod("w1", &[("app", "web")]), "a");
    let w2 = on(pod("w2", &[("app", "web")]), "b");
    let c = Cluster::new(&nodes, [&w1, &w2]);
    let p = spreading(
        pod("w3", &[("app", "web")]),
        spread("zone", 1, DoNotSchedule),
    );
    // z1 has 2, z2 has 0: only z2; d lacks the label.
    assert_eq!(feasible(&c, &p), ["c"]);
    let u = c.evaluate(&p).unschedulable();
    assert_eq!(u.by_node["a"], [Reason::Spread]);
    assert_eq!(u.by_node["d"], [Reason::SpreadLabelMissing]);
    // A cordoned node is still a domain (only node affinity and taints
    // decide which nodes count).
    let mut cordoned = nodes[..3].to_vec();
    cordoned[2].spec.unschedulable = true;
    assert_eq!(
        message(&Cluster::new(&cordoned, [&w1, &w2]).schedule(&p, &mut rng(1))),
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match pod topology spread constraints."
    );
    // With z1 the only domain, its count is the minimum: skew 1.
    assert_eq!(
        feasible(&Cluster::new(&nodes[..2], [&w1, &w2]), &p),
        ["a", "b"]
    );
    // maxSkew 3 allows z1 again.
    let loose = spreading(
        pod("w3", &[("app", "web")]),
        spread("zone", 3, DoNotSchedule),
    );
    assert_eq!(feasible(&c, &loose), ["a", "b", "c"]);
    // A pod the selector does not match adds nothing to its own domain.
    let other = spreading(
        pod("o", &[("app", "other")]),
        spread("zone", 2, DoNotSchedule),
    );
    assert_eq!(feasible(&c, &other), ["a", "b", "c"]);
    // minDomains: with fewer domains than asked, the minimum counts as 0.
    let w3 = on(pod("w3", &[("app", "web")]), "c");
    let c = Cluster::new(&nodes, [&w1, &w3]);
    let even = spreading(
        pod("w4", &[("app", "web")]),
        spread("zone", 1, DoNotSchedule),
    );
    assert_eq!(feasible(&c, &even), ["a", "b", "c"]);
    let mut want_three = spread("zone", 1, DoNotSchedule);
    want_three.min_domains = Some(3);
    let three = spreading(pod("w4", &[("app", "web")]), want_three);
    assert!(feasible(&c, &three).is_empty());
    // nodeAffinityPolicy Honor (the default): a zone the pod may not go to
    // is no domain; Ignore counts it.
    let nodes = [
        node("a", &[("zone", "z1"), ("ok", "y")]),
        node("c", &[("zone", "z2")]),
    ];
    let w = on(pod("w", &[("app", "web")]), "a");
    let c = Cluster::new(&nodes, [&w]);
    let mut honor = spreading(
        pod("x", &[("app", "web")]),
        spread("zone", 1, DoNotSchedule),
    );
    honor.spec.node_selector = labels(&[("ok", "y")]);
    assert_eq!(feasible(&c, &honor), ["a"]);
    let mut ignore = honor.clone();
    ignore.spec.topology_spread_constraints[0].node_affinity_policy =
        Some(NodeInclusionPolicy::Ignore);
    assert!(feasible(&c, &ignore).is_empty());
}

#[test]
fn match_label_keys_spread_each_value_on_its_own() {
    use UnsatisfiableConstraintAction::DoNotSchedule;
    let nodes = zones();
    let old = on(pod("o", &[("app", "web"), ("hash", "v1")]), "a");
    let old2 = on(pod("o2", &[("app", "web"), ("hash", "v1")]), "b");
    let c = Cluster::new(&nodes, [&old, &old2]);
    let mut constraint = spread("zone", 1, DoNotSchedule);
    constraint.match_label_keys = vec!["hash".into()];
    let new = spreading(pod("n", &[("app", "web"), ("hash", "v2")]), constraint);
    // The v1 pods do not count for a v2 pod.
    assert_eq!(feasible(&c, &new), ["a", "b", "c"]);
}

#[test]
fn schedule_anyway_prefers_the_emptier_domain() {
    use UnsatisfiableConstraintAction::ScheduleAnyway;
    let nodes = zones();
    let w1 = on(pod("w1", &[("app", "web")]), "a");
    let c = Cluster::new(&nodes, [&w1]);
    let p = spreading(
        pod("w2", &[("app", "web")]),
        spread("zone", 1, ScheduleAnyway),
    );
    let e = c.evaluate(&p);
    let s: BTreeMap<&str, i64> = e
        .feasible
        .iter()
        .map(|s| (s.node, s.plugins.topology_spread))
        .collect();
    // raw: z1 1*ln(4) = 1.39 -> 1, z2 0; normalised 100*(1+0-s)/1.
    assert_eq!((s["a"], s["b"], s["c"], s["d"]), (0, 0, 100, 0));
    assert_eq!(bound_to(&c.schedule(&p, &mut rng(2))), Some("c"));
    // On the hostname: the node's own count.
    let h = spreading(
        pod("w2", &[("app", "web")]),
        spread(HOSTNAME_LABEL, 1, ScheduleAnyway),
    );
    let e = c.evaluate(&h);
    let s: BTreeMap<&str, i64> = e
        .feasible
        .iter()
        .map(|s| (s.node, s.plugins.topology_spread))
        .collect();
    assert_eq!((s["a"], s["b"], s["c"], s["d"]), (0, 100, 100, 100));
}

#[test]
fn a_batch_of_replicas_with_hostname_anti_affinity_lands_one_per_node() {
    let nodes: Vec<Node> = (0..200).map(|i| node(&format!("n{i:03}"), &[])).collect();
    let replicas: Vec<Pod> = (0..210)
        .map(|i| anti_on_hostname(pod(&format!("r{i}"), &[("app", "r")])))
        .collect();
    let mut c = Cluster::new(&nodes, []);
    let decisions = c.schedule_batch(&replicas, &mut rng(3));
    let mut placed: Vec<&str> = decisions.iter().filter_map(|(_, d)| bound_to(d)).collect();
    assert_eq!(placed.len(), 200);
    placed.sort();
    placed.dedup();
    assert_eq!(placed.len(), 200, "one per node");
    for (_, d) in &decisions[200..] {
        assert_eq!(
            message(d),
            "0/200 nodes are available: 200 node(s) didn't match pod anti-affinity rules."
        );
    }
}

#[test]
fn schedule_anyway_on_the_hostname_weighs_counts_by_the_number_of_scored_nodes() {
    use UnsatisfiableConstraintAction::ScheduleAnyway;
    let nodes = [node("a", &[]), node("b", &[]), node("c", &[])];
    let pods = [
        on(pod("w1", &[("app", "web")]), "a"),
        on(pod("w2", &[("app", "web")]), "a"),
        on(pod("w3", &[("app", "web")]), "b"),
    ];
    let c = Cluster::new(&nodes, &pods);
    let p = spreading(
        pod("w4", &[("app", "web")]),
        spread(HOSTNAME_LABEL, 1, ScheduleAnyway),
    );
    let e = c.evaluate(&p);
    let s: Vec<i64> = e
        .feasible
        .iter()
        .map(|s| s.plugins.topology_spread)
        .collect();
    // Weight ln(3 + 2) = 1.61: raw a round(3.22) = 3, b round(1.61) = 2,
    // c 0; normalised 100 * (3 + 0 - raw) / 3.
    assert_eq!(s, [0, 33, 100]);
}
