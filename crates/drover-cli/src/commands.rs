//! The commands of issue one: cluster membership and generic objects (`kv`).
//!
//! Every function takes a connected [`Client`] and a writer, so tests can run
//! them in-process and check what a user would see.

use crate::client::{Client, ClientError};
use crate::table;
use anyhow::{bail, Context, Result};
use drover_proto::v1 as pb;
use std::io::Write;
use std::path::Path;

/// A member id as users see it: 16 hex digits.
pub fn fmt_id(id: u64) -> String {
    format!("{id:016x}")
}

/// Parses a member id given in hex (as `cluster status` prints it).
pub fn parse_id(s: &str) -> Result<u64> {
    let t = s.trim().trim_start_matches("0x");
    match u64::from_str_radix(t, 16) {
        Ok(0) | Err(_) => bail!(
            "member id {s:?} is not valid: give the hex ID that `drover cluster status` shows"
        ),
        Ok(id) => Ok(id),
    }
}

/// `drover cluster status`: every member, its address, role, term,
/// indexes, the agent sessions it holds and the version it runs (a rolling
/// upgrade shows here, `docs/upgrades.md`), as each member itself reports
/// them.
pub async fn cluster_status(c: &Client, out: &mut impl Write) -> Result<()> {
    let first = c.status().await?;
    let mut rows = Vec::new();
    let mut members = first.members.clone();
    members.sort_by_key(|m| m.addr.clone());
    for m in &members {
        let st = match c.with_server(&m.addr) {
            Ok(one) => one.status().await.ok(),
            Err(_) => None,
        };
        let row = match st {
            Some(s) => vec![
                fmt_id(m.id),
                m.addr.clone(),
                m.http.clone(),
                if s.role == "leader" {
                    "leader".into()
                } else {
                    s.role.clone()
                },
                s.term.to_string(),
                s.commit.to_string(),
                s.applied.to_string(),
                s.sessions.to_string(),
                "true".into(),
                // Empty only from a member older than the field (none yet).
                if s.version.is_empty() {
                    "-".into()
                } else {
                    s.version.clone()
                },
            ],
            None => vec![
                fmt_id(m.id),
                m.addr.clone(),
                m.http.clone(),
                if m.learner { "learner" } else { "voter" }.into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "false (unreachable)".into(),
                "-".into(),
            ],
        };
        rows.push(row);
    }
    let leader = if first.leader == 0 {
        "none elected".to_string()
    } else {
        fmt_id(first.leader)
    };
    write!(
        out,
        "{}",
        table::render(
            &[
                "ID", "ADDRESS", "HTTP", "ROLE", "TERM", "COMMIT", "APPLIED", "SESSIONS",
                "HEALTHY", "VERSION",
            ],
            &rows
        )
    )?;
    writeln!(
        out,
        "\nleader: {leader}   term: {}   members: {}",
        first.term,
        members.len()
    )?;
    Ok(())
}

/// `drover cluster remove ID|ADDR`.
pub async fn cluster_remove(c: &Client, who: &str, out: &mut impl Write) -> Result<()> {
    let st = c.status().await?;
    let id = match st.members.iter().find(|m| m.addr == who) {
        Some(m) => m.id,
        None => parse_id(who)?,
    };
    let left = c.remove_member(id).await?;
    writeln!(
        out,
        "member {} removed; {} members remain",
        fmt_id(id),
        left.len()
    )?;
    Ok(())
}

/// `drover server leave --data-dir DIR`: removes the member whose data dir
/// this is, using the data dir's own client.yaml.
pub async fn server_leave(dir: &Path, out: &mut impl Write) -> Result<()> {
    let ident = dir.join("server.json");
    let text = std::fs::read(&ident).with_context(|| {
        format!(
            "{} not found: is {} a server's data dir?",
            ident.display(),
            dir.display()
        )
    })?;
    let v: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("{} is corrupt", ident.display()))?;
    let id = v
        .get("id")
        .and_then(|x| x.as_str())
        .map(parse_id)
        .transpose()?
        .with_context(|| format!("{} has no member id", ident.display()))?;
    let cfg = crate::ClientConfig::load(&dir.join("client.yaml"))?;
    let c = Client::new(&cfg)?;
    let left = c.remove_member(id).await?;
    writeln!(
        out,
        "member {} left the cluster; {} members remain",
        fmt_id(id),
        left.len()
    )?;
    Ok(())
}

/// `drover access issue NAME --role admin|viewer [--ttl D] [-o FILE]`: a
/// key made here (it never leaves this machine), a certificate the cluster
/// signs for it, and a client config holding both, written 0600.
pub async fn access_issue(
    c: &Client,
    name: &str,
    role: &str,
    ttl: Option<std::time::Duration>,
    path: &Path,
    out: &mut impl Write,
) -> Result<()> {
    if path.exists() {
        bail!(
            "{} exists; choose another -o FILE or remove it first",
            path.display()
        );
    }
    let cred = drover_pki::Credential::generate(&format!("drover:{role}:{name}"))?;
    let resp = c
        .issue_client(pb::IssueClientRequest {
            name: name.to_string(),
            role: role.to_string(),
            ttl_seconds: ttl.map(|t| t.as_secs()).unwrap_or(0),
            csr: cred.csr_pem.clone(),
        })
        .await?;
    let cfg = crate::ClientConfig {
        servers: if resp.servers.is_empty() {
            c.servers().to_vec()
        } else {
            resp.servers
        },
        token: String::new(),
        ca: resp.ca,
        cert: resp.cert,
        key: cred.key_pem,
    };
    let yaml = serde_saphyr::to_string(&cfg).context("cannot encode the client config")?;
    let text = format!(
        "# drover client configuration for {role} {name}, written by `drover access issue`.\n# Use it with `drover --config {}`.\n{yaml}",
        path.display()
    );
    drover_pki::write_private(path, text.as_bytes())?;
    writeln!(
        out,
        "wrote {} for {role} {name}: use it with drover --config {}",
        path.display(),
        path.display()
    )?;
    Ok(())
}

/// `drover token rotate server|node|admin|metrics`: prints the new token;
/// every member refuses the old one from now on (nodes and members already
/// joined keep their certificates; connections the old admin token let in
/// are closed, and members write the new one in their client.yaml and
/// kubeconfig). The metrics token is shown only now: the cluster keeps
/// only its SHA-256.
pub async fn token_rotate(c: &Client, kind: &str, out: &mut impl Write) -> Result<()> {
    let t = c.rotate_token(kind).await?;
    writeln!(out, "{t}")?;
    Ok(())
}

/// `drover access list`: the client certificates on record.
pub async fn access_list(c: &Client, out: &mut impl Write) -> Result<()> {
    let records = c.list_access().await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let when = |s: u64| {
        humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s))
            .to_string()
    };
    let mut rows = Vec::new();
    for r in &records {
        let status = if r.revoked_at != 0 {
            format!("Revoked {} by {}", when(r.revoked_at), r.revoked_by)
        } else if r.not_after <= now {
            "Expired".to_string()
        } else {
            "Valid".to_string()
        };
        rows.push(vec![
            r.name.clone(),
            if r.role.is_empty() {
                "<unknown>".into()
            } else {
                r.role.clone()
            },
            r.serial.clone(),
            when(r.not_after),
            status,
            if r.issued_by.is_empty() {
                "<not on record>".into()
            } else {
                r.issued_by.clone()
            },
        ]);
    }
    if records.is_empty() {
        writeln!(out, "No client certificates are on record.")?;
        return Ok(());
    }
    let headers = ["NAME", "ROLE", "SERIAL", "EXPIRES", "STATUS", "ISSUED BY"];
    write!(out, "{}", crate::table::render(&headers, &rows))?;
    Ok(())
}

/// `drover access revoke NAME [--serial S]`: every member refuses the
/// certificates from now on and closes the connections they hold.
pub async fn access_revoke(
    c: &Client,
    name: &str,
    serial: Option<&str>,
    out: &mut impl Write,
) -> Result<()> {
    let revoked = c.revoke_access(name, serial.unwrap_or("")).await?;
    if revoked.is_empty() {
        writeln!(
            out,
            "every certificate of {name} was revoked or had expired already"
        )?;
    }
    for r in revoked {
        let role = if r.role.is_empty() {
            "client"
        } else {
            r.role.as_str()
        };
        writeln!(out, "revoked the {role} certificate {} of {name}", r.serial)?;
    }
    Ok(())
}

/// Output formats of the kv commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KvOutput {
    /// The value only.
    Value,
    /// One JSON object per entry: key, value, createRevision, modRevision.
    Json,
}

fn kv_json(kv: &pb::KeyValue) -> serde_json::Value {
    serde_json::json!({
        "key": kv.key,
        "value": String::from_utf8_lossy(&kv.value),
        "createRevision": kv.create_revision,
        "modRevision": kv.mod_revision,
    })
}

/// `drover kv get KEY`.
pub async fn kv_get(
    c: &Client,
    key: &str,
    local: bool,
    o: KvOutput,
    out: &mut impl Write,
) -> Result<()> {
    let (kv, _) = c.get(key, local).await?;
    let Some(kv) = kv else {
        bail!("{key:?} not found");
    };
    match o {
        KvOutput::Value => out.write_all(&kv.value)?,
        KvOutput::Json => serde_json::to_writer(&mut *out, &kv_json(&kv))?,
    }
    writeln!(out)?;
    Ok(())
}

/// `drover kv put KEY VALUE [--create | --if-revision N]`.
pub async fn kv_put(
    c: &Client,
    key: &str,
    value: &str,
    create: bool,
    if_revision: Option<u64>,
    out: &mut impl Write,
) -> Result<()> {
    let r = if create {
        c.create(key, value.as_bytes().to_vec()).await
    } else {
        match if_revision {
            Some(rev) if rev > 0 => c.update(key, value.as_bytes().to_vec(), rev, false).await,
            Some(_) => {
                bail!("--if-revision: must be a revision above 0 (see `drover kv get -o json`)")
            }
            None => c.update(key, value.as_bytes().to_vec(), 0, true).await,
        }
    };
    let r = r?;
    writeln!(out, "{key} written at revision {}", r.revision)?;
    Ok(())
}

/// `drover kv delete KEY [--if-revision N]`.
pub async fn kv_delete(
    c: &Client,
    key: &str,
    if_revision: Option<u64>,
    out: &mut impl Write,
) -> Result<()> {
    let r = c.delete(key, if_revision.unwrap_or(0)).await?;
    writeln!(out, "{key} deleted at revision {}", r.revision)?;
    Ok(())
}

/// `drover kv list [PREFIX]`.
pub async fn kv_list(
    c: &Client,
    prefix: &str,
    local: bool,
    o: KvOutput,
    out: &mut impl Write,
) -> Result<()> {
    let (kvs, rev) = c.list(prefix, local).await?;
    match o {
        KvOutput::Value => {
            let rows: Vec<Vec<String>> = kvs
                .iter()
                .map(|kv| {
                    vec![
                        kv.key.clone(),
                        kv.mod_revision.to_string(),
                        String::from_utf8_lossy(&kv.value)
                            .chars()
                            .take(60)
                            .collect(),
                    ]
                })
                .collect();
            write!(
                out,
                "{}",
                table::render(&["KEY", "REVISION", "VALUE"], &rows)
            )?;
        }
        KvOutput::Json => {
            let items: Vec<_> = kvs.iter().map(kv_json).collect();
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({"revision": rev, "items": items}),
            )?;
            writeln!(out)?;
        }
    }
    Ok(())
}

/// `drover kv watch PREFIX [--from REV]`: one line per change until stopped.
pub async fn kv_watch(c: &Client, prefix: &str, from: u64, out: &mut impl Write) -> Result<()> {
    let mut s = c.watch(prefix, from).await?;
    while let Some(r) = s.message().await.map_err(ClientError::from)? {
        for e in r.events {
            let Some(kv) = e.kv else { continue };
            let kind = if e.r#type == pb::event::Type::Delete as i32 {
                "DELETE"
            } else {
                "PUT"
            };
            writeln!(
                out,
                "{} {kind} {} {}",
                r.revision,
                kv.key,
                String::from_utf8_lossy(&kv.value)
            )?;
        }
        out.flush()?;
    }
    Ok(())
}
