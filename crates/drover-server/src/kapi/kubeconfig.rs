//! `DATA_DIR/kubeconfig` (mode 0600): one cluster and one context per
//! member (its HTTPS address, the cluster CA embedded, the server name
//! `drover-server` that every member certificate carries), the admin token
//! as the user, this member's context current. `export
//! KUBECONFIG=DATA_DIR/kubeconfig` and kubectl talks to drover; nothing
//! touches `~/.kube/config`.

use crate::ctx::Ctx;
use anyhow::{Context, Result};
use base64::Engine;
use serde_json::{json, Value};
use std::path::Path;

/// The file's name in the data dir.
pub const FILE: &str = "kubeconfig";

/// The address a client dials for a listening address: a wildcard host
/// becomes the loopback.
fn dialable(addr: &str) -> String {
    match addr.rsplit_once(':') {
        Some(("0.0.0.0", port)) => format!("127.0.0.1:{port}"),
        Some(("[::]", port)) => format!("[::1]:{port}"),
        _ => addr.to_string(),
    }
}

/// The kubeconfig of a cluster: `members` are (id, HTTPS address), `me`
/// the current one.
pub fn config(members: &[(u64, String)], me: u64, ca_pem: &str, token: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let name = |id: u64| format!("drover-{id:016x}");
    let clusters: Vec<Value> = members
        .iter()
        .map(|(id, addr)| {
            json!({
                "name": name(*id),
                "cluster": {
                    "server": format!("https://{}", dialable(addr)),
                    "certificate-authority-data": ca,
                    "tls-server-name": drover_pki::SERVER_NAME,
                },
            })
        })
        .collect();
    let contexts: Vec<Value> = members
        .iter()
        .map(|(id, _)| {
            json!({
                "name": name(*id),
                "context": { "cluster": name(*id), "user": "drover-admin", "namespace": "default" },
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "contexts": contexts,
        "current-context": name(me),
        "users": [{ "name": "drover-admin", "user": { "token": token } }],
        "preferences": {},
    })
}

/// The members (id, HTTPS address) of the cluster, this one first.
pub fn members(ctx: &Ctx, my_http: &str) -> Vec<(u64, String)> {
    let mut out = vec![(ctx.id, my_http.to_string())];
    let mut others: Vec<(u64, String)> = ctx
        .store
        .members()
        .values()
        .filter(|m| !m.removed && m.id != ctx.id && !m.http.is_empty())
        .map(|m| (m.id, m.http.clone()))
        .collect();
    others.sort();
    out.extend(others);
    out
}

/// Writes `dir/kubeconfig` (0600) unless this member has no admin token
/// yet (still joining).
pub fn write(dir: &Path, ctx: &Ctx, my_http: &str) -> Result<()> {
    let token = ctx.admin_token();
    if token.is_empty() {
        return Ok(());
    }
    let v = config(
        &members(ctx, my_http),
        ctx.id,
        ctx.trust.ca.cert_pem(),
        &token,
    );
    let yaml = serde_saphyr::to_string(&v).context("cannot encode the kubeconfig")?;
    let text = format!(
        "# kubectl configuration for this drover cluster, written by `drover server`.\n# export KUBECONFIG={}\n{yaml}",
        dir.join(FILE).display()
    );
    drover_pki::write_private(&dir.join(FILE), text.as_bytes())
        .with_context(|| format!("cannot write {}", dir.join(FILE).display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_context_per_member_this_one_current() {
        let v = config(
            &[(1, "0.0.0.0:7680".into()), (2, "10.0.0.2:7680".into())],
            1,
            "PEM",
            "tok",
        );
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:7680"
        );
        assert_eq!(
            v["clusters"][1]["cluster"]["server"],
            "https://10.0.0.2:7680"
        );
        assert_eq!(v["current-context"], "drover-0000000000000001");
        assert_eq!(v["users"][0]["user"]["token"], "tok");
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            "UEVN"
        );
    }
}
