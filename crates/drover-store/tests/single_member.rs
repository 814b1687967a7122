//! One store member with no peers: the write, read, watch and restart paths
//! without the network.

use drover_store::{
    op, Consistency, Create, Error, EventType, Init, Member, Op, RaftMessage, Reporter, Store,
    StoreConfig, Transport, Update,
};
use std::sync::Arc;
use std::time::Duration;

struct NoPeers;
impl Transport for NoPeers {
    fn send(&self, _to: u64, _addr: &str, _msg: RaftMessage, _r: &Reporter) {}
}

fn me() -> Member {
    Member {
        id: 1,
        addr: "127.0.0.1:1".into(),
        http: String::new(),
        learner: false,
        removed: false,
    }
}

fn open(dir: &std::path::Path, snapshot_every: u64, keep: u64) -> Store {
    let mut cfg = StoreConfig::new(1, dir);
    cfg.tick = Duration::from_millis(10);
    cfg.snapshot_every = snapshot_every;
    cfg.keep_entries = keep;
    Store::open(cfg, Init::Bootstrap(me()), Arc::new(NoPeers)).expect("open")
}

fn create(k: &str, v: &str) -> Op {
    Op {
        op: Some(op::Op::Create(Create {
            key: k.into(),
            value: v.into(),
        })),
    }
}

fn update(k: &str, v: &str, expected: u64) -> Op {
    Op {
        op: Some(op::Op::Update(Update {
            key: k.into(),
            value: v.into(),
            expected_revision: expected,
            upsert: false,
        })),
    }
}

async fn ready(s: &Store) {
    assert!(
        s.wait_leader(Duration::from_secs(5)).await.is_some(),
        "no leader"
    );
}

#[tokio::test]
async fn resource_version_is_the_raft_index_and_cas_guards_updates() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path(), 10_000, 5_000);
    ready(&s).await;
    let w = s.write(create("/a", "1"), 0).await.unwrap();
    assert_eq!(w.kv.mod_revision, w.revision);
    assert_eq!(s.applied(), w.revision);
    let stale = s.write(update("/a", "2", w.revision - 1), 0).await;
    assert_eq!(
        stale,
        Err(Error::Conflict {
            key: "/a".into(),
            expected: w.revision - 1,
            actual: w.revision
        })
    );
    let ok = s.write(update("/a", "2", w.revision), 0).await.unwrap();
    assert!(ok.revision > w.revision);
    let (kv, _) = s.get("/a", Consistency::Linearizable).await.unwrap();
    assert_eq!(kv.unwrap().value, b"2");
    s.shutdown().await;
}

#[tokio::test]
async fn concurrent_writes_are_batched_into_few_entries() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path(), 100_000, 50_000);
    ready(&s).await;
    let before = s.applied();
    let n = 500;
    let mut tasks = Vec::new();
    for i in 0..n {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            s.write(create(&format!("/c/{i}"), "x"), 0).await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let entries = s.applied() - before;
    assert!(
        entries < n / 4,
        "{n} concurrent writes took {entries} raft entries"
    );
    let (kvs, _) = s.list("/c/", Consistency::Linearizable).await.unwrap();
    assert_eq!(kvs.len(), n as usize);
    s.shutdown().await;
}

#[tokio::test]
async fn watch_resumes_from_a_revision_without_gaps_or_repeats() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path(), 10_000, 5_000);
    ready(&s).await;
    let (_, start) = s.list("/w/", Consistency::Linearizable).await.unwrap();
    let mut w = s.watch("/w/", start).unwrap();
    for i in 0..5 {
        s.write(create(&format!("/w/{i}"), "v"), 0).await.unwrap();
    }
    // Changes outside the prefix are not seen.
    s.write(create("/other", "v"), 0).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let b = w.next().await.unwrap();
        seen.push(b.events[0].kv.clone().unwrap().key);
    }
    let last = w.revision();
    drop(w);
    // "Reconnect": more writes happen, then a new watch from the last revision seen.
    for i in 5..8 {
        s.write(create(&format!("/w/{i}"), "v"), 0).await.unwrap();
    }
    s.write(
        Op {
            op: Some(op::Op::Delete(drover_store::Delete {
                key: "/w/0".into(),
                expected_revision: 0,
            })),
        },
        0,
    )
    .await
    .unwrap();
    let mut w = s.watch("/w/", last).unwrap();
    let mut kinds = Vec::new();
    while seen.len() < 9 {
        let b = tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .expect("an event")
            .unwrap();
        for e in b.events {
            kinds.push(e.r#type);
            seen.push(e.kv.unwrap().key);
        }
    }
    let want: Vec<String> = (0..8)
        .map(|i| format!("/w/{i}"))
        .chain(["/w/0".to_string()])
        .collect();
    assert_eq!(seen, want);
    assert_eq!(*kinds.last().unwrap(), EventType::Delete as i32);
    s.shutdown().await;
}

#[tokio::test]
async fn watch_from_a_compacted_revision_is_too_old() {
    let d = tempfile::tempdir().unwrap();
    // Compact every 10 entries, keeping 2.
    let s = open(d.path(), 10, 2);
    ready(&s).await;
    let first = s.write(create("/t/0", "v"), 0).await.unwrap().revision;
    for i in 1..40 {
        s.write(create(&format!("/t/{i}"), "v"), 0).await.unwrap();
    }
    assert!(s.compacted() > first, "the log was compacted");
    match s.watch("/t/", first) {
        Err(Error::TooOld {
            requested,
            compacted,
        }) => {
            assert_eq!(requested, first);
            assert!(compacted > first);
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a compacted revision must be refused"),
    }
    // From the compaction point itself it works.
    let mut w = s.watch("/t/", s.compacted()).unwrap();
    s.write(create("/t/new", "v"), 0).await.unwrap();
    let b = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .unwrap()
        .unwrap();
    assert!(!b.events.is_empty());
    s.shutdown().await;
}

#[tokio::test]
async fn restart_resumes_with_every_committed_write() {
    let d = tempfile::tempdir().unwrap();
    let last = {
        let s = open(d.path(), 15, 3);
        ready(&s).await;
        for i in 0..50 {
            s.write(create(&format!("/r/{i:02}"), &i.to_string()), 0)
                .await
                .unwrap();
        }
        let last = s.applied();
        s.shutdown().await;
        last
    };
    let s = open(d.path(), 15, 3);
    ready(&s).await;
    assert!(s.applied() >= last);
    let (kvs, _) = s.list("/r/", Consistency::Linearizable).await.unwrap();
    assert_eq!(kvs.len(), 50);
    assert_eq!(kvs[49].value, b"49");
    // Writes go on after the restart.
    s.write(create("/r/after", "x"), 0).await.unwrap();
    s.shutdown().await;
}

#[tokio::test]
async fn idempotent_retry_is_applied_once() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path(), 10_000, 5_000);
    ready(&s).await;
    let a = s.write(create("/i", "1"), 42).await.unwrap();
    let b = s.write(create("/i", "1"), 42).await.unwrap();
    // The retry answers the first outcome (the object's value is not kept).
    assert_eq!(
        (a.revision, a.kv.mod_revision),
        (b.revision, b.kv.mod_revision)
    );
    assert_eq!(b.kv.key, "/i");
    assert!(b.replayed && !a.replayed);
    assert_eq!(s.applied(), a.revision + 1, "the retry was one more entry");
    let (kv, _) = s.get("/i", Consistency::Local).await.unwrap();
    assert_eq!(kv.unwrap().mod_revision, a.revision, "and changed nothing");
    s.shutdown().await;
}

/// Lists taken while rounds of hundreds of writes (puts, deletes, creates)
/// are applied are each the state at exactly their revision, as the watch
/// history rebuilds it: never part of a round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_list_is_the_state_at_its_revision_while_rounds_apply() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path(), 100_000, 50_000);
    ready(&s).await;
    const KEYS: usize = 300;
    const ROUNDS: usize = 15;
    let key = |i: usize| format!("/p/{i:04}");
    let put = |i: usize, v: &str| Op {
        op: Some(op::Op::Update(Update {
            key: key(i),
            value: v.into(),
            expected_revision: 0,
            upsert: true,
        })),
    };
    let delete = |i: usize| Op {
        op: Some(op::Op::Delete(drover_store::Delete {
            key: key(i),
            expected_revision: 0,
        })),
    };
    let run = |ops: Vec<Op>| {
        let s = s.clone();
        async move {
            let mut set = tokio::task::JoinSet::new();
            for op in ops {
                let s = s.clone();
                set.spawn(async move { s.write(op, 0).await });
            }
            let mut last = 0;
            while let Some(r) = set.join_next().await {
                last = last.max(r.unwrap().unwrap().revision);
            }
            last
        }
    };
    run((0..KEYS).map(|i| put(i, "0")).collect()).await;
    let (start, start_rev) = s.list("/p/", Consistency::Local).await.unwrap();
    let mut watch = s.watch("/p/", start_rev).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let listers: Vec<_> = (0..2)
        .map(|_| {
            let (s, stop) = (s.clone(), stop.clone());
            tokio::spawn(async move {
                let mut lists = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    lists.push(s.list("/p/", Consistency::Local).await.unwrap());
                    tokio::task::yield_now().await;
                }
                lists
            })
        })
        .collect();
    let mut exists = vec![true; KEYS];
    let mut last = start_rev;
    for round in 1..=ROUNDS {
        let mut ops = Vec::new();
        for (i, e) in exists.iter_mut().enumerate() {
            if *e && (i + round) % 3 == 0 {
                ops.push(delete(i));
                *e = false;
            } else {
                ops.push(put(i, &round.to_string()));
                *e = true;
            }
        }
        last = run(ops).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut lists = Vec::new();
    for l in listers {
        lists.extend(l.await.unwrap());
    }
    lists.sort_by_key(|(_, rev)| *rev);

    let mut batches = Vec::new();
    while batches
        .last()
        .is_none_or(|b: &drover_store::WatchBatch| b.revision < last)
    {
        let b = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .expect("the watch follows every round")
            .unwrap();
        batches.push(b);
    }
    let mut state: BTreeMap<String, drover_store::KeyValue> =
        start.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
    let mut lists = lists.into_iter().peekable();
    let mut checked = 0;
    let mut in_between = 0;
    let mut check = |state: &BTreeMap<_, drover_store::KeyValue>, (kvs, rev): (Vec<_>, u64)| {
        let want: Vec<_> = state.values().cloned().collect();
        assert!(
            kvs == want,
            "the list at revision {rev} is not the state at {rev}"
        );
        checked += 1;
        if rev > start_rev && rev < last {
            in_between += 1;
        }
    };
    for b in batches {
        while let Some(l) = lists.next_if(|(_, rev)| *rev < b.revision) {
            check(&state, l);
        }
        for e in b.events {
            let kv = e.kv.unwrap();
            if e.r#type == EventType::Delete as i32 {
                state.remove(&kv.key);
            } else {
                state.insert(kv.key.clone(), kv);
            }
        }
    }
    for l in lists {
        check(&state, l);
    }
    assert!(checked > 0);
    assert!(in_between > 0, "no list was taken while rounds applied");
    s.shutdown().await;
}

/// `consistent_revision` is the last change, which a watch delivers; the
/// applied index also counts entries that change nothing (a refused
/// compare-and-swap, a new leader's empty entry), which no watch ever
/// delivers, so a cache waiting for it would wait forever.
#[tokio::test]
async fn the_consistent_revision_is_the_last_change_a_watch_delivers() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path(), 10_000, 5_000);
    ready(&s).await;
    let mut w = s.watch("", 0).unwrap();
    let a = s.write(create("/a", "1"), 0).await.unwrap();
    assert_eq!(s.consistent_revision().await.unwrap(), a.revision);
    let delivered = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("the watch delivers the write")
        .unwrap();
    assert_eq!(delivered.revision, a.revision);
    // A refused compare-and-swap is an entry of its own: applied moves,
    // the last change does not.
    let refused = s.write(update("/a", "2", a.revision - 1), 0).await;
    assert!(
        matches!(refused, Err(Error::Conflict { .. })),
        "{refused:?}"
    );
    assert!(s.applied() > a.revision, "the refused write took an entry");
    assert_eq!(s.consistent_revision().await.unwrap(), a.revision);
    // The next change moves it, and the watch delivers that revision.
    let b = s.write(update("/a", "2", a.revision), 0).await.unwrap();
    assert_eq!(s.consistent_revision().await.unwrap(), b.revision);
    let delivered = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("the watch delivers the update")
        .unwrap();
    assert_eq!(delivered.revision, b.revision);
    // (A watch holds the store open.)
    drop(w);
    s.shutdown().await;
    drop(s);
    // Reopened, the store counts everything it applied as changed (it
    // cannot tell), and the new term's empty entry does not move it.
    let applied_before = {
        let s = open(d.path(), 10_000, 5_000);
        ready(&s).await;
        let c = s.consistent_revision().await.unwrap();
        assert!(
            c >= b.revision && c <= s.applied(),
            "{c} vs {}",
            s.applied()
        );
        s.shutdown().await;
        c
    };
    assert!(applied_before >= b.revision);
}
