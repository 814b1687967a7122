//! `drover cluster snapshot save FILE` and `drover cluster snapshot list`.
//!
//! A saved snapshot is checked whole (format, every record, the SHA-256)
//! before it is written, then written atomically and readable by its owner
//! only: it holds every Secret, the cluster's CA key and its tokens.

use crate::client::Client;
use crate::commands::fmt_id;
use crate::table;
use anyhow::{bail, Context, Result};
use drover_store::backup::{write_file, Backup};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Largest snapshot a client takes in (the whole file is checked in
/// memory before it is written).
pub const MAX_SNAPSHOT_BYTES: usize = 8 << 30;

/// `drover cluster snapshot save FILE`.
pub async fn save(c: &Client, path: &Path, out: &mut impl Write) -> Result<()> {
    if path.is_dir() {
        bail!(
            "{} is a directory: give the snapshot's file name (e.g. {}/drover.snapshot)",
            path.display(),
            path.display()
        );
    }
    let started = Instant::now();
    let mut stream = c.snapshot().await.map_err(too_old)?;
    let mut bytes = Vec::new();
    let mut done = false;
    while let Some(chunk) = stream.message().await.map_err(|s| {
        anyhow::anyhow!(
            "the snapshot stream broke after {} bytes: {}; nothing was written, try again",
            bytes.len(),
            s.message()
        )
    })? {
        if bytes.len() + chunk.data.len() > MAX_SNAPSHOT_BYTES {
            bail!("the snapshot is larger than {MAX_SNAPSHOT_BYTES} bytes, the most this client takes; nothing was written");
        }
        bytes.extend_from_slice(&chunk.data);
        if chunk.done {
            done = true;
            break;
        }
    }
    if !done {
        bail!(
            "the server ended the snapshot after {} bytes without its end; nothing was written, try again",
            bytes.len()
        );
    }
    let b = Backup::decode(&bytes).map_err(|e| {
        anyhow::anyhow!("the server sent a snapshot that does not check: {e}; nothing was written")
    })?;
    write_file(path, &bytes).with_context(|| {
        format!(
            "cannot write {}: check the directory's permissions and free space",
            path.display()
        )
    })?;
    writeln!(
        out,
        "Snapshot saved to {}: {} objects at revision {} of cluster {} ({}, {} ms).",
        path.display(),
        b.kvs.len(),
        b.header.revision,
        if b.header.cluster_id.is_empty() {
            "(no id yet)"
        } else {
            &b.header.cluster_id
        },
        size(bytes.len() as u64),
        started.elapsed().as_millis()
    )?;
    writeln!(
        out,
        "It holds every Secret, the CA key and the tokens (mode 0600): keep it as you keep those. Restore: drover server --data-dir EMPTY_DIR --restore {}",
        path.display()
    )?;
    Ok(())
}

/// `drover cluster snapshot list`: the scheduled snapshots of every member.
pub async fn list(c: &Client, out: &mut impl Write) -> Result<()> {
    let st = c.status().await?;
    let mut members = st.members.clone();
    members.retain(|m| !m.removed);
    members.sort_by_key(|m| m.addr.clone());
    let now = SystemTime::now();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for m in &members {
        let answer = match c.with_server(&m.addr) {
            Ok(one) => one.list_snapshots().await.map_err(too_old),
            Err(e) => Err(e.into()),
        };
        match answer {
            Ok(r) => {
                notes.push(format!(
                    "{}: {} in {}",
                    fmt_id(m.id),
                    if r.schedule.is_empty() {
                        "no scheduled snapshots (--snapshot-interval)".to_string()
                    } else {
                        r.schedule.clone()
                    },
                    r.dir
                ));
                for s in r.snapshots {
                    let taken = UNIX_EPOCH + Duration::from_millis(s.taken_at_ms);
                    rows.push(vec![
                        fmt_id(m.id),
                        s.name,
                        s.revision.to_string(),
                        s.objects.to_string(),
                        size(s.size),
                        drover_api::timefmt::human_duration(
                            now.duration_since(taken).unwrap_or_default(),
                        ),
                    ]);
                }
            }
            Err(e) => notes.push(format!("{}: unreachable ({e:#})", fmt_id(m.id))),
        }
    }
    if rows.is_empty() {
        writeln!(out, "No scheduled snapshots.")?;
    } else {
        write!(
            out,
            "{}",
            table::render(
                &["MEMBER", "FILE", "REVISION", "OBJECTS", "SIZE", "AGE"],
                &rows
            )
        )?;
    }
    for n in notes {
        writeln!(out, "{n}")?;
    }
    Ok(())
}

/// A member of a release before snapshots answers UNIMPLEMENTED: say so.
fn too_old(e: crate::client::ClientError) -> anyhow::Error {
    if e.code() == Some(tonic::Code::Unimplemented) {
        anyhow::anyhow!(
            "this server's drover is older than snapshots ({e}): upgrade it (docs/upgrades.md), or point --server at an upgraded member"
        )
    } else {
        e.into()
    }
}

fn size(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f >= K * K * K {
        format!("{:.1} GiB", f / K / K / K)
    } else if f >= K * K {
        format!("{:.1} MiB", f / K / K)
    } else if f >= K {
        format!("{:.1} KiB", f / K)
    } else {
        format!("{n} B")
    }
}
