use super::*;

fn class(name: &str, value: i32, global_default: bool, policy: Option<&str>) -> PriorityClass {
    let mut c = PriorityClass::default();
    c.metadata.name = name.into();
    c.value = value;
    c.global_default = global_default;
    c.preemption_policy = policy.map(str::to_owned);
    c
}

#[test]
fn a_pod_naming_no_class_gets_zero_and_may_preempt_when_there_is_no_global_default() {
    let p = Priorities::new([&class("high", 1000, false, None)]);
    assert_eq!(p.of(""), Some((0, true)));
    assert_eq!(Priorities::new([]).of(""), Some((0, true)));
}

#[test]
fn a_class_is_looked_up_by_name_with_its_value_and_preemption_policy() {
    let classes = [
        class("high", 1000, false, None),
        class("explicit", 500, false, Some("PreemptLowerPriority")),
        class("polite", 2000, false, Some(PREEMPT_NEVER)),
        class("negative", -10, false, None),
    ];
    let p = Priorities::new(&classes);
    assert_eq!(p.of("high"), Some((1000, true)));
    assert_eq!(p.of("explicit"), Some((500, true)));
    assert_eq!(p.of("polite"), Some((2000, false)));
    assert_eq!(p.of("negative"), Some((-10, true)));
    assert_eq!(p.of("missing"), None);
    assert_eq!(p.of("High"), None);
}

#[test]
fn the_built_in_classes_exist_without_being_created_and_may_preempt() {
    let p = Priorities::new([]);
    assert_eq!(p.of("system-node-critical"), Some((2_000_001_000, true)));
    assert_eq!(p.of("system-cluster-critical"), Some((2_000_000_000, true)));
}

/// Kubernetes' priority admission gives a pod without a class the global
/// default's value and its preemptionPolicy.
#[test]
fn a_pod_naming_no_class_gets_the_global_default_value_and_preemption_policy() {
    let classes = [
        class("normal", 100, false, None),
        class("default", 7, true, None),
    ];
    let p = Priorities::new(&classes);
    assert_eq!(p.of(""), Some((7, true)));
    assert_eq!(p.of("default"), Some((7, true)));
    let never = [class("default", 7, true, Some(PREEMPT_NEVER))];
    assert_eq!(Priorities::new(&never).of(""), Some((7, false)));
}

/// Should two classes be global defaults (a race Kubernetes allows), the
/// one with the lowest value wins, whatever the order.
#[test]
fn of_several_global_defaults_the_lowest_value_wins() {
    let a = class("a", 50, true, None);
    let b = class("b", -5, true, Some(PREEMPT_NEVER));
    let c = class("c", 10, true, None);
    for order in [[&a, &b, &c], [&c, &b, &a], [&b, &a, &c]] {
        assert_eq!(Priorities::new(order).of(""), Some((-5, false)));
    }
}
