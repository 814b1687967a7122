//! Tests of the raft log's files (`wal.rs`): appends and truncations read
//! back after a reopen, a torn tail cut off, damage refused with the file
//! named, resets, compaction deleting whole segments, and a model check of
//! random sequences of all of them.

use super::tests_support::{entries as ents, entry, segments};
use super::*;
use proptest::prelude::*;

fn indexes_and_terms(w: &Wal) -> Vec<(u64, u64)> {
    match (w.first_index(), w.last_index()) {
        (Some(f), Some(l)) => w
            .entries(f, l + 1, u64::MAX)
            .expect("entries")
            .iter()
            .map(|e| (e.index, e.term))
            .collect(),
        _ => Vec::new(),
    }
}

#[test]
fn appends_survive_a_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    {
        let mut w = Wal::open(d.path()).expect("open");
        assert_eq!(w.first_index(), None);
        w.append(&ents(1..=5, 1)).expect("append");
        w.append(&ents(6..=7, 2)).expect("append");
        w.sync().expect("sync");
    }
    let w = Wal::open(d.path()).expect("reopen");
    assert_eq!((w.first_index(), w.last_index()), (Some(1), Some(7)));
    assert_eq!(w.term(5), Some(1));
    assert_eq!(w.term(6), Some(2));
    assert_eq!(w.term(8), None);
    let got = w.entries(2, 5, u64::MAX).expect("entries");
    assert_eq!(got, ents(2..=4, 1));
}

#[test]
fn an_append_at_a_lower_index_replaces_the_suffix_also_after_a_reopen() {
    let d = tempfile::tempdir().expect("tempdir");
    {
        let mut w = Wal::open(d.path()).expect("open");
        w.append(&ents(1..=5, 1)).expect("append");
        // A new leader overwrites from 3 with a shorter log of term 2.
        w.append(&ents(3..=3, 2)).expect("append");
        assert_eq!(indexes_and_terms(&w), vec![(1, 1), (2, 1), (3, 2)]);
        w.sync().expect("sync");
    }
    let w = Wal::open(d.path()).expect("reopen");
    assert_eq!(indexes_and_terms(&w), vec![(1, 1), (2, 1), (3, 2)]);
}

#[test]
fn an_append_that_leaves_a_gap_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(d.path()).expect("open");
    w.append(&ents(1..=2, 1)).expect("append");
    assert!(w.append(&ents(4..=4, 1)).is_err());
}

#[test]
fn a_torn_tail_is_cut_off_and_the_log_goes_on() {
    let d = tempfile::tempdir().expect("tempdir");
    let path;
    let good;
    {
        let mut w = Wal::open(d.path()).expect("open");
        w.append(&ents(1..=3, 1)).expect("append");
        w.sync().expect("sync");
        path = w.segments[0].path.clone();
        good = w.segments[0].len;
        // Half of the next record: a crash in the middle of a write.
        let mut half = Vec::new();
        record(
            ENTRY,
            &entry(4, 1).write_to_bytes().expect("encode"),
            &mut half,
        );
        half.truncate(half.len() / 2);
        w.write(&half).expect("write");
        w.sync().expect("sync");
    }
    let mut w = Wal::open(d.path()).expect("reopen");
    assert_eq!(indexes_and_terms(&w), vec![(1, 1), (2, 1), (3, 1)]);
    assert_eq!(std::fs::metadata(&path).expect("stat").len(), good);
    w.append(&ents(4..=4, 1)).expect("append after the cut");
    w.sync().expect("sync");
    drop(w);
    let w = Wal::open(d.path()).expect("reopen");
    assert_eq!(w.last_index(), Some(4));
}

#[test]
fn a_bad_checksum_at_the_end_is_cut_but_in_a_closed_segment_is_an_error() {
    let d = tempfile::tempdir().expect("tempdir");
    {
        let mut w = Wal::open_sized(d.path(), 64).expect("open");
        for i in 1..=4 {
            w.append(&ents(i..=i, 1)).expect("append");
        }
        w.sync().expect("sync");
    }
    let segs = segments(d.path());
    assert!(segs.len() >= 2, "small segments: {segs:?}");
    let flip_last_byte = |name: &str| {
        let path = d.path().join(name);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).expect("write");
    };
    // The last record of the last segment: cut off, the rest kept.
    flip_last_byte(segs.last().expect("a segment"));
    {
        let w = Wal::open_sized(d.path(), 64).expect("a damaged last record is cut");
        assert_eq!(indexes_and_terms(&w), vec![(1, 1), (2, 1), (3, 1)]);
    }
    // A record of the first (closed) segment: an error.
    flip_last_byte(&segs[0]);
    let err = Wal::open_sized(d.path(), 64)
        .err()
        .expect("a damaged closed segment is an error");
    let msg = err.to_string();
    assert!(msg.contains(&segs[0]) && msg.contains("checksum"), "{msg}");
}

#[test]
fn a_reset_drops_every_entry_and_the_log_continues_after_it() {
    let d = tempfile::tempdir().expect("tempdir");
    {
        let mut w = Wal::open_sized(d.path(), 100).expect("open");
        for i in 1..=5 {
            w.append(&ents(i..=i, 1)).expect("append");
        }
        assert!(segments(d.path()).len() > 1);
        w.reset(20, 4).expect("reset");
        assert_eq!(w.first_index(), None);
        assert_eq!(w.term(3), None);
    }
    let mut w = Wal::open(d.path()).expect("reopen");
    assert_eq!((w.first_index(), w.last_index()), (None, None));
    assert_eq!(
        segments(d.path()).len(),
        1,
        "the reset dropped the closed segments"
    );
    assert!(
        w.append(&ents(25..=25, 4)).is_err(),
        "the entry after a reset is the one after its index"
    );
    w.append(&ents(21..=22, 4)).expect("append");
    w.sync().expect("sync");
    drop(w);
    let w = Wal::open(d.path()).expect("reopen");
    assert_eq!(indexes_and_terms(&w), vec![(21, 4), (22, 4)]);
}

#[test]
fn compaction_deletes_the_segments_it_empties_and_keeps_the_rest() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open_sized(d.path(), 200).expect("open");
    for i in 1..=30 {
        w.append(&ents(i..=i, 1)).expect("append");
    }
    w.sync().expect("sync");
    let before = segments(d.path()).len();
    assert!(before > 4, "{before} segments");
    w.compact(20).expect("compact");
    let after = segments(d.path()).len();
    assert!(after < before, "{after} of {before} segments left");
    assert_eq!((w.first_index(), w.last_index()), (Some(21), Some(30)));
    assert_eq!(w.term(20), None);
    drop(w);
    // What the files hold still reaches 21: reopening may find entries at
    // or before 20 in a kept segment, never a gap after it.
    let w = Wal::open_sized(d.path(), 200).expect("reopen");
    assert!(w.first_index().expect("entries") <= 21);
    assert_eq!(w.last_index(), Some(30));
    assert_eq!(
        w.entries(21, 31, u64::MAX).expect("entries"),
        ents(21..=30, 1)
    );
}

#[test]
fn entries_stop_at_max_size_but_return_at_least_one() {
    let d = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(d.path()).expect("open");
    w.append(&ents(1..=10, 1)).expect("append");
    assert_eq!(w.entries(1, 11, 0).expect("entries").len(), 1);
    let one = entry(1, 1).compute_size() as u64;
    assert_eq!(w.entries(1, 11, one * 3).expect("entries").len(), 3);
    assert_eq!(w.entries(1, 11, u64::MAX).expect("entries").len(), 10);
}

#[derive(Debug, Clone)]
enum Op {
    /// Append `n` entries of `term` from `back` entries before the end.
    Append {
        back: u64,
        n: u64,
        term: u64,
    },
    Compact {
        keep: u64,
    },
    Reset {
        ahead: u64,
    },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..4, 1u64..6, 1u64..4).prop_map(|(back, n, term)| Op::Append { back, n, term }),
        2 => (0u64..8).prop_map(|keep| Op::Compact { keep }),
        1 => (0u64..5).prop_map(|ahead| Op::Reset { ahead }),
        2 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any sequence of appends (with truncations), compactions, resets and
    /// reopens reads back as a model `Vec` of (index, term) says, with
    /// segments small enough that they rotate and are deleted.
    #[test]
    fn the_log_reads_back_as_the_model_says(ops in proptest::collection::vec(op(), 1..40)) {
        let d = tempfile::tempdir().expect("tempdir");
        let mut w = Wal::open_sized(d.path(), 300).expect("open");
        // The model: entries after `floor` (compacted or reset up to it).
        let mut model: Vec<(u64, u64)> = Vec::new();
        let mut floor = 0u64;
        for op in ops {
            match op {
                Op::Append { back, n, term } => {
                    let next = model.last().map(|e| e.0 + 1).unwrap_or(floor + 1);
                    let from = next.saturating_sub(back).max(floor + 1);
                    let new = ents(from..=from + n - 1, term);
                    w.append(&new).expect("append");
                    model.retain(|e| e.0 < from);
                    model.extend(new.iter().map(|e| (e.index, e.term)));
                    w.sync().expect("sync");
                }
                Op::Compact { keep } => {
                    let Some(last) = model.last().map(|e| e.0) else { continue };
                    let to = last.saturating_sub(keep);
                    if to <= floor { continue; }
                    w.compact(to).expect("compact");
                    model.retain(|e| e.0 > to);
                    floor = to;
                }
                Op::Reset { ahead } => {
                    let at = model.last().map(|e| e.0).unwrap_or(floor) + ahead;
                    w.reset(at, 9).expect("reset");
                    model.clear();
                    floor = at;
                }
                Op::Reopen => {
                    drop(w);
                    w = Wal::open_sized(d.path(), 300).expect("reopen");
                    // A reopened log may hold entries at or before the
                    // floor (in a segment kept for later ones): the store
                    // forgets them on open, and so does this.
                    w.compact(floor).expect("compact to the floor");
                }
            }
            prop_assert_eq!(indexes_and_terms(&w), model.clone());
        }
    }
}
