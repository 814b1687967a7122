//! Tests of raft's storage (`storage.rs`): the log through the `Storage`
//! trait, the hard and conf state, compaction, snapshots, what a reopen
//! finds, and the move of an older version's log out of sled.

use super::*;
use crate::keys::{log_key, prefixed};
use crate::wal::tests_support::{entries, entry, segments};

#[test]
fn a_held_lock_is_seen_on_the_file_not_in_a_message() {
    let dir = tempfile::tempdir().unwrap();
    assert!(!held_by_another(dir.path()), "no database yet");
    let db = open_sled(
        &sled::Config::new().path(dir.path()),
        dir.path(),
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    assert!(held_by_another(dir.path()));
    drop(db);
    // sled's flusher lets go of the lock shortly after the last handle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while held_by_another(dir.path()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock was never released"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn open_in(dir: &Path) -> (sled::Db, SledStorage) {
    let db = open_sled(
        &sled::Config::new().path(dir),
        dir,
        std::time::Duration::from_secs(10),
    )
    .expect("sled");
    let s = SledStorage::open(db.open_tree("t").expect("tree"), &wal_dir(dir)).expect("open");
    (db, s)
}

fn open() -> (tempfile::TempDir, SledStorage) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_db, s) = open_in(dir.path());
    (dir, s)
}

fn write(s: &SledStorage, f: impl FnOnce(&mut sled::Batch)) {
    let mut b = sled::Batch::default();
    f(&mut b);
    s.tree.apply_batch(b).expect("apply");
}

fn ctx() -> GetEntriesContext {
    GetEntriesContext::empty(false)
}

fn snapshot(index: u64, term: u64) -> Snapshot {
    let data = drover_proto::v1::SnapshotData {
        kvs: vec![crate::KeyValue {
            key: "new".into(),
            value: b"v".to_vec(),
            create_revision: 9,
            mod_revision: 12,
        }],
        members: vec![],
        dedup: vec![],
    };
    let mut snap = Snapshot::default();
    snap.set_data(prost::Message::encode_to_vec(&data).into());
    snap.mut_metadata().index = index;
    snap.mut_metadata().term = term;
    snap.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
    snap
}

#[test]
fn append_then_read_back() {
    let (_d, s) = open();
    s.append(&entries(1..=5, 1)).expect("append");
    assert_eq!(s.first_index().unwrap(), 1);
    assert_eq!(s.last_index().unwrap(), 5);
    let got = s.entries(2, 5, None, ctx()).unwrap();
    assert_eq!(
        got.iter().map(|e| e.index).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert_eq!(s.term(5).unwrap(), 1);
    assert!(matches!(
        s.term(6),
        Err(raft::Error::Store(StorageError::Unavailable))
    ));
}

#[test]
fn append_truncates_conflicting_suffix() {
    let (_d, s) = open();
    s.append(&entries(1..=5, 1)).unwrap();
    // A new leader overwrites from index 3 with a shorter log of term 2.
    s.append(&[entry(3, 2)]).unwrap();
    assert_eq!(s.last_index().unwrap(), 3);
    assert_eq!(s.term(3).unwrap(), 2);
    assert_eq!(s.term(2).unwrap(), 1);
    assert!(matches!(
        s.entries(1, 5, None, ctx()),
        Err(raft::Error::Store(StorageError::Unavailable))
    ));
    assert_eq!(s.entries(1, 4, None, ctx()).unwrap().len(), 3);
}

#[test]
fn append_refuses_gaps_and_compacted_overwrites() {
    let (_d, s) = open();
    assert!(s.append(&[entry(3, 1)]).is_err());
    s.append(&entries(1..=4, 1)).unwrap();
    write(&s, |b| s.set_applied(b, 4, 1).unwrap());
    write(&s, |b| assert!(s.compact(b, 2).unwrap()));
    s.drop_log_through(2).unwrap();
    assert!(s.append(&[entry(2, 2)]).is_err());
}

#[test]
fn max_size_limits_but_returns_at_least_one() {
    let (_d, s) = open();
    s.append(&entries(1..=10, 1)).unwrap();
    assert_eq!(s.entries(1, 11, 0, ctx()).unwrap().len(), 1);
    let one = entry(1, 1).compute_size() as u64;
    assert_eq!(s.entries(1, 11, one * 3, ctx()).unwrap().len(), 3);
}

#[test]
fn compaction_keeps_the_term_of_the_compacted_index() {
    let (_d, s) = open();
    s.append(
        &(1..=10)
            .map(|i| entry(i, if i < 6 { 1 } else { 2 }))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    write(&s, |b| s.set_applied(b, 8, 2).unwrap());
    // Not beyond applied.
    write(&s, |b| assert!(!s.compact(b, 9).unwrap()));
    write(&s, |b| assert!(s.compact(b, 6).unwrap()));
    s.drop_log_through(6).unwrap();
    assert_eq!(s.first_index().unwrap(), 7);
    assert_eq!(s.last_index().unwrap(), 10);
    assert_eq!(s.term(6).unwrap(), 2);
    assert!(matches!(
        s.term(5),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    assert!(matches!(
        s.entries(5, 8, None, ctx()),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    assert_eq!(s.entries(7, 11, None, ctx()).unwrap().len(), 4);
}

#[test]
fn state_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (db, s) = open_in(dir.path());
        s.append(&entries(1..=6, 3)).unwrap();
        s.sync_log().unwrap();
        write(&s, |b| {
            let hs = HardState {
                term: 3,
                vote: 7,
                commit: 4,
                ..Default::default()
            };
            s.set_hard_state(b, &hs).unwrap();
            let cs = ConfState {
                voters: vec![7, 8, 9],
                ..Default::default()
            };
            s.set_conf_state(b, &cs).unwrap();
            s.set_applied(b, 4, 3).unwrap();
        });
        write(&s, |b| assert!(s.compact(b, 2).unwrap()));
        db.flush().unwrap();
        s.drop_log_through(2).unwrap();
    }
    let (_db, s) = open_in(dir.path());
    let st = s.initial_state().unwrap();
    assert_eq!(st.hard_state.term, 3);
    assert_eq!(st.hard_state.vote, 7);
    assert_eq!(st.hard_state.commit, 4);
    assert_eq!(st.conf_state.voters, vec![7, 8, 9]);
    assert_eq!(s.first_index().unwrap(), 3);
    assert_eq!(s.last_index().unwrap(), 6);
    assert_eq!(s.entries(3, 7, None, ctx()).unwrap(), entries(3..=6, 3));
    assert_eq!(s.cache().applied_index, 4);
    assert!(s.is_initialized());
}

#[test]
fn a_commit_index_that_trails_the_applied_one_is_raised_on_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (db, s) = open_in(dir.path());
        s.append(&entries(1..=6, 1)).unwrap();
        s.sync_log().unwrap();
        write(&s, |b| {
            s.set_hard_state(
                b,
                &HardState {
                    term: 1,
                    commit: 2,
                    ..Default::default()
                },
            )
            .unwrap();
        });
        // The applied index as sled may hold it after a crash: past the
        // commit index, whose write was not synced.
        s.tree.insert(APPLIED, &pair(5, 1)).unwrap();
        db.flush().unwrap();
    }
    let (_db, s) = open_in(dir.path());
    assert_eq!(s.initial_state().unwrap().hard_state.commit, 5);
}

#[test]
fn snapshot_install_replaces_log_and_state() {
    let (_d, s) = open();
    s.append(&entries(1..=3, 1)).unwrap();
    write(&s, |b| {
        s.set_applied(b, 3, 1).unwrap();
        b.insert(prefixed(KV, b"old"), b"x".to_vec());
    });
    write(&s, |b| s.apply_snapshot(b, &snapshot(20, 4)).unwrap());
    s.reset_log(20, 4).unwrap();
    assert_eq!(s.first_index().unwrap(), 21);
    assert_eq!(s.last_index().unwrap(), 20);
    assert_eq!(s.term(20).unwrap(), 4);
    assert!(s.tree.get(prefixed(KV, b"old")).unwrap().is_none());
    assert!(s.tree.get(prefixed(KV, b"new")).unwrap().is_some());
    let c = s.cache();
    assert_eq!((c.applied_index, c.hs.commit), (20, 20));
    assert_eq!(c.cs.voters, vec![1, 2, 3]);
    drop(c);
    s.append(&entries(21..=22, 4)).unwrap();
    assert_eq!(s.term(22).unwrap(), 4);
}

/// A crash after the snapshot was durable in sled and before the log was
/// reset after it: the log's entries are of another history.
#[test]
fn a_log_left_behind_by_a_snapshot_install_is_dropped_on_open() {
    for (snap_index, log_to) in [(3, 5), (10, 5)] {
        let dir = tempfile::tempdir().unwrap();
        {
            let (db, s) = open_in(dir.path());
            s.append(&entries(1..=log_to, 1)).unwrap();
            s.sync_log().unwrap();
            write(&s, |b| {
                s.apply_snapshot(b, &snapshot(snap_index, 2)).unwrap()
            });
            db.flush().unwrap();
        }
        let (_db, s) = open_in(dir.path());
        assert_eq!(
            s.first_index().unwrap(),
            snap_index + 1,
            "snapshot at {snap_index}"
        );
        assert_eq!(s.last_index().unwrap(), snap_index);
        assert_eq!(s.term(snap_index).unwrap(), 2);
        s.append(&entries(snap_index + 1..=snap_index + 1, 2))
            .unwrap();
    }
}

#[test]
fn a_log_that_starts_after_the_compaction_point_is_refused_with_the_dir_named() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (db, s) = open_in(dir.path());
        s.append(&entries(1..=3, 1)).unwrap();
        s.sync_log().unwrap();
        db.flush().unwrap();
    }
    {
        let mut w = Wal::open(&wal_dir(dir.path())).unwrap();
        w.reset(6, 1).unwrap();
        w.append(&entries(7..=8, 1)).unwrap();
        w.sync().unwrap();
    }
    let db = sled::open(dir.path()).unwrap();
    let err = SledStorage::open(db.open_tree("t").unwrap(), &wal_dir(dir.path()))
        .err()
        .expect("a gap between the store and its log");
    let msg = err.to_string();
    assert!(
        msg.contains("starts at entry 7")
            && msg.contains(&wal_dir(dir.path()).display().to_string()),
        "{msg}"
    );
}

/// A data dir of the version before kept the log in sled's `l` keys: the
/// first open moves it to the log files, and a second open (or one after a
/// crash halfway) finds the same log.
#[test]
fn an_older_versions_log_in_sled_moves_to_the_log_files() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(dir.path()).unwrap();
        let t = db.open_tree("t").unwrap();
        for e in entries(1..=7, 2) {
            t.insert(log_key(e.index), e.write_to_bytes().unwrap())
                .unwrap();
        }
        t.insert(COMPACT, &pair(2, 2)).unwrap();
        t.insert(APPLIED, &pair(5, 2)).unwrap();
        let hs = HardState {
            term: 2,
            vote: 1,
            commit: 5,
            ..Default::default()
        };
        t.insert(HS, hs.write_to_bytes().unwrap()).unwrap();
        db.flush().unwrap();
    }
    for _ in 0..2 {
        let (_db, s) = open_in(dir.path());
        assert!(
            s.tree.scan_prefix([LOG]).next().is_none(),
            "no log left in sled"
        );
        assert_eq!(s.first_index().unwrap(), 3);
        assert_eq!(s.last_index().unwrap(), 7);
        assert_eq!(s.entries(3, 8, None, ctx()).unwrap(), entries(3..=7, 2));
        assert_eq!(s.initial_state().unwrap().hard_state.commit, 5);
    }
    let (_db, s) = open_in(dir.path());
    s.append(&entries(8..=8, 3)).unwrap();
    s.sync_log().unwrap();
    drop(s);
    drop(_db);
    let (_db, s) = open_in(dir.path());
    assert_eq!(s.last_index().unwrap(), 8);
    assert_eq!(s.term(8).unwrap(), 3);
}

/// A clean stop keeps the log in sled's `l` keys too, as versions up to
/// 0.2.0 read it (a downgrade), compacted to a margin before the applied
/// index, and the next open takes it back.
#[test]
fn a_clean_stop_leaves_the_log_where_older_versions_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let applied = STOP_KEEP_ENTRIES + 10;
    let last = applied + 3;
    {
        let (db, s) = open_in(dir.path());
        s.append(&entries(1..=last, 2)).unwrap();
        s.sync_log().unwrap();
        write(&s, |b| s.set_applied(b, applied, 2).unwrap());
        write(&s, |b| assert!(s.compact(b, 2).unwrap()));
        db.flush().unwrap();
        s.drop_log_through(2).unwrap();
        s.keep_for_older_versions().unwrap();
        // What an older version reads: the log compacted up to the margin
        // before the applied index, and every entry after it.
        let kept: Vec<u64> = s
            .tree
            .scan_prefix([LOG])
            .map(|kv| {
                let (_, v) = kv.unwrap();
                Entry::parse_from_bytes(&v).unwrap().index
            })
            .collect();
        assert_eq!(kept, (11..=last).collect::<Vec<_>>());
        assert_eq!(
            unpair(&s.tree.get(COMPACT).unwrap().unwrap()).unwrap(),
            (10, 2)
        );
    }
    let (_db, s) = open_in(dir.path());
    assert!(s.tree.scan_prefix([LOG]).next().is_none());
    assert_eq!(s.first_index().unwrap(), 11);
    assert_eq!(s.term(10).unwrap(), 2);
    assert_eq!(
        s.entries(11, last + 1, None, ctx()).unwrap(),
        entries(11..=last, 2)
    );
    assert_eq!(
        segments(&wal_dir(dir.path())).len(),
        1,
        "the reset of the move left one segment"
    );
    // A short log is kept whole.
    let dir = tempfile::tempdir().unwrap();
    {
        let (db, s) = open_in(dir.path());
        s.append(&entries(1..=6, 1)).unwrap();
        s.sync_log().unwrap();
        write(&s, |b| s.set_applied(b, 5, 1).unwrap());
        db.flush().unwrap();
        s.keep_for_older_versions().unwrap();
        assert_eq!(s.tree.scan_prefix([LOG]).count(), 6);
    }
    let (_db, s) = open_in(dir.path());
    assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (1, 6));
}
