//! The dashboard's HTML: escaping, the page frame (navigation, who is
//! signed in, the CSRF token for the script), tables in kubectl's
//! columns, and the embedded stylesheet and script (`assets/`, compiled
//! into the binary).

use super::Signed;
use base64::Engine as _;
use std::fmt::Write as _;
use std::sync::OnceLock;

/// The stylesheet, inlined in every page (allowed by its hash).
pub const STYLE: &str = include_str!("assets/app.css");
/// The script, served at `/ui/app.js` to a session.
pub const SCRIPT: &str = include_str!("assets/app.js");

/// The Content-Security-Policy of every answer: scripts from this origin
/// only, the one stylesheet by its SHA-256, live updates from this origin.
pub fn csp() -> String {
    static HASH: OnceLock<String> = OnceLock::new();
    let hash = HASH.get_or_init(|| {
        let d = ring::digest::digest(&ring::digest::SHA256, STYLE.as_bytes());
        base64::engine::general_purpose::STANDARD.encode(d.as_ref())
    });
    format!(
        "default-src 'none'; script-src 'self'; style-src 'sha256-{hash}'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
}

/// `text` escaped for HTML text and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` escaped as one component of a URL path or query.
pub fn url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Which part of the navigation a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Overview,
    Nodes,
    Workloads,
    Events,
}

/// A whole page: `body` inside the frame. `live` is the path of the
/// page's server-sent events, if it has any.
pub fn frame(
    signed: &Signed,
    title: &str,
    section: Section,
    live: Option<&str>,
    body: &str,
) -> String {
    let nav = [
        (Section::Overview, "/ui", "Overview"),
        (Section::Nodes, "/ui/nodes", "Nodes"),
        (Section::Workloads, "/ui/workloads", "Workloads"),
        (Section::Events, "/ui/events", "Events"),
    ]
    .iter()
    .map(|(s, href, name)| {
        let current = if *s == section {
            r#" aria-current="page""#
        } else {
            ""
        };
        format!(r#"<a href="{href}"{current}>{name}</a>"#)
    })
    .collect::<String>();
    let live_attr = live
        .map(|l| format!(r#" data-live="{}""#, esc(l)))
        .unwrap_or_default();
    let s = &signed.session;
    format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="csrf" content="{csrf}"><title>{title} · drover</title><style>{STYLE}</style><script src="/ui/app.js" defer></script></head>
<body data-role="{role}"{live_attr}><header><a class="brand" href="/ui">drover</a><nav>{nav}</nav><span class="who" id="who">{who} ({role})</span><span id="live-state" class="live-state" title="live updates">●</span><form method="post" action="/ui/logout" class="inline"><input type="hidden" name="csrf" value="{csrf}"><button type="submit" class="link">Sign out</button></form></header>
<main>{body}</main></body></html>"#,
        csrf = esc(&signed.csrf),
        title = esc(title),
        role = s.role.as_str(),
        who = esc(&s.who),
    )
}

/// A table with kubectl's `headers`; each row's cells are HTML already
/// (escape text with [`esc`]), `ids` give rows an id for live updates.
pub fn table(headers: &[&str], rows: &[(Option<String>, Vec<String>)]) -> String {
    let mut out = String::from(r#"<div class="scroll"><table><thead><tr>"#);
    for h in headers {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for (id, cells) in rows {
        match id {
            Some(id) => {
                let _ = write!(out, r#"<tr id="{}">"#, esc(id));
            }
            None => out.push_str("<tr>"),
        }
        for (i, c) in cells.iter().enumerate() {
            let label = headers.get(i).copied().unwrap_or("");
            let _ = write!(out, r#"<td data-label="{}">{c}</td>"#, esc(label));
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            out,
            r#"<tr><td colspan="{}" class="muted">No resources found.</td></tr>"#,
            headers.len().max(1)
        );
    }
    out.push_str("</tbody></table></div>");
    out
}

/// A grid's legend: for each state (its CSS class, its label, how many
/// cells have it) a swatch, the label and the count, the count with the id
/// `{id_prefix}{class}` that the live script updates.
pub fn legend<'a>(
    states: impl IntoIterator<Item = (&'a str, &'a str, usize)>,
    id_prefix: &str,
) -> String {
    let mut out = String::from(r#"<div class="legend">"#);
    for (class, label, n) in states {
        let _ = write!(
            out,
            r#"<span><i class="c s-{class}"></i> {label} <b id="{id_prefix}{class}">{n}</b></span>"#,
        );
    }
    out.push_str("</div>");
    out
}

/// An admin's button: a form posting `action` on `fields`, which the
/// script asks to confirm with `confirm`. For a viewer it is shown
/// disabled (and the endpoint refuses it anyway).
pub fn action_button(
    signed: &Signed,
    action: &str,
    label: &str,
    confirm: &str,
    fields: &[(&str, &str)],
) -> String {
    let disabled = if signed.is_admin() {
        ""
    } else {
        r#" disabled title="viewers may not change the cluster""#
    };
    let mut hidden = String::new();
    for (k, v) in fields {
        let _ = write!(
            hidden,
            r#"<input type="hidden" name="{}" value="{}">"#,
            esc(k),
            esc(v)
        );
    }
    format!(
        r#"<form method="post" action="/ui/action" class="action" data-confirm="{confirm}"><input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="action" value="{action}">{hidden}<button type="submit" id="act-{action}"{disabled}>{label}</button></form>"#,
        confirm = esc(confirm),
        csrf = esc(&signed.csrf),
        action = esc(action),
        label = esc(label),
    )
}

/// A link to a page.
pub fn link(href: &str, text: &str) -> String {
    format!(r#"<a href="{}">{}</a>"#, esc(href), esc(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_urls_are_escaped() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(url("a b/c?d=é"), "a%20b%2Fc%3Fd%3D%C3%A9");
        assert_eq!(url("node-1.x_y~"), "node-1.x_y~");
    }

    #[test]
    fn the_policy_names_the_stylesheet_by_its_hash_and_no_inline_script() {
        let p = csp();
        assert!(p.contains("script-src 'self'"));
        assert!(!p.contains("unsafe-inline"));
        assert!(p.contains("style-src 'sha256-"));
    }
}
