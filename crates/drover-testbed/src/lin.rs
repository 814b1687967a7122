//! A linearizability checker for one register (one key of the store), in
//! the manner of Wing & Gong (1993) with Lowe's memoisation (2017), as
//! porcupine and Knossos do it; written from the papers' description.
//!
//! A history is a set of operations, each with the time it was called and
//! the time it returned (none when its outcome is unknown: a write that
//! timed out may have taken effect at any time after its call, or never).
//! The search walks the history's events in time order and tries to
//! linearize, one at a time, the operations whose call came before the
//! first pending return; it backtracks when an operation must return
//! before any pending one can be linearized. A cache of (set of
//! linearized operations, register state) that were already explored cuts
//! the search to what differs.
//!
//! The register holds `Option<u64>` (None: the key is absent). Values are
//! unique per key in the testbed's workload, which is what makes a CAS on
//! the store's revisions (`expected_revision`) the same as a CAS on the
//! value read: a key has the revision `r` exactly while it holds the value
//! written at `r`.

use std::collections::HashSet;

/// The register's state.
pub type Value = Option<u64>;

/// What an operation asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Read,
    /// An unconditional write (`None`: a delete).
    Write(Value),
    /// Write `to` if the register holds `from` (`from` None: a create).
    Cas {
        from: Value,
        to: u64,
    },
}

/// What it answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// A read's value.
    Read(Value),
    /// A write or CAS was acknowledged.
    Ok,
    /// A CAS was refused: the register did not hold `from`.
    Failed,
    /// No answer (timeout, unreachable): it may or may not have happened.
    Unknown,
}

/// One operation of a history. Times are any monotonic clock's
/// (nanoseconds since the run's start in the testbed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub client: usize,
    pub input: Input,
    pub output: Output,
    pub call: u64,
    /// None for an unknown outcome (it may linearize any time after `call`).
    pub ret: Option<u64>,
}

/// Why a history is not linearizable, or why the search gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinError {
    /// No order fits. `stuck` is an operation that had to return before
    /// anything else could be placed, at the deepest point the search
    /// reached (`linearized` operations placed).
    #[error("not linearizable: {linearized} of {ops} operations placed at best; then {stuck:?} must return and cannot be placed")]
    NotLinearizable {
        ops: usize,
        linearized: usize,
        stuck: Op,
    },
    /// The search took more than its budget of steps.
    #[error("the search gave up after {0} steps (too much concurrency in the history)")]
    Budget(u64),
}

/// Applies `input` with answer `output` to `state`: the new state, or
/// None when the answer is impossible from `state`.
pub fn step(state: Value, input: Input, output: Output) -> Option<Value> {
    match (input, output) {
        (Input::Read, Output::Read(v)) => (v == state).then_some(state),
        (Input::Read, Output::Unknown) => Some(state),
        (Input::Read, _) => None,
        (Input::Write(v), Output::Ok | Output::Unknown) => Some(v),
        (Input::Write(_), _) => None,
        (Input::Cas { from, to }, Output::Ok) => (state == from).then_some(Some(to)),
        (Input::Cas { from, .. }, Output::Failed) => (state != from).then_some(state),
        // Either it happened, or it was refused, or it never arrived.
        (Input::Cas { from, to }, Output::Unknown) => {
            Some(if state == from { Some(to) } else { state })
        }
        (Input::Cas { .. }, Output::Read(_)) => None,
    }
}

const NIL: usize = usize::MAX;

/// The steps [`check`] takes at most before it gives up.
pub const DEFAULT_BUDGET: u64 = 20_000_000;

/// Checks that `ops` (one key's history) are linearizable from `initial`.
pub fn check(initial: Value, ops: &[Op]) -> Result<(), LinError> {
    check_with_budget(initial, ops, DEFAULT_BUDGET)
}

/// [`check`] with a budget of search steps.
pub fn check_with_budget(initial: Value, ops: &[Op], budget: u64) -> Result<(), LinError> {
    // Reads without an answer say nothing: leave them out.
    let ops: Vec<Op> = ops
        .iter()
        .copied()
        .filter(|o| !(o.input == Input::Read && o.output == Output::Unknown))
        .collect();
    let n = ops.len();
    if n == 0 {
        return Ok(());
    }
    // Events: (time, is_return, op). Calls sort before returns at the same
    // time (the permissive reading of a tie); unknown returns go last.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, o) in ops.iter().enumerate() {
        events.push((o.call, false, i));
        events.push((o.ret.unwrap_or(u64::MAX), true, i));
    }
    events.sort();
    // A doubly linked list over the events, with a head sentinel at 2n.
    let head = 2 * n;
    let mut next = vec![NIL; 2 * n + 1];
    let mut prev = vec![NIL; 2 * n + 1];
    let mut ret_of = vec![NIL; 2 * n]; // a call's return event
    let mut call_pos = vec![NIL; n];
    for (pos, &(_, is_ret, op)) in events.iter().enumerate() {
        if is_ret {
            ret_of[call_pos[op]] = pos;
        } else {
            call_pos[op] = pos;
        }
    }
    // Event i follows i - 1 (the head before event 0).
    next[head] = 0;
    for (pos, p) in prev.iter_mut().enumerate().take(2 * n) {
        *p = if pos == 0 { head } else { pos - 1 };
    }
    for (pos, x) in next.iter_mut().enumerate().take(2 * n - 1) {
        *x = pos + 1;
    }
    let op_of = |pos: usize| events[pos].2;
    let is_ret = |pos: usize| events[pos].1;

    let words = n.div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, Value)> = HashSet::new();
    // (call event, state before it)
    let mut stack: Vec<(usize, Value)> = Vec::new();
    let mut state = initial;
    let mut entry = next[head];
    let mut steps = 0u64;
    let mut best = (0usize, NIL);

    while next[head] != NIL {
        steps += 1;
        if steps > budget {
            return Err(LinError::Budget(budget));
        }
        if entry != NIL && !is_ret(entry) {
            let op = op_of(entry);
            let o = &ops[op];
            if let Some(new_state) = step(state, o.input, o.output) {
                linearized[op / 64] |= 1 << (op % 64);
                if cache.insert((linearized.clone(), new_state)) {
                    stack.push((entry, state));
                    state = new_state;
                    // Lift the call and its return out of the list.
                    let r = ret_of[entry];
                    for e in [entry, r] {
                        next[prev[e]] = next[e];
                        if next[e] != NIL {
                            prev[next[e]] = prev[e];
                        }
                    }
                    entry = next[head];
                    continue;
                }
                linearized[op / 64] &= !(1 << (op % 64));
            }
            entry = next[entry];
        } else {
            // A return (or the end of what is callable): the pending
            // operation it belongs to cannot be placed here. Backtrack.
            if stack.len() >= best.0 && entry != NIL {
                best = (stack.len(), op_of(entry));
            }
            let Some((call, before)) = stack.pop() else {
                let stuck = if best.1 == NIL { 0 } else { best.1 };
                return Err(LinError::NotLinearizable {
                    ops: n,
                    linearized: best.0,
                    stuck: ops[stuck],
                });
            };
            let op = op_of(call);
            linearized[op / 64] &= !(1 << (op % 64));
            state = before;
            // Put the call and its return back (reverse order of lifting).
            let r = ret_of[call];
            for e in [r, call] {
                next[prev[e]] = e;
                if next[e] != NIL {
                    prev[next[e]] = e;
                }
            }
            entry = next[call];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: usize, input: Input, output: Output, call: u64, ret: u64) -> Op {
        Op {
            client,
            input,
            output,
            call,
            ret: Some(ret),
        }
    }
    fn w(c: usize, v: u64, call: u64, ret: u64) -> Op {
        op(c, Input::Write(Some(v)), Output::Ok, call, ret)
    }
    fn r(c: usize, v: Value, call: u64, ret: u64) -> Op {
        op(c, Input::Read, Output::Read(v), call, ret)
    }
    fn cas(c: usize, from: Value, to: u64, out: Output, call: u64, ret: u64) -> Op {
        op(c, Input::Cas { from, to }, out, call, ret)
    }
    fn unknown(mut o: Op) -> Op {
        o.output = Output::Unknown;
        o.ret = None;
        o
    }

    #[test]
    fn sequential_histories() {
        assert_eq!(check(None, &[]), Ok(()));
        let good = [
            r(0, None, 0, 1),
            w(0, 1, 2, 3),
            r(1, Some(1), 4, 5),
            cas(1, Some(1), 2, Output::Ok, 6, 7),
            cas(0, Some(1), 3, Output::Failed, 8, 9),
            r(0, Some(2), 10, 11),
            op(0, Input::Write(None), Output::Ok, 12, 13),
            cas(1, None, 4, Output::Ok, 14, 15),
            r(1, Some(4), 16, 17),
        ];
        assert_eq!(check(None, &good), Ok(()));
        // A stale read after the write returned.
        let bad = [w(0, 1, 0, 1), w(0, 2, 2, 3), r(1, Some(1), 4, 5)];
        assert!(matches!(
            check(None, &bad),
            Err(LinError::NotLinearizable { .. })
        ));
        // A value nobody wrote.
        assert!(check(None, &[r(0, Some(9), 0, 1)]).is_err());
        // The initial state counts.
        assert_eq!(check(Some(9), &[r(0, Some(9), 0, 1)]), Ok(()));
    }

    #[test]
    fn concurrent_operations_may_take_effect_in_any_order() {
        // A read overlapping a write sees either value.
        for seen in [None, Some(1)] {
            let h = [w(0, 1, 0, 10), r(1, seen, 2, 5)];
            assert_eq!(check(None, &h), Ok(()), "{seen:?}");
        }
        // Two overlapping writes, then reads agree on the last one.
        let h = [
            w(0, 1, 0, 10),
            w(1, 2, 1, 11),
            r(2, Some(1), 12, 13),
            r(0, Some(1), 14, 15),
        ];
        assert_eq!(check(None, &h), Ok(()));
        // …but two later reads may not disagree (2 then 1 with no write between).
        let h = [
            w(0, 1, 0, 10),
            w(1, 2, 1, 11),
            r(2, Some(2), 12, 13),
            r(0, Some(1), 14, 15),
        ];
        assert!(check(None, &h).is_err());
        // Concurrent reads that see the write flip back: 1, then None.
        let h = [w(0, 1, 0, 100), r(1, Some(1), 10, 20), r(2, None, 30, 40)];
        assert!(check(None, &h).is_err());
    }

    #[test]
    fn compare_and_swap() {
        // Two CAS from the same value cannot both win.
        let h = [
            w(0, 1, 0, 1),
            cas(1, Some(1), 2, Output::Ok, 2, 10),
            cas(2, Some(1), 3, Output::Ok, 3, 11),
        ];
        assert!(check(None, &h).is_err());
        // One wins, the other is refused: fine in either order of answers.
        let h = [
            w(0, 1, 0, 1),
            cas(1, Some(1), 2, Output::Ok, 2, 10),
            cas(2, Some(1), 3, Output::Failed, 3, 11),
            r(0, Some(2), 12, 13),
        ];
        assert_eq!(check(None, &h), Ok(()));
        // A refused CAS while the register held the expected value.
        let h = [w(0, 1, 0, 1), cas(1, Some(1), 2, Output::Failed, 2, 3)];
        assert!(check(None, &h).is_err());
        // Two creates of one absent key cannot both win.
        let h = [
            cas(0, None, 1, Output::Ok, 0, 5),
            cas(1, None, 2, Output::Ok, 1, 6),
        ];
        assert!(check(None, &h).is_err());
    }

    #[test]
    fn unknown_outcomes_may_happen_late_or_never() {
        // A timed-out write seen much later: fine.
        let h = [
            w(0, 1, 0, 1),
            unknown(w(1, 2, 2, 0)),
            r(0, Some(1), 10, 11),
            r(0, Some(2), 20, 21),
        ];
        assert_eq!(check(None, &h), Ok(()));
        // Never seen: fine too.
        let h = [w(0, 1, 0, 1), unknown(w(1, 2, 2, 0)), r(0, Some(1), 10, 11)];
        assert_eq!(check(None, &h), Ok(()));
        // Seen, then gone without another write: lost.
        let h = [
            w(0, 1, 0, 1),
            unknown(w(1, 2, 2, 0)),
            r(0, Some(2), 10, 11),
            r(0, Some(1), 20, 21),
        ];
        assert!(check(None, &h).is_err());
        // Not before its call.
        let h = [w(0, 1, 0, 1), r(0, Some(2), 2, 3), unknown(w(1, 2, 5, 0))];
        assert!(check(None, &h).is_err());
        // An unknown CAS whose expected value is gone is harmless.
        let h = [
            w(0, 1, 0, 1),
            w(0, 2, 2, 3),
            unknown(cas(1, Some(1), 5, Output::Unknown, 4, 0)),
            r(0, Some(2), 6, 7),
        ];
        assert_eq!(check(None, &h), Ok(()));
        // An unknown read says nothing.
        let h = [w(0, 1, 0, 1), unknown(r(1, Some(7), 2, 3))];
        assert_eq!(check(None, &h), Ok(()));
    }

    #[test]
    fn a_long_concurrent_history_is_checked_quickly() {
        // 4 clients, 3000 operations, each overlapping its neighbours: a
        // write then a read of the same value by every client in turn.
        let mut h = Vec::new();
        let mut t = 0u64;
        for i in 0..750u64 {
            let c = (i % 4) as usize;
            h.push(w(c, i, t, t + 15));
            h.push(r((c + 1) % 4, Some(i), t + 16, t + 30));
            h.push(r((c + 2) % 4, Some(i), t + 17, t + 31));
            h.push(r((c + 3) % 4, Some(i), t + 18, t + 32));
            t += 40;
        }
        assert_eq!(check(None, &h), Ok(()));
        // The same with one stale read in the middle.
        h[1501] = r(3, Some(373), h[1501].call, h[1501].ret.unwrap_or(0));
        assert!(check(None, &h).is_err());
    }

    #[test]
    fn the_budget_bounds_the_search() {
        let h: Vec<Op> = (0..40).map(|i| w(i, i as u64, 0, 100)).collect();
        let mut bad = h.clone();
        bad.push(r(99, Some(1000), 200, 201));
        assert_eq!(
            check_with_budget(None, &bad, 1000),
            Err(LinError::Budget(1000))
        );
    }
}
