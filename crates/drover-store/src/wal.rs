//! The raft log in its own files: append-only segments in `DIR/wal`, one
//! `fdatasync` per Ready that appended, and no sled batch for it.
//!
//! Why not in sled: every sled batch rolls sled's write buffer twice and
//! wakes its thread pool, and the log made one batch per Ready on top of
//! the state machine's. With the log here, a put costs each member one
//! sled batch (the apply), written without a sync: the log is the durable
//! record, and what sled loses in a crash is applied again from it.
//!
//! # Format
//!
//! A segment is `NNNNNNNNNNNNNNNNNNNN.wal` (its sequence number, 20
//! digits), a run of records:
//!
//! ```text
//! len: u32 LE | crc32 of kind and payload: u32 LE | kind: u8 | payload: len bytes
//! ```
//!
//! - kind 1, an entry: raft's `Entry` in protobuf. An entry whose index is
//!   at or below the last one replaces that one and drops every entry
//!   after it (raft truncating a conflicting suffix).
//! - kind 2, a reset: `index: u64 LE | term: u64 LE`. Every entry before
//!   is gone; the log continues after `index` (a snapshot was installed).
//!
//! Records are read in segment order. A torn or damaged record at the end
//! of the last segment (a crash in the middle of a write) is cut off with
//! everything after it; anywhere else it is an error that names the file.
//!
//! # Compaction
//!
//! [`Wal::compact`] forgets entries up to an index and deletes the
//! segments that hold nothing after it. The caller must have made the
//! state that replaces them durable first (sled's compaction record and
//! applied state).

use crate::error::{Error, Result};
use protobuf::Message as _;
use raft::eraftpb::Entry;
use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

/// A segment is closed and the next one started past this size.
pub(crate) const SEGMENT_BYTES: u64 = 16 << 20;

/// The largest record a segment may hold: more is damage, not an entry
/// (a proposal is at most a few MiB).
const MAX_RECORD: usize = 256 << 20;

const HEADER: usize = 9;
const ENTRY: u8 = 1;
const RESET: u8 = 2;

/// Where an entry's bytes are.
#[derive(Debug, Clone, Copy)]
struct Loc {
    term: u64,
    segment: u64,
    /// Offset of the payload (after the header).
    offset: u64,
    len: u32,
}

struct Segment {
    seq: u64,
    path: PathBuf,
    file: File,
    len: u64,
    /// The highest entry index written in it (0: none).
    max_index: u64,
}

/// The log's files and an index of where each entry is.
pub(crate) struct Wal {
    dir: PathBuf,
    /// Oldest first; the last one is written to.
    segments: Vec<Segment>,
    /// The entries `first..first + locs.len()`.
    locs: VecDeque<Loc>,
    first: u64,
    /// A reset was read or written: the next entry must be `first`.
    after_reset: bool,
    /// Written since the last sync.
    dirty: bool,
    /// A segment is closed past this size ([`SEGMENT_BYTES`]; tests make
    /// it small).
    segment_bytes: u64,
}

/// A corrupt-log error naming the file.
fn corrupt(path: &Path, offset: u64, what: &str) -> Error {
    Error::Storage(format!(
        "the raft log {} is damaged at byte {offset}: {what}; restore this member from a snapshot or remove it and add it back",
        path.display()
    ))
}

fn io(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::Storage(format!("{what} {}: {e}", path.display()))
}

/// An append raft asked for that the log cannot take (a bug, not damage).
fn misfit(why: String) -> Error {
    Error::Storage(format!(
        "raft asked to append a log entry that does not fit: {why}"
    ))
}

fn segment_name(seq: u64) -> String {
    format!("{seq:020}.wal")
}

fn open_file(path: &Path, create: bool) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(create)
        .mode(0o600)
        .open(path)
        .map_err(|e| io("cannot open the raft log", path, e))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot sync the directory", dir, e))
}

/// The checksum of a record: its kind and payload.
fn checksum(kind: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(payload);
    h.finalize()
}

fn record(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&checksum(kind, payload).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
}

/// One record read from a segment's bytes at `at`: Ok(None) at a clean
/// end, Err(reason) where the bytes are not a whole, intact record.
fn read_record(buf: &[u8], at: usize) -> std::result::Result<Option<(u8, &[u8])>, &'static str> {
    if at == buf.len() {
        return Ok(None);
    }
    let Some(h) = buf.get(at..at + HEADER) else {
        return Err("a record header is cut short");
    };
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    let kind = h[8];
    if len > MAX_RECORD {
        return Err("a record is larger than any the log writes");
    }
    let Some(payload) = buf.get(at + HEADER..at + HEADER + len) else {
        return Err("a record is cut short");
    };
    if checksum(kind, payload) != crc {
        return Err("a record's checksum does not match");
    }
    Ok(Some((kind, payload)))
}

impl Wal {
    /// Opens the log in `dir` (created if missing), reading every segment.
    pub fn open(dir: &Path) -> Result<Wal> {
        Wal::open_sized(dir, SEGMENT_BYTES)
    }

    /// [`Wal::open`], closing segments past `segment_bytes`.
    pub(crate) fn open_sized(dir: &Path, segment_bytes: u64) -> Result<Wal> {
        std::fs::create_dir_all(dir).map_err(|e| io("cannot create", dir, e))?;
        let mut seqs = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| io("cannot read", dir, e))? {
            let entry = entry.map_err(|e| io("cannot read", dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(seq) = name
                .strip_suffix(".wal")
                .and_then(|s| s.parse::<u64>().ok())
            {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut wal = Wal {
            dir: dir.to_path_buf(),
            segments: Vec::new(),
            locs: VecDeque::new(),
            first: 0,
            after_reset: false,
            dirty: false,
            segment_bytes,
        };
        let count = seqs.len();
        for (i, seq) in seqs.into_iter().enumerate() {
            wal.read_segment(seq, i + 1 == count)?;
        }
        if wal.segments.is_empty() {
            wal.new_segment(1)?;
        }
        Ok(wal)
    }

    fn read_segment(&mut self, seq: u64, last: bool) -> Result<()> {
        let path = self.dir.join(segment_name(seq));
        let file = open_file(&path, false)?;
        let buf = std::fs::read(&path).map_err(|e| io("cannot read the raft log", &path, e))?;
        let mut at = 0usize;
        let mut max_index = 0;
        loop {
            let (kind, payload) = match read_record(&buf, at) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(why) if last => {
                    // A write cut short by a crash: it was never synced, so
                    // nobody was told it was durable. Cut it off.
                    tracing::warn!(
                        "the raft log {} ends in a partial record at byte {at} ({why}); cutting it off",
                        path.display()
                    );
                    file.set_len(at as u64)
                        .and_then(|_| file.sync_all())
                        .map_err(|e| io("cannot cut the partial record off", &path, e))?;
                    break;
                }
                Err(why) => return Err(corrupt(&path, at as u64, why)),
            };
            let offset = (at + HEADER) as u64;
            match kind {
                ENTRY => {
                    let e = Entry::parse_from_bytes(payload).map_err(|err| {
                        corrupt(
                            &path,
                            at as u64,
                            &format!("an entry does not decode ({err})"),
                        )
                    })?;
                    self.place(
                        e.index,
                        Loc {
                            term: e.term,
                            segment: seq,
                            offset,
                            len: payload.len() as u32,
                        },
                    )
                    .map_err(|why| corrupt(&path, at as u64, &why))?;
                    max_index = max_index.max(e.index);
                }
                RESET => {
                    // index, then term: the term is on disk for whoever
                    // reads the file; the store keeps it in sled.
                    let Some(i) = payload.get(..8).filter(|_| payload.len() == 16) else {
                        return Err(corrupt(&path, at as u64, "a reset record is not 16 bytes"));
                    };
                    let index = u64::from_le_bytes(i.try_into().expect("8 bytes"));
                    self.locs.clear();
                    self.first = index + 1;
                    self.after_reset = true;
                }
                other => {
                    return Err(corrupt(
                        &path,
                        at as u64,
                        &format!("unknown record kind {other}"),
                    ))
                }
            }
            at += HEADER + payload.len();
        }
        self.segments.push(Segment {
            seq,
            path,
            file,
            len: at as u64,
            max_index,
        });
        Ok(())
    }

    /// Whether entry `index` may come next: right after a reset, the
    /// entry after it; otherwise at most one past the last entry.
    fn fits(&self, index: u64) -> std::result::Result<(), String> {
        if self.locs.is_empty() {
            if self.after_reset && index != self.first {
                return Err(format!(
                    "entry {index} follows a reset to {}",
                    self.first.saturating_sub(1)
                ));
            }
        } else {
            let next = self.first + self.locs.len() as u64;
            if index > next {
                return Err(format!("entry {index} leaves a gap after {}", next - 1));
            }
        }
        Ok(())
    }

    /// Records where entry `index` is, dropping any entry at or after it.
    fn place(&mut self, index: u64, loc: Loc) -> std::result::Result<(), String> {
        self.fits(index)?;
        if self.locs.is_empty() || index < self.first {
            // The first entry, or truncated back before everything held:
            // start over here.
            self.locs.clear();
            self.first = index;
        } else {
            self.locs.truncate((index - self.first) as usize);
        }
        self.locs.push_back(loc);
        Ok(())
    }

    fn new_segment(&mut self, seq: u64) -> Result<()> {
        let path = self.dir.join(segment_name(seq));
        let file = open_file(&path, true)?;
        sync_dir(&self.dir)?;
        self.segments.push(Segment {
            seq,
            path,
            file,
            len: 0,
            max_index: 0,
        });
        Ok(())
    }

    fn active(&mut self) -> &mut Segment {
        self.segments
            .last_mut()
            .expect("the log always has a segment")
    }

    /// Closes the active segment (synced) and starts the next one when it
    /// has grown past its size.
    fn maybe_rotate(&mut self) -> Result<()> {
        if self.active().len < self.segment_bytes {
            return Ok(());
        }
        self.sync()?;
        let seq = self.active().seq + 1;
        self.new_segment(seq)
    }

    fn write(&mut self, buf: &[u8]) -> Result<u64> {
        let seg = self.active();
        let at = seg.len;
        seg.file
            .write_all(buf)
            .map_err(|e| io("cannot write the raft log", &seg.path, e))?;
        seg.len += buf.len() as u64;
        self.dirty = true;
        Ok(at)
    }

    /// The index of the first entry held (the one after a reset when none
    /// is), or None when the log holds no entry.
    pub fn first_index(&self) -> Option<u64> {
        (!self.locs.is_empty()).then_some(self.first)
    }

    /// The index of the last entry held.
    pub fn last_index(&self) -> Option<u64> {
        (!self.locs.is_empty()).then(|| self.first + self.locs.len() as u64 - 1)
    }

    /// Appends `ents` (consecutive), replacing any entry at or after the
    /// first one's index. Not durable until [`Wal::sync`].
    pub fn append(&mut self, ents: &[Entry]) -> Result<()> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        // Checked before anything is written: a refused append leaves no
        // record behind.
        self.fits(first.index).map_err(misfit)?;
        if ents.windows(2).any(|w| w[1].index != w[0].index + 1) {
            return Err(Error::Storage(
                "raft asked to append log entries whose indexes do not follow each other".into(),
            ));
        }
        self.maybe_rotate()?;
        let mut buf = Vec::new();
        let mut spans = Vec::with_capacity(ents.len());
        for e in ents {
            let payload = e.write_to_bytes()?;
            spans.push((e.index, e.term, buf.len() + HEADER, payload.len()));
            record(ENTRY, &payload, &mut buf);
        }
        let at = self.write(&buf)?;
        let seq = self.active().seq;
        for (index, term, offset, len) in spans {
            let loc = Loc {
                term,
                segment: seq,
                offset: at + offset as u64,
                len: len as u32,
            };
            self.place(index, loc).map_err(misfit)?;
            let seg = self.active();
            seg.max_index = seg.max_index.max(index);
        }
        Ok(())
    }

    /// Drops every entry: the log continues after `index` (of `term`).
    /// Synced before it returns.
    pub fn reset(&mut self, index: u64, term: u64) -> Result<()> {
        self.maybe_rotate()?;
        let mut payload = [0u8; 16];
        payload[..8].copy_from_slice(&index.to_le_bytes());
        payload[8..].copy_from_slice(&term.to_le_bytes());
        let mut buf = Vec::with_capacity(HEADER + 16);
        record(RESET, &payload, &mut buf);
        self.write(&buf)?;
        self.locs.clear();
        self.first = index + 1;
        self.after_reset = true;
        self.sync()?;
        // Every closed segment holds only what the reset dropped.
        self.drop_closed_segments(|_| true)
    }

    /// Deletes the closed segments, oldest first, while `done` says so.
    fn drop_closed_segments(&mut self, done: impl Fn(&Segment) -> bool) -> Result<()> {
        let mut removed = false;
        while self.segments.len() > 1 && done(&self.segments[0]) {
            let s = &self.segments[0];
            std::fs::remove_file(&s.path)
                .map_err(|e| io("cannot remove the old raft log segment", &s.path, e))?;
            self.segments.remove(0);
            removed = true;
        }
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Makes everything written so far durable (`fdatasync` of the active
    /// segment; closed ones were synced when they were closed).
    pub fn sync(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let seg = self.active();
        seg.file
            .sync_data()
            .map_err(|e| io("fdatasync of the raft log failed:", &seg.path, e))?;
        self.dirty = false;
        Ok(())
    }

    /// Forgets the entries up to and including `to`, and deletes the
    /// closed segments that hold none after it.
    pub fn compact(&mut self, to: u64) -> Result<()> {
        let n = to
            .saturating_add(1)
            .saturating_sub(self.first)
            .min(self.locs.len() as u64);
        self.locs.drain(..n as usize);
        self.first += n;
        if self.locs.is_empty() {
            self.first = self.first.max(to + 1);
        }
        let keep_from = self
            .locs
            .front()
            .map(|l| l.segment)
            .unwrap_or_else(|| self.segments.last().map(|s| s.seq).unwrap_or(0));
        self.drop_closed_segments(|s| s.seq < keep_from && s.max_index <= to)
    }

    fn loc(&self, index: u64) -> Option<Loc> {
        let i = index.checked_sub(self.first)?;
        self.locs.get(usize::try_from(i).ok()?).copied()
    }

    /// The term of entry `index`, if the log holds it.
    pub fn term(&self, index: u64) -> Option<u64> {
        self.loc(index).map(|l| l.term)
    }

    /// Entries `low..high` (all held), at most `max_size` bytes of them but
    /// at least one.
    pub fn entries(&self, low: u64, high: u64, max_size: u64) -> Result<Vec<Entry>> {
        let mut out = Vec::with_capacity((high - low).min(1024) as usize);
        let mut size = 0u64;
        let mut index = low;
        while index < high {
            let Some(first) = self.loc(index) else {
                return Err(Error::Storage(format!(
                    "raft asked for log entry {index}, which the log does not hold"
                )));
            };
            // One read for the run of entries that lie back to back in
            // one segment.
            let mut end = first.offset + first.len as u64;
            let mut locs = vec![first];
            while index + (locs.len() as u64) < high {
                match self.loc(index + locs.len() as u64) {
                    Some(l) if l.segment == first.segment && l.offset == end + HEADER as u64 => {
                        end = l.offset + l.len as u64;
                        locs.push(l);
                    }
                    _ => break,
                }
                if locs.len() >= 1024 {
                    break;
                }
            }
            let seg = self
                .segments
                .iter()
                .find(|s| s.seq == first.segment)
                .ok_or_else(|| {
                    Error::Storage(format!(
                        "log entry {index} is in segment {}, which is gone",
                        first.segment
                    ))
                })?;
            let mut buf = vec![0u8; (end - first.offset) as usize];
            seg.file
                .read_exact_at(&mut buf, first.offset)
                .map_err(|e| io("cannot read the raft log", &seg.path, e))?;
            for l in locs {
                let at = (l.offset - first.offset) as usize;
                let e = Entry::parse_from_bytes(&buf[at..at + l.len as usize])?;
                size += e.compute_size() as u64;
                if !out.is_empty() && size > max_size {
                    return Ok(out);
                }
                out.push(e);
                index += 1;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;

#[cfg(test)]
pub(crate) mod tests_support {
    use raft::eraftpb::Entry;

    /// An entry whose data names its index and term.
    pub fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            data: format!("entry {index} of term {term}").into_bytes().into(),
            ..Default::default()
        }
    }

    /// The entries of `range`, all of `term`.
    pub fn entries(range: std::ops::RangeInclusive<u64>, term: u64) -> Vec<Entry> {
        range.map(|i| entry(i, term)).collect()
    }

    /// The names of the segment files in `dir`, in order.
    pub fn segments(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".wal"))
            .collect();
        v.sort();
        v
    }
}
