//! Snapshot files: a point-in-time copy of the whole store in one file, for
//! `drover cluster snapshot save` and `drover server --restore`.
//!
//! The layout (all integers big-endian):
//!
//! | part | bytes |
//! |---|---|
//! | magic | the 16 bytes `drover-snapshot\n` |
//! | header | its length (u32), then a [`BackupHeader`] (protobuf) |
//! | objects | per object its length (u32), then a [`KeyValue`] (protobuf) |
//! | end | a length of 0 (u32) |
//! | checksum | the SHA-256 of every byte before it (32 bytes) |
//!
//! [`Encoder`] produces the bytes piece by piece (the server streams them as
//! it encodes); [`Backup::decode`] checks everything before it answers
//! (magic, format, bounds, the number of objects, the checksum), so a
//! corrupt or truncated file is refused before anything is written.

use crate::KeyValue;
use drover_proto::v1::BackupHeader;
use prost::Message as _;
use ring::digest;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The first bytes of every snapshot file.
pub const MAGIC: &[u8; 16] = b"drover-snapshot\n";
/// The layout this version writes and reads.
pub const FORMAT: u32 = 1;
/// Largest header read (it holds the CA, the tokens and the member list).
pub const MAX_HEADER_BYTES: usize = 1 << 20;
/// Largest object record read: a key (at most 4 KiB) and a value.
pub const MAX_RECORD_BYTES: usize = 64 << 20;
const CHECKSUM_BYTES: usize = 32;

/// Why a file is not a usable snapshot. Each says what is wrong, where.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BackupError {
    #[error("not a drover snapshot: it does not start with \"drover-snapshot\" (was it written by `drover cluster snapshot save`?)")]
    NotASnapshot,
    #[error("snapshot format {0} is not known to this drover (it reads format {FORMAT}); restore it with the drover version that saved it")]
    Format(u32),
    #[error("the snapshot is incomplete or damaged: it ends at byte {at} inside {what} (copy it again, or use another snapshot)")]
    Truncated { at: usize, what: &'static str },
    #[error("the snapshot is damaged: its SHA-256 checksum does not match its content; use another snapshot")]
    Checksum,
    #[error("the snapshot is damaged at byte {at}: {what}; use another snapshot")]
    Corrupt { at: usize, what: String },
}

/// A decoded, verified snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Backup {
    pub header: BackupHeader,
    /// Every object, in key order, with its revisions.
    pub kvs: Vec<KeyValue>,
}

/// Produces a snapshot file's bytes in pieces: [`Encoder::start`] with the
/// header, [`Encoder::object`] per object, [`Encoder::finish`] for the end
/// and the checksum. What each call returns is the next part of the file.
pub struct Encoder {
    sha: digest::Context,
    objects: u64,
    expected: u64,
}

impl Encoder {
    /// The magic and the header. `header.objects` must be the number of
    /// objects that follow (the reader checks it).
    pub fn start(header: &BackupHeader) -> (Encoder, Vec<u8>) {
        let mut e = Encoder {
            sha: digest::Context::new(&digest::SHA256),
            objects: 0,
            expected: header.objects,
        };
        let body = header.encode_to_vec();
        let mut out = Vec::with_capacity(MAGIC.len() + 4 + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        e.sha.update(&out);
        (e, out)
    }

    /// One object's record, appended to `out`.
    pub fn object(&mut self, kv: &KeyValue, out: &mut Vec<u8>) {
        let from = out.len();
        out.extend_from_slice(&(kv.encoded_len() as u32).to_be_bytes());
        kv.encode(out).expect("a Vec grows as needed");
        self.sha.update(&out[from..]);
        self.objects += 1;
    }

    /// The end mark and the checksum.
    pub fn finish(mut self) -> Vec<u8> {
        debug_assert_eq!(self.objects, self.expected, "the header's count");
        let end = 0u32.to_be_bytes();
        self.sha.update(&end);
        let mut out = end.to_vec();
        out.extend_from_slice(self.sha.finish().as_ref());
        out
    }
}

impl Backup {
    /// The whole file for `header` and `kvs` (`header.objects` is set).
    pub fn encode(mut header: BackupHeader, kvs: &[KeyValue]) -> Vec<u8> {
        header.objects = kvs.len() as u64;
        let (mut e, mut out) = Encoder::start(&header);
        for kv in kvs {
            e.object(kv, &mut out);
        }
        out.extend(e.finish());
        out
    }

    /// Reads only the header (for listings): the checksum is not checked.
    pub fn peek_header(bytes: &[u8]) -> Result<BackupHeader, BackupError> {
        let mut r = Reader { b: bytes, at: 0 };
        r.header()
    }

    /// Decodes and verifies a whole snapshot file.
    pub fn decode(bytes: &[u8]) -> Result<Backup, BackupError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(BackupError::NotASnapshot);
        }
        let mut r = Reader { b: bytes, at: 0 };
        let header = r.header()?;
        let mut kvs = Vec::with_capacity(header.objects.min(1 << 20) as usize);
        let mut last_key: Option<String> = None;
        loop {
            let at = r.at;
            let len = r.u32("an object's length")? as usize;
            if len == 0 {
                break;
            }
            if len > MAX_RECORD_BYTES {
                return Err(BackupError::Corrupt {
                    at,
                    what: format!(
                        "an object record of {len} bytes is over the limit of {MAX_RECORD_BYTES}"
                    ),
                });
            }
            let body = r.take(len, "an object")?;
            let kv = KeyValue::decode(body).map_err(|e| BackupError::Corrupt {
                at,
                what: format!("an object record does not decode ({e})"),
            })?;
            if kv.key.is_empty() || kv.key.len() > 4096 {
                return Err(BackupError::Corrupt {
                    at,
                    what: format!("an object's key of {} bytes (1 to 4096)", kv.key.len()),
                });
            }
            if kv.mod_revision > header.revision || kv.create_revision > kv.mod_revision {
                return Err(BackupError::Corrupt {
                    at,
                    what: format!(
                        "{:?} has revisions {}/{} beyond the snapshot's revision {}",
                        kv.key, kv.create_revision, kv.mod_revision, header.revision
                    ),
                });
            }
            if last_key.as_deref().is_some_and(|k| k >= kv.key.as_str()) {
                return Err(BackupError::Corrupt {
                    at,
                    what: format!("{:?} is out of key order", kv.key),
                });
            }
            last_key = Some(kv.key.clone());
            kvs.push(kv);
        }
        let content_end = r.at;
        let sum = r.take(CHECKSUM_BYTES, "the checksum")?;
        if r.at != bytes.len() {
            return Err(BackupError::Corrupt {
                at: r.at,
                what: format!("{} bytes follow the checksum", bytes.len() - r.at),
            });
        }
        if digest::digest(&digest::SHA256, &bytes[..content_end]).as_ref() != sum {
            return Err(BackupError::Checksum);
        }
        if kvs.len() as u64 != header.objects {
            return Err(BackupError::Corrupt {
                at: content_end,
                what: format!(
                    "it holds {} objects where its header says {}",
                    kvs.len(),
                    header.objects
                ),
            });
        }
        Ok(Backup { header, kvs })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], BackupError> {
        if self.b.len() - self.at < n {
            return Err(BackupError::Truncated {
                at: self.b.len(),
                what,
            });
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, BackupError> {
        let s = self.take(4, what)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn header(&mut self) -> Result<BackupHeader, BackupError> {
        let magic = self.take(MAGIC.len(), "the magic")?;
        if magic != MAGIC {
            return Err(BackupError::NotASnapshot);
        }
        let at = self.at;
        let len = self.u32("the header's length")? as usize;
        if len > MAX_HEADER_BYTES {
            return Err(BackupError::Corrupt {
                at,
                what: format!("a header of {len} bytes is over the limit of {MAX_HEADER_BYTES}"),
            });
        }
        let body = self.take(len, "the header")?;
        let h = BackupHeader::decode(body).map_err(|e| BackupError::Corrupt {
            at,
            what: format!("the header does not decode ({e})"),
        })?;
        if h.format != FORMAT {
            return Err(BackupError::Format(h.format));
        }
        Ok(h)
    }
}

/// Writes `bytes` to `path` as a whole or not at all: a temporary file in
/// the same directory (0600), synced, renamed over `path`, the directory
/// synced.
pub fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_file_then(path, bytes, || Ok(()))
}

/// [`write_file`], running `before_rename` once the new file is whole
/// and synced but not yet in place (scheduled snapshots prune the old
/// ones there, so that a listing never sees one too many).
pub fn write_file_then(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "snapshot".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = private_file(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        before_rename()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kv(key: &str, rev: u64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: format!("value of {key}").into_bytes(),
            create_revision: rev,
            mod_revision: rev,
        }
    }

    fn sample() -> (BackupHeader, Vec<KeyValue>) {
        let h = BackupHeader {
            format: FORMAT,
            cluster_id: "c1".into(),
            revision: 10,
            ca_key: "KEY".into(),
            ..Default::default()
        };
        (h, vec![kv("/a", 3), kv("/b", 7), kv("/c", 10)])
    }

    #[test]
    fn a_snapshot_reads_back_as_written() {
        let (h, kvs) = sample();
        let bytes = Backup::encode(h.clone(), &kvs);
        let b = Backup::decode(&bytes).expect("decodes");
        assert_eq!(b.kvs, kvs);
        assert_eq!(b.header.objects, 3);
        assert_eq!(b.header.cluster_id, "c1");
        assert_eq!(Backup::peek_header(&bytes).unwrap().revision, 10);
    }

    #[test]
    fn every_truncation_is_refused() {
        let (h, kvs) = sample();
        let bytes = Backup::encode(h, &kvs);
        for n in 0..bytes.len() {
            let e = Backup::decode(&bytes[..n]).expect_err("truncated");
            assert!(
                matches!(
                    e,
                    BackupError::Truncated { .. }
                        | BackupError::NotASnapshot
                        | BackupError::Checksum
                        | BackupError::Corrupt { .. }
                ),
                "{n}: {e}"
            );
        }
    }

    #[test]
    fn other_files_and_formats_are_named() {
        assert_eq!(
            Backup::decode(b"hello world, not a snapshot"),
            Err(BackupError::NotASnapshot)
        );
        let (mut h, kvs) = sample();
        h.format = 9;
        let e = Backup::decode(&Backup::encode(h, &kvs)).unwrap_err();
        assert_eq!(e, BackupError::Format(9));
        assert!(e.to_string().contains("format 9"), "{e}");
    }

    #[test]
    fn revisions_beyond_the_snapshot_are_refused() {
        let (h, mut kvs) = sample();
        kvs.push(kv("/d", 11));
        let e = Backup::decode(&Backup::encode(h, &kvs)).unwrap_err();
        assert!(matches!(e, BackupError::Corrupt { .. }), "{e}");
    }

    proptest! {
        /// Any one flipped byte is refused: the checksum covers every byte
        /// (a flip in the checksum itself no longer matches either).
        #[test]
        fn a_flipped_byte_is_refused(at in 0usize..1000, bit in 0u8..8) {
            let (h, kvs) = sample();
            let mut bytes = Backup::encode(h, &kvs);
            let at = at % bytes.len();
            bytes[at] ^= 1 << bit;
            prop_assert!(Backup::decode(&bytes).is_err());
        }
    }
}
