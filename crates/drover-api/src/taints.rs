//! Taints and tolerations: which taints a pod tolerates, and the
//! tolerations Kubernetes gives every daemon pod.
//!
//! A toleration matches a taint when its effect is empty or equal, its key
//! is empty or equal, and, with operator `Equal` (the default), its value
//! equals the taint's; `Exists` matches any value. A toleration with an
//! empty key and `Exists` tolerates every taint (of its effect, or of all
//! effects when the effect is empty).
//!
//! ```
//! use drover_api::{Taint, TaintEffect, Toleration};
//! use drover_api::taints::find_untolerated;
//!
//! let taints: Vec<Taint> = vec!["dedicated=gpu:NoSchedule".parse().unwrap()];
//! let untolerated = find_untolerated(&taints, &[], |t| t.effect == Some(TaintEffect::NoSchedule));
//! assert_eq!(untolerated.map(ToString::to_string).as_deref(), Some("dedicated=gpu:NoSchedule"));
//! ```

use std::fmt;
use std::str::FromStr;

use crate::core_v1::{PodSpec, Taint, TaintEffect, Toleration, TolerationOperator};
use crate::validation::names::{is_qualified_name, is_valid_label_value};

/// The node is not ready (its agent reports a problem).
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The node is unreachable (its agent stopped heartbeating).
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The node is cordoned (`spec.unschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// The node is short of memory.
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// The node is short of disk.
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// The node is short of process IDs.
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// The node's network is not configured.
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

impl Toleration {
    /// Whether this toleration tolerates the taint (see the module
    /// documentation). An operator drover does not know tolerates nothing.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = &self.effect {
            if taint.effect.as_ref() != Some(effect) {
                return false;
            }
        }
        if !self.key.is_empty() && self.key != taint.key {
            return false;
        }
        match &self.operator {
            None | Some(TolerationOperator::Equal) => self.value == taint.value,
            Some(TolerationOperator::Exists) => true,
            Some(TolerationOperator::Other(_)) => false,
        }
    }
}

/// Whether the toleration tolerates the taint; see [`Toleration::tolerates`].
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    toleration.tolerates(taint)
}

/// Whether any of the tolerations tolerates the taint.
pub fn is_tolerated(taint: &Taint, tolerations: &[Toleration]) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The first taint that passes `filter` and that no toleration tolerates,
/// as Kubernetes' `FindMatchingUntoleratedTaint`. The DaemonSet controller
/// filters on `NoSchedule` and `NoExecute` to decide whether a new pod may
/// go to a node, and on `NoExecute` alone to decide whether a running one
/// must go.
pub fn find_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    filter: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    untolerated(taints, tolerations, filter).next()
}

/// Every taint that passes `filter` and that no toleration tolerates, for
/// `describe` to list.
pub fn untolerated<'a, 'b>(
    taints: &'a [Taint],
    tolerations: &'b [Toleration],
    filter: impl Fn(&Taint) -> bool + 'b,
) -> impl Iterator<Item = &'a Taint> + 'b
where
    'a: 'b,
{
    taints
        .iter()
        .filter(move |taint| filter(taint) && !is_tolerated(taint, tolerations))
}

/// A filter for [`find_untolerated`]: taints with one of these effects.
pub fn with_effects(effects: &[TaintEffect]) -> impl Fn(&Taint) -> bool + '_ {
    move |taint| taint.effect.as_ref().is_some_and(|e| effects.contains(e))
}

fn exists(key: &str, effect: TaintEffect) -> Toleration {
    Toleration {
        key: key.to_owned(),
        operator: Some(TolerationOperator::Exists),
        effect: Some(effect),
        ..Toleration::default()
    }
}

/// The tolerations Kubernetes adds to every daemon pod
/// (`AddOrUpdateDaemonPodTolerations`): `not-ready` and `unreachable`
/// `NoExecute` without `tolerationSeconds` (a daemon pod stays on a node
/// that has problems); `disk-pressure`, `memory-pressure`, `pid-pressure`
/// and `unschedulable` `NoSchedule` (a cordoned node still runs daemons);
/// and `network-unavailable` `NoSchedule` for a pod on the host network.
pub fn daemon_pod_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut tolerations = vec![
        exists(TAINT_NODE_NOT_READY, TaintEffect::NoExecute),
        exists(TAINT_NODE_UNREACHABLE, TaintEffect::NoExecute),
        exists(TAINT_NODE_DISK_PRESSURE, TaintEffect::NoSchedule),
        exists(TAINT_NODE_MEMORY_PRESSURE, TaintEffect::NoSchedule),
        exists(TAINT_NODE_PID_PRESSURE, TaintEffect::NoSchedule),
        exists(TAINT_NODE_UNSCHEDULABLE, TaintEffect::NoSchedule),
    ];
    if host_network {
        tolerations.push(exists(
            TAINT_NODE_NETWORK_UNAVAILABLE,
            TaintEffect::NoSchedule,
        ));
    }
    tolerations
}

/// Adds a toleration to a pod spec, or replaces one with the same key,
/// operator, value and effect (e.g. a `not-ready` toleration with
/// `tolerationSeconds` becomes unbounded). Returns whether the spec changed.
pub fn add_or_update_toleration(spec: &mut PodSpec, toleration: Toleration) -> bool {
    let same = |t: &Toleration| {
        t.key == toleration.key
            && t.operator == toleration.operator
            && t.value == toleration.value
            && t.effect == toleration.effect
    };
    match spec.tolerations.iter_mut().find(|t| same(t)) {
        Some(existing) if *existing == toleration => false,
        Some(existing) => {
            *existing = toleration;
            true
        }
        None => {
            spec.tolerations.push(toleration);
            true
        }
    }
}

/// Adds [`daemon_pod_tolerations`] to a daemon pod's spec, as the
/// DaemonSet controller does for every pod it creates (and for its
/// eligibility checks).
pub fn add_daemon_pod_tolerations(spec: &mut PodSpec) {
    for toleration in daemon_pod_tolerations(spec.host_network) {
        add_or_update_toleration(spec, toleration);
    }
}

/// Kubernetes' default `tolerationSeconds` for the `not-ready` and
/// `unreachable` `NoExecute` taints (the `DefaultTolerationSeconds`
/// admission plugin's `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// Kubernetes' `DefaultTolerationSeconds` admission: a pod that has no
/// toleration for the `not-ready` (or `unreachable`) `NoExecute` taint (a
/// toleration with that key or no key, and `NoExecute` or no effect)
/// gets `{key, operator: Exists, effect: NoExecute, tolerationSeconds:
/// 300}`, so that it leaves a node that stays away five minutes. Returns
/// whether the spec changed.
pub fn add_default_toleration_seconds(spec: &mut PodSpec) -> bool {
    let mut changed = false;
    for key in [TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE] {
        let covered = spec.tolerations.iter().any(|t| {
            (t.key == key || t.key.is_empty())
                && (t.effect.is_none() || t.effect == Some(TaintEffect::NoExecute))
        });
        if !covered {
            spec.tolerations.push(Toleration {
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                ..exists(key, TaintEffect::NoExecute)
            });
            changed = true;
        }
    }
    changed
}

/// Why a taint written as text (`key=value:Effect`) is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid taint {text:?}: {reason}")]
pub struct TaintParseError {
    /// The text.
    pub text: String,
    /// Why it is not valid.
    pub reason: String,
}

impl FromStr for Taint {
    type Err = TaintParseError;

    /// Parses kubectl's taint syntax: `key=value:Effect` or `key:Effect`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| TaintParseError {
            text: text.to_owned(),
            reason,
        };
        let (key_value, effect) = text
            .rsplit_once(':')
            .ok_or_else(|| fail("expected key=value:Effect or key:Effect".to_owned()))?;
        let effect = TaintEffect::from(effect);
        if !effect.is_known() {
            return Err(fail(format!(
                "unsupported effect {:?} (supported: NoSchedule, PreferNoSchedule, NoExecute)",
                effect.as_str()
            )));
        }
        let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
        let errors = is_qualified_name(key);
        if !errors.is_empty() {
            return Err(fail(format!("key {key:?}: {}", errors.join("; "))));
        }
        let errors = is_valid_label_value(value);
        if !errors.is_empty() {
            return Err(fail(format!("value {value:?}: {}", errors.join("; "))));
        }
        Ok(Taint {
            key: key.to_owned(),
            value: value.to_owned(),
            effect: Some(effect),
            ..Taint::default()
        })
    }
}

impl fmt::Display for Taint {
    /// kubectl's form: `key=value:Effect`, or `key:Effect` without value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)?;
        if !self.value.is_empty() {
            write!(f, "={}", self.value)?;
        }
        if let Some(effect) = &self.effect {
            write!(f, ":{effect}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Toleration {
    /// A short form for `describe`: `key=value:Effect`, `key:Effect` for
    /// `Exists`, `:Effect` for all keys, with `for Ns` when bounded.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)?;
        if self.operator != Some(TolerationOperator::Exists) {
            write!(f, "={}", self.value)?;
        }
        if let Some(effect) = &self.effect {
            write!(f, ":{effect}")?;
        }
        if let Some(seconds) = self.toleration_seconds {
            write!(f, " for {seconds}s")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect: Some(effect),
            ..Taint::default()
        }
    }

    fn toleration(
        key: &str,
        operator: Option<TolerationOperator>,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.into(),
            operator,
            value: value.into(),
            effect,
            ..Toleration::default()
        }
    }

    #[test]
    fn matching_rules() {
        let t = taint("dedicated", "gpu", TaintEffect::NoSchedule);
        use TaintEffect::*;
        use TolerationOperator::*;
        let cases = [
            (toleration("dedicated", None, "gpu", None), true),
            (
                toleration("dedicated", Some(Equal), "gpu", Some(NoSchedule)),
                true,
            ),
            (
                toleration("dedicated", Some(Equal), "cpu", Some(NoSchedule)),
                false,
            ),
            (
                toleration("dedicated", Some(Exists), "", Some(NoSchedule)),
                true,
            ),
            (
                toleration("dedicated", Some(Exists), "", Some(NoExecute)),
                false,
            ),
            (toleration("other", Some(Exists), "", None), false),
            (toleration("", Some(Exists), "", None), true),
            (toleration("", Some(Exists), "", Some(NoExecute)), false),
            (
                toleration(
                    "dedicated",
                    Some(TolerationOperator::Other("Gt".into())),
                    "gpu",
                    None,
                ),
                false,
            ),
            // 05-fluentd.yaml: a key and effect without operator means Equal "".
            (toleration("dedicated", None, "", Some(NoSchedule)), false),
        ];
        for (tol, expected) in cases {
            assert_eq!(tolerates(&tol, &t), expected, "{tol:?}");
        }
        let master = taint("node-role.kubernetes.io/master", "", NoSchedule);
        assert!(
            toleration("node-role.kubernetes.io/master", None, "", Some(NoSchedule))
                .tolerates(&master)
        );
    }

    #[test]
    fn find_untolerated_respects_the_filter() {
        use TaintEffect::*;
        let taints = vec![
            taint("a", "", PreferNoSchedule),
            taint("b", "", NoSchedule),
            taint("c", "", NoExecute),
        ];
        let tolerations = vec![toleration("b", Some(TolerationOperator::Exists), "", None)];
        let both = [NoSchedule, NoExecute];
        assert_eq!(
            find_untolerated(&taints, &tolerations, with_effects(&both)).map(|t| t.key.as_str()),
            Some("c")
        );
        assert_eq!(
            find_untolerated(&taints, &tolerations, with_effects(&[NoSchedule])),
            None
        );
        assert_eq!(
            find_untolerated(&taints, &[], |_| true).map(|t| t.key.as_str()),
            Some("a")
        );
        assert_eq!(untolerated(&taints, &[], with_effects(&both)).count(), 2);
    }

    #[test]
    fn daemon_pods_tolerate_node_problems() {
        let mut spec = PodSpec {
            tolerations: vec![Toleration {
                key: TAINT_NODE_NOT_READY.into(),
                operator: Some(TolerationOperator::Exists),
                effect: Some(TaintEffect::NoExecute),
                toleration_seconds: Some(300),
                ..Toleration::default()
            }],
            ..PodSpec::default()
        };
        add_daemon_pod_tolerations(&mut spec);
        assert_eq!(spec.tolerations.len(), 6);
        assert!(spec
            .tolerations
            .iter()
            .all(|t| t.toleration_seconds.is_none()));
        for (key, effect) in [
            (TAINT_NODE_NOT_READY, TaintEffect::NoExecute),
            (TAINT_NODE_UNREACHABLE, TaintEffect::NoExecute),
            (TAINT_NODE_DISK_PRESSURE, TaintEffect::NoSchedule),
            (TAINT_NODE_MEMORY_PRESSURE, TaintEffect::NoSchedule),
            (TAINT_NODE_PID_PRESSURE, TaintEffect::NoSchedule),
            (TAINT_NODE_UNSCHEDULABLE, TaintEffect::NoSchedule),
        ] {
            assert!(
                is_tolerated(&taint(key, "", effect), &spec.tolerations),
                "{key}"
            );
        }
        let network = taint(TAINT_NODE_NETWORK_UNAVAILABLE, "", TaintEffect::NoSchedule);
        assert!(!is_tolerated(&network, &spec.tolerations));
        // Idempotent.
        let before = spec.clone();
        add_daemon_pod_tolerations(&mut spec);
        assert_eq!(spec, before);

        let mut host = PodSpec {
            host_network: true,
            ..PodSpec::default()
        };
        add_daemon_pod_tolerations(&mut host);
        assert!(is_tolerated(&network, &host.tolerations));
        assert_eq!(daemon_pod_tolerations(true).len(), 7);
    }

    #[test]
    fn add_or_update_toleration_says_whether_the_spec_changed() {
        let bounded = Toleration {
            key: TAINT_NODE_NOT_READY.into(),
            operator: Some(TolerationOperator::Exists),
            effect: Some(TaintEffect::NoExecute),
            toleration_seconds: Some(300),
            ..Toleration::default()
        };
        let unbounded = Toleration {
            toleration_seconds: None,
            ..bounded.clone()
        };
        let mut spec = PodSpec::default();
        assert!(
            add_or_update_toleration(&mut spec, bounded.clone()),
            "added"
        );
        assert!(
            !add_or_update_toleration(&mut spec, bounded),
            "the same again"
        );
        assert!(
            add_or_update_toleration(&mut spec, unbounded.clone()),
            "updated"
        );
        assert_eq!(spec.tolerations, std::slice::from_ref(&unbounded));
        assert!(!add_or_update_toleration(&mut spec, unbounded));
    }

    #[test]
    fn taint_text_form() {
        let t: Taint = "dedicated=gpu:NoSchedule".parse().unwrap();
        assert_eq!(t, taint("dedicated", "gpu", TaintEffect::NoSchedule));
        assert_eq!(t.to_string(), "dedicated=gpu:NoSchedule");
        let t: Taint = "example.com/x:NoExecute".parse().unwrap();
        assert_eq!(t.to_string(), "example.com/x:NoExecute");
        assert!("x=y".parse::<Taint>().is_err());
        assert!("x=y:Sometimes".parse::<Taint>().is_err());
        assert!("bad key=y:NoSchedule".parse::<Taint>().is_err());
        assert!("x=bad value:NoSchedule".parse::<Taint>().is_err());
        let tol = toleration(
            "k",
            Some(TolerationOperator::Exists),
            "",
            Some(TaintEffect::NoExecute),
        );
        assert_eq!(tol.to_string(), "k:NoExecute");
    }

    fn effect_strategy() -> impl Strategy<Value = Option<TaintEffect>> {
        prop_oneof![
            Just(None),
            Just(Some(TaintEffect::NoSchedule)),
            Just(Some(TaintEffect::PreferNoSchedule)),
            Just(Some(TaintEffect::NoExecute)),
        ]
    }

    fn taint_strategy() -> impl Strategy<Value = Taint> {
        ("[a-c]{0,2}", "[x-z]{0,2}", effect_strategy()).prop_map(|(key, value, effect)| Taint {
            key,
            value,
            effect,
            ..Taint::default()
        })
    }

    fn toleration_strategy() -> impl Strategy<Value = Toleration> {
        (
            "[a-c]{0,2}",
            prop_oneof![
                Just(None),
                Just(Some(TolerationOperator::Equal)),
                Just(Some(TolerationOperator::Exists))
            ],
            "[x-z]{0,2}",
            effect_strategy(),
        )
            .prop_map(|(key, operator, value, effect)| Toleration {
                key,
                operator,
                value,
                effect,
                ..Toleration::default()
            })
    }

    proptest! {
        #[test]
        fn exists_with_empty_key_tolerates_everything(taint in taint_strategy()) {
            let all = toleration("", Some(TolerationOperator::Exists), "", None);
            prop_assert!(all.tolerates(&taint));
        }

        #[test]
        fn exists_with_an_effect_tolerates_exactly_that_effect(taint in taint_strategy(), effect in effect_strategy()) {
            let tol = toleration("", Some(TolerationOperator::Exists), "", effect.clone());
            prop_assert_eq!(tol.tolerates(&taint), effect.is_none() || effect == taint.effect);
        }

        #[test]
        fn a_taint_is_tolerated_by_its_own_toleration(taint in taint_strategy()) {
            let tol = toleration(&taint.key, None, &taint.value, taint.effect.clone());
            prop_assert!(tol.tolerates(&taint));
        }

        #[test]
        fn exists_tolerates_at_least_what_equal_does(tol in toleration_strategy(), taint in taint_strategy()) {
            let exists = Toleration { operator: Some(TolerationOperator::Exists), value: String::new(), ..tol.clone() };
            if tol.tolerates(&taint) {
                prop_assert!(exists.tolerates(&taint));
            }
        }

        #[test]
        fn find_untolerated_is_none_iff_every_filtered_taint_is_tolerated(
            taints in prop::collection::vec(taint_strategy(), 0..5),
            tolerations in prop::collection::vec(toleration_strategy(), 0..4),
        ) {
            let filter = with_effects(&[TaintEffect::NoSchedule, TaintEffect::NoExecute]);
            let found = find_untolerated(&taints, &tolerations, &filter);
            let all_tolerated = taints.iter().filter(|t| filter(t)).all(|t| is_tolerated(t, &tolerations));
            prop_assert_eq!(found.is_none(), all_tolerated);
            if let Some(taint) = found {
                prop_assert!(filter(taint) && !is_tolerated(taint, &tolerations));
            }
        }

        #[test]
        fn more_tolerations_never_untolerate(
            taints in prop::collection::vec(taint_strategy(), 0..5),
            mut tolerations in prop::collection::vec(toleration_strategy(), 0..4),
            extra in toleration_strategy(),
        ) {
            let before = untolerated(&taints, &tolerations, |_| true).count();
            tolerations.push(extra);
            let after = untolerated(&taints, &tolerations, |_| true).count();
            prop_assert!(after <= before);
        }
    }
    #[test]
    fn default_toleration_seconds_are_added_only_when_missing() {
        let mut spec = PodSpec::default();
        assert!(add_default_toleration_seconds(&mut spec));
        assert_eq!(spec.tolerations.len(), 2);
        assert!(spec
            .tolerations
            .iter()
            .all(|t| t.toleration_seconds == Some(300)
                && t.effect == Some(TaintEffect::NoExecute)
                && t.operator == Some(TolerationOperator::Exists)));
        assert!(!add_default_toleration_seconds(&mut spec), "added once");
        // A daemon pod's unlimited tolerations cover both keys.
        let mut daemon = PodSpec::default();
        add_daemon_pod_tolerations(&mut daemon);
        let before = daemon.tolerations.clone();
        assert!(!add_default_toleration_seconds(&mut daemon));
        assert_eq!(daemon.tolerations, before);
        // A toleration of every key, or of the key with any effect, covers it.
        let mut all = PodSpec::default();
        all.tolerations.push(Toleration {
            operator: Some(TolerationOperator::Exists),
            ..Toleration::default()
        });
        assert!(!add_default_toleration_seconds(&mut all));
        let mut one = PodSpec::default();
        one.tolerations.push(Toleration {
            key: TAINT_NODE_NOT_READY.into(),
            operator: Some(TolerationOperator::Exists),
            effect: Some(TaintEffect::NoSchedule),
            ..Toleration::default()
        });
        assert!(add_default_toleration_seconds(&mut one));
        assert_eq!(
            one.tolerations.len(),
            3,
            "a NoSchedule toleration does not cover it"
        );
    }
}
