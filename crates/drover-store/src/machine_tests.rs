//! Unit tests of the state machine: writes, compare-and-swap, transactions,
//! retried requests, history, snapshots and members.
use super::*;
use crate::{Create, Delete, Update};
use drover_proto::v1::Request;

fn tree() -> (tempfile::TempDir, sled::Tree) {
    let d = tempfile::tempdir().unwrap();
    let db = sled::open(d.path()).unwrap();
    (d, db.open_tree("t").unwrap())
}

fn req(id: u64, client: u64, op: op::Op) -> Request {
    Request {
        origin: 1,
        id,
        op: Some(Op { op: Some(op) }),
        client_request_id: client,
    }
}

fn create(k: &str, v: &str) -> op::Op {
    op::Op::Create(Create {
        key: k.into(),
        value: v.into(),
    })
}

fn update(k: &str, v: &str, expected: u64) -> op::Op {
    op::Op::Update(Update {
        key: k.into(),
        value: v.into(),
        expected_revision: expected,
        upsert: false,
    })
}

fn apply(t: &sled::Tree, rev: u64, reqs: Vec<Request>) -> Vec<Result<WriteResult>> {
    let mut a = Applier::new(t);
    let out = a
        .apply_proposal(
            rev,
            Proposal {
                requests: reqs,
                time_ms: rev * 1000,
            },
        )
        .unwrap();
    t.apply_batch(a.batch).unwrap();
    out.into_iter().map(|o| o.result).collect()
}

#[test]
fn create_update_delete_with_cas() {
    let (_d, t) = tree();
    let r = apply(&t, 5, vec![req(1, 0, create("/a", "1"))]);
    assert_eq!(r[0].as_ref().unwrap().revision, 5);
    // Create again: AlreadyExists, nothing changes.
    let r = apply(&t, 6, vec![req(2, 0, create("/a", "2"))]);
    assert_eq!(r[0], Err(Error::AlreadyExists { key: "/a".into() }));
    assert_eq!(get(&t, "/a").unwrap().unwrap().value, b"1");
    // CAS with a stale revision is refused and changes nothing.
    let r = apply(&t, 7, vec![req(3, 0, update("/a", "x", 4))]);
    assert_eq!(
        r[0],
        Err(Error::Conflict {
            key: "/a".into(),
            expected: 4,
            actual: 5
        })
    );
    assert_eq!(get(&t, "/a").unwrap().unwrap().mod_revision, 5);
    // CAS with the right revision succeeds.
    let r = apply(&t, 8, vec![req(4, 0, update("/a", "y", 5))]);
    let kv = r[0].as_ref().unwrap().kv.clone();
    assert_eq!((kv.create_revision, kv.mod_revision), (5, 8));
    // Delete with a stale CAS fails, then succeeds.
    let del = |e| {
        op::Op::Delete(Delete {
            key: "/a".into(),
            expected_revision: e,
        })
    };
    assert!(matches!(
        apply(&t, 9, vec![req(5, 0, del(5))])[0],
        Err(Error::Conflict { .. })
    ));
    assert!(apply(&t, 10, vec![req(6, 0, del(8))])[0].is_ok());
    assert!(get(&t, "/a").unwrap().is_none());
    assert_eq!(
        apply(&t, 11, vec![req(7, 0, del(0))])[0],
        Err(Error::NotFound { key: "/a".into() })
    );
}

#[test]
fn requests_in_one_entry_see_each_other() {
    let (_d, t) = tree();
    let r = apply(
        &t,
        3,
        vec![
            req(1, 0, create("/k", "1")),
            req(2, 0, create("/k", "2")),
            req(3, 0, update("/k", "3", 3)),
        ],
    );
    assert!(r[0].is_ok());
    assert!(matches!(r[1], Err(Error::AlreadyExists { .. })));
    assert!(r[2].is_ok());
    assert_eq!(get(&t, "/k").unwrap().unwrap().value, b"3");
    let h = read_history(&t, 0, u64::MAX, "/").unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].events.len(), 2);
}

#[test]
fn retried_request_id_applies_once_and_answers_alike() {
    let (_d, t) = tree();
    let first = apply(&t, 2, vec![req(1, 77, create("/x", "1"))]);
    let again = apply(&t, 3, vec![req(2, 77, create("/x", "1"))]);
    assert_eq!(first[0].as_ref().unwrap().revision, 2);
    assert_eq!(again[0].as_ref().unwrap().revision, 2);
    assert_eq!(again[0].as_ref().unwrap().kv.key, "/x");
    assert!(again[0].as_ref().unwrap().replayed);
    assert!(!first[0].as_ref().unwrap().replayed);
    assert_eq!(get(&t, "/x").unwrap().unwrap().mod_revision, 2);
    assert_eq!(read_history(&t, 0, u64::MAX, "").unwrap().len(), 1);
    // A refused write is answered with the same refusal.
    let first = apply(&t, 4, vec![req(3, 78, update("/x", "2", 1))]);
    apply(&t, 5, vec![req(4, 0, update("/x", "3", 0))]);
    let again = apply(&t, 6, vec![req(5, 78, update("/x", "2", 1))]);
    assert_eq!(first[0], again[0]);
    assert!(matches!(
        again[0],
        Err(Error::Conflict {
            expected: 1,
            actual: 2,
            ..
        })
    ));
}

#[test]
fn dedup_records_expire_by_proposal_time() {
    let (_d, t) = tree();
    apply(&t, 2, vec![req(1, 5, create("/y", "1"))]);
    let mut b = sled::Batch::default();
    prune(&t, &mut b, 0, 2000 + DEDUP_TTL_MS).unwrap();
    t.apply_batch(b).unwrap();
    assert!(
        t.get(dedup_key(5)).unwrap().is_some(),
        "still within the TTL"
    );
    let mut b = sled::Batch::default();
    prune(&t, &mut b, 0, 2001 + DEDUP_TTL_MS).unwrap();
    t.apply_batch(b).unwrap();
    assert!(t.get(dedup_key(5)).unwrap().is_none());
}

#[test]
fn history_is_filtered_and_pruned() {
    let (_d, t) = tree();
    apply(&t, 2, vec![req(1, 0, create("/a/1", "1"))]);
    apply(&t, 3, vec![req(2, 0, create("/b/1", "1"))]);
    apply(&t, 4, vec![req(3, 0, update("/a/1", "2", 0))]);
    let h = read_history(&t, 0, u64::MAX, "/a/").unwrap();
    assert_eq!(h.iter().map(|r| r.revision).collect::<Vec<_>>(), vec![2, 4]);
    assert_eq!(read_history(&t, 2, u64::MAX, "/a/").unwrap().len(), 1);
    let mut b = sled::Batch::default();
    prune(&t, &mut b, 3, 4000).unwrap();
    t.apply_batch(b).unwrap();
    let h = read_history(&t, 0, u64::MAX, "").unwrap();
    assert_eq!(h.iter().map(|r| r.revision).collect::<Vec<_>>(), vec![4]);
}

#[test]
fn snapshot_round_trip() {
    let (_d, t) = tree();
    apply(
        &t,
        2,
        vec![req(1, 9, create("/a", "1")), req(2, 0, create("/b", "2"))],
    );
    let mut a = Applier::new(&t);
    a.put_member(&Member {
        id: 7,
        addr: "127.0.0.1:1".into(),
        http: "127.0.0.1:2".into(),
        learner: false,
        removed: false,
    });
    t.apply_batch(a.batch).unwrap();
    let data = decode_snapshot(&snapshot_data(&t).unwrap()).unwrap();
    let (_d2, t2) = tree();
    let mut b = sled::Batch::default();
    write_snapshot_data(&mut b, &data);
    t2.apply_batch(b).unwrap();
    assert_eq!(list(&t2, "/").unwrap(), list(&t, "/").unwrap());
    assert_eq!(members(&t2).unwrap().len(), 1);
    // The dedup record travelled too: a retry after the snapshot is still applied once.
    let again = apply(&t2, 5, vec![req(3, 9, create("/a", "1"))]);
    assert_eq!(again[0].as_ref().unwrap().revision, 2);
}

#[test]
fn empty_key_and_missing_op_are_refused() {
    let (_d, t) = tree();
    let r = apply(&t, 2, vec![req(1, 0, create("", "1"))]);
    assert!(matches!(r[0], Err(Error::Invalid(_))));
    let r = apply(
        &t,
        3,
        vec![Request {
            origin: 1,
            id: 2,
            op: None,
            client_request_id: 0,
        }],
    );
    assert!(matches!(r[0], Err(Error::Invalid(_))));
    assert!(list(&t, "").unwrap().is_empty());
}

fn upsert(k: &str, v: &str, expected: u64) -> op::Op {
    op::Op::Update(Update {
        key: k.into(),
        value: v.into(),
        expected_revision: expected,
        upsert: true,
    })
}

fn delete(k: &str, expected: u64) -> op::Op {
    op::Op::Delete(Delete {
        key: k.into(),
        expected_revision: expected,
    })
}

fn txn(ops: Vec<op::Op>) -> op::Op {
    op::Op::Txn(Txn {
        ops: ops.into_iter().map(|o| Op { op: Some(o) }).collect(),
    })
}

#[test]
fn keys_are_checked_before_they_are_proposed() {
    assert!(check_key(&"k".repeat(4096)).is_ok());
    assert_eq!(
        check_key(&"k".repeat(4097)),
        Err(Error::Invalid(
            "key: 4097 bytes is longer than the limit of 4096".into()
        ))
    );
    assert!(check_key("").is_err());
    let op = |o| Op { op: Some(o) };
    assert!(check_op(&op(create("/a", "1"))).is_ok());
    assert!(check_op(&op(create("", "1"))).is_err());
    assert!(check_op(&op(delete(&"k".repeat(4097), 0))).is_err());
    assert!(check_op(&op(txn(vec![]))).is_err(), "a txn of no op");
    assert!(check_op(&op(txn(vec![create("/a", "1"), create("", "1")]))).is_err());
    assert!(check_op(&op(txn(vec![create("/a", "1"), update("/b", "2", 0)]))).is_ok());
    assert!(check_op(&Op { op: None }).is_err());
}

#[test]
fn an_update_of_a_missing_key_creates_it_only_as_an_unconditional_upsert() {
    let (_d, t) = tree();
    let r = apply(&t, 2, vec![req(1, 0, update("/m", "1", 0))]);
    assert_eq!(r[0], Err(Error::NotFound { key: "/m".into() }));
    let r = apply(&t, 3, vec![req(2, 0, upsert("/m", "1", 7))]);
    assert_eq!(r[0], Err(Error::NotFound { key: "/m".into() }));
    assert!(get(&t, "/m").unwrap().is_none());
    let r = apply(&t, 4, vec![req(3, 0, upsert("/m", "1", 0))]);
    let kv = &r[0].as_ref().unwrap().kv;
    assert_eq!((kv.create_revision, kv.mod_revision), (4, 4));
}

#[test]
fn a_transaction_applies_whole_or_not_at_all_with_each_ops_own_check() {
    let (_d, t) = tree();
    apply(&t, 2, vec![req(1, 0, create("/a", "1"))]);
    let before = list(&t, "/").unwrap();
    // Each op that would fail fails the whole transaction, with its reason.
    for (bad, why) in [
        (
            delete("/a", 1),
            Error::Conflict {
                key: "/a".into(),
                expected: 1,
                actual: 2,
            },
        ),
        (
            delete("/gone", 0),
            Error::NotFound {
                key: "/gone".into(),
            },
        ),
        (create("/a", "2"), Error::AlreadyExists { key: "/a".into() }),
        (
            update("/gone", "2", 0),
            Error::NotFound {
                key: "/gone".into(),
            },
        ),
        (
            upsert("/gone", "2", 5),
            Error::NotFound {
                key: "/gone".into(),
            },
        ),
        (
            update("/a", "2", 9),
            Error::Conflict {
                key: "/a".into(),
                expected: 9,
                actual: 2,
            },
        ),
    ] {
        let r = apply(&t, 3, vec![req(2, 0, txn(vec![create("/new", "1"), bad]))]);
        assert_eq!(r[0], Err(why));
        assert_eq!(list(&t, "/").unwrap(), before, "nothing written");
    }
    // Each op that can succeed: all are applied.
    let r = apply(
        &t,
        4,
        vec![req(
            3,
            0,
            txn(vec![
                create("/new", "1"),
                upsert("/up", "u", 0),
                update("/a", "2", 2),
            ]),
        )],
    );
    assert!(r[0].is_ok(), "{r:?}");
    assert_eq!(get(&t, "/up").unwrap().unwrap().value, b"u");
    assert_eq!(get(&t, "/a").unwrap().unwrap().value, b"2");
    let r = apply(
        &t,
        5,
        vec![req(4, 0, txn(vec![delete("/a", 4), delete("/new", 0)]))],
    );
    assert!(r[0].is_ok(), "{r:?}");
    assert!(get(&t, "/a").unwrap().is_none() && get(&t, "/new").unwrap().is_none());
}

#[test]
fn a_retried_refusal_is_answered_with_the_same_reason() {
    let (_d, t) = tree();
    apply(&t, 2, vec![req(1, 0, create("/a", "1"))]);
    for (client, op, why) in [
        (
            80,
            create("/a", "2"),
            Error::AlreadyExists { key: "/a".into() },
        ),
        (
            81,
            update("/none", "2", 0),
            Error::NotFound {
                key: "/none".into(),
            },
        ),
    ] {
        let first = apply(&t, 3, vec![req(2, client, op.clone())]);
        assert_eq!(first[0], Err(why.clone()));
        // Whatever changed since, the retry gets the first answer.
        apply(&t, 4, vec![req(3, 0, upsert("/none", "x", 0))]);
        let again = apply(&t, 5, vec![req(4, client, op)]);
        assert_eq!(again[0], Err(why));
        apply(&t, 6, vec![req(5, 0, delete("/none", 0))]);
    }
}

#[test]
fn a_dedup_record_keeps_the_outcome_and_not_the_value() {
    let (_d, t) = tree();
    apply(&t, 2, vec![req(1, 90, create("/a", "a value"))]);
    apply(&t, 3, vec![req(2, 91, create("/a", "again"))]);
    let rec =
        |client| DedupRecord::decode(t.get(dedup_key(client)).unwrap().unwrap().as_ref()).unwrap();
    let ok = rec(90);
    assert_eq!((ok.revision, ok.code, ok.time_ms), (2, 0, 2000));
    let kv = ok.kv.unwrap();
    assert_eq!((kv.key.as_str(), kv.mod_revision), ("/a", 2));
    assert!(kv.value.is_empty(), "the value is not kept");
    let refused = rec(91);
    assert_eq!((refused.revision, refused.code), (3, 1));
    assert_eq!(refused.kv.unwrap().key, "/a");
}

#[test]
fn members_are_those_written() {
    let (_d, t) = tree();
    assert_eq!(members(&t).unwrap(), []);
    let m = Member {
        id: 7,
        addr: "127.0.0.1:1".into(),
        http: "127.0.0.1:2".into(),
        learner: true,
        removed: false,
    };
    let mut a = Applier::new(&t);
    a.put_member(&m);
    t.apply_batch(a.batch).unwrap();
    assert_eq!(members(&t).unwrap(), [m]);
}
