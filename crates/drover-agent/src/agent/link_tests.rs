//! The unit tests of `agent/link.rs`.
use super::*;

fn list(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Found by the fault testbed (a member replaced, then another one
/// killed): the nodes tried the `--server` address of the removed
/// member, which cost them the connect timeout, and turned NotReady.
#[test]
fn the_next_server_is_a_member_first() {
    // --server a, b, c; the cluster is now c, d, e (a and b removed).
    let servers = list(&["a", "b", "c", "d", "e"]);
    let members = list(&["c", "d", "e"]);
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..200 {
        // The session on d ended: c or e, never a or b, for a round.
        for failures in 0..2 {
            let next = next_server(&servers, 3, &members, failures, &mut rng);
            assert!([2, 4].contains(&next), "{next} after {failures} failures");
        }
    }
    // After a round failed, every other attempt may go anywhere else.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.insert(next_server(&servers, 3, &members, 3, &mut rng));
        let next = next_server(&servers, 3, &members, 4, &mut rng);
        assert!([2, 4].contains(&next));
    }
    assert_eq!(seen, [0, 1, 2, 4].into_iter().collect());
    // Members not heard of yet: any other address.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        seen.insert(next_server(&servers, 0, &[], 0, &mut rng));
    }
    assert_eq!(seen, [1, 2, 3, 4].into_iter().collect());
    assert_eq!(next_server(&list(&["a"]), 0, &[], 0, &mut rng), 0);
}

#[test]
fn the_agents_own_stall_is_not_counted_as_the_servers_silence() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    // On time, or a little late: the silence counts from the message.
    assert_eq!(heard_as_of(t0, t0 + s(1), t0 + s(1)), t0);
    assert_eq!(heard_as_of(t0, t0 + s(1), t0 + s(1) + LATE_WAKE), t0);
    // The process stalled 6 s a second after the last message: 1 s of
    // silence counted, not 7 (the answers wait unread in the socket).
    let after = heard_as_of(t0, t0 + s(1), t0 + s(7));
    assert_eq!(t0 + s(7) - after, s(1));
    assert!(t0 + s(7) < after + SILENCE);
    // Only the time the loop was on time counts (100 ms here).
    assert_eq!(
        heard_as_of(t0 + ms(900), t0 + s(1), t0 + s(5)),
        t0 + ms(4900)
    );
    // A message that came after the deadline was set: never counted
    // from a time still to come.
    assert_eq!(heard_as_of(t0 + ms(900), t0, t0 + s(2)), t0 + s(2));
}

#[test]
fn the_interval_a_server_asks_for_is_bounded_and_sets_the_silence() {
    let ms = Duration::from_millis;
    assert_eq!(asked_interval(0), None, "0 asks for nothing");
    assert_eq!(asked_interval(2_000), Some(ms(2_000)));
    assert_eq!(asked_interval(1), Some(ms(250)));
    assert_eq!(asked_interval(u32::MAX), Some(Duration::from_secs(60)));
    // Three intervals, never below 3 s.
    assert_eq!(silence_for(ms(1_000)), SILENCE);
    assert_eq!(silence_for(ms(250)), SILENCE);
    assert_eq!(silence_for(ms(2_000)), ms(6_000));
}

#[test]
fn the_hello_says_what_this_agent_speaks() {
    let mut node = drover_api::Node::default();
    node.metadata.name = "edge-1".into();
    let h = hello_of(&node);
    assert_eq!(h.agent_version, crate::VERSION);
    let peer = drover_proto::caps::Peer::new(&h.agent_version, &h.capabilities);
    assert!(peer.announced, "capabilities sent");
    for c in drover_proto::caps::SESSION {
        assert!(peer.supports(c), "{c}");
    }
    let back: serde_json::Value = serde_json::from_slice(&h.node).expect("JSON");
    assert_eq!(back["metadata"]["name"], "edge-1");
}
