//! A Deployment's rolling-update budget and what "done" means, from
//! Kubernetes' documentation of `maxSurge` and `maxUnavailable`
//! (`Deployment` concepts page, "Rolling Update Deployment"): `maxSurge`
//! is a number or a percentage of the desired pods, rounded up;
//! `maxUnavailable` a number or a percentage, rounded down; the two may
//! not both be 0 (the controller then allows one unavailable pod, as
//! `ResolveFenceposts` does). `Recreate` surges nothing and allows every
//! pod to be unavailable.

use drover_api::IntOrString;

/// A budget value against `replicas`, rounded up or down.
fn resolve(v: &IntOrString, replicas: i64, up: bool) -> i64 {
    match v {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .expect("the test draws only valid percentages");
            let product = percent * replicas;
            if up {
                (product + 99) / 100
            } else {
                product / 100
            }
        }
    }
}

/// `(most pods at once, fewest available pods)` during a rolling update
/// of `replicas` pods.
pub fn rolling_bounds(replicas: i64, surge: &IntOrString, unavailable: &IntOrString) -> (i64, i64) {
    let mut s = resolve(surge, replicas, true);
    let mut u = resolve(unavailable, replicas, false);
    if s == 0 && u == 0 {
        u = 1;
    }
    s = s.max(0);
    u = u.clamp(0, replicas);
    (replicas + s, replicas - u)
}
