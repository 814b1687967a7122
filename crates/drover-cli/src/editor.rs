//! `drover edit KIND NAME [-o yaml|json]`, as kubectl's: the object is
//! written to a temporary file under kubectl's header, `KUBE_EDITOR`, else
//! `EDITOR`, else `vi` opens it (an editor given with arguments, such as
//! `code --wait`, runs through `sh -c`); lines starting with `#` are
//! dropped; an unchanged file is "Edit cancelled, no changes made.", an
//! empty one "Edit cancelled, saved file was empty.". What the user
//! changed (a merge patch from the object opened to the one saved) is
//! applied to the object as it is by then, as kubectl sends a patch, so a
//! status written meanwhile is no conflict; a refusal reopens the file
//! with the error on top, and saving that unchanged gives up with an
//! error.

use crate::client::{decode_object, ClientError};
use crate::errors::{kube, refusal};
use crate::printers::{to_json, to_yaml};
use crate::Client;
use anyhow::{anyhow, bail, Context, Result};
use drover_api::{Kind, Manifest, DEFAULT_NAMESPACE};
use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// kubectl's header.
const HEADER: &str = "# Please edit the object below. Lines beginning with a '#' will be ignored,\n# and an empty file will abort the edit. If an error occurs while saving this file will be\n# reopened with the relevant failures.\n#\n";

/// The formats an object is edited in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EditFormat {
    #[default]
    Yaml,
    Json,
}

/// What the user's save amounts to.
#[derive(Debug, Clone, PartialEq)]
pub enum Saved {
    /// Nothing but comments and blank lines.
    Empty,
    /// The same object as opened.
    Unchanged,
    /// A new object (JSON).
    Changed(Value),
}

/// The text the editor opens: the header, any errors of the last try as
/// comments, then the object.
pub fn document(object: &Value, format: EditFormat, errors: &[String]) -> String {
    let mut s = String::from(HEADER);
    if !errors.is_empty() {
        for e in errors {
            for l in e.lines() {
                s.push_str(&format!("# {l}\n"));
            }
        }
        s.push_str("#\n");
    }
    s.push_str(&match format {
        EditFormat::Yaml => to_yaml(object),
        EditFormat::Json => to_json(object),
    });
    s
}

/// Reads what the user saved, against the object that was opened.
pub fn read_saved(text: &str, opened: &Value) -> Result<Saved> {
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    if body.trim().is_empty() {
        return Ok(Saved::Empty);
    }
    let v: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_str(&body)
            .map_err(|e| anyhow!("the edited file is not valid YAML or JSON: {e}"))?,
    };
    if &v == opened {
        Ok(Saved::Unchanged)
    } else {
        Ok(Saved::Changed(v))
    }
}

/// Runs the editor on `path` and waits for it.
fn run_editor(path: &Path) -> Result<()> {
    let editor = std::env::var("KUBE_EDITOR")
        .ok()
        .filter(|e| !e.trim().is_empty())
        .or_else(|| {
            std::env::var("EDITOR")
                .ok()
                .filter(|e| !e.trim().is_empty())
        })
        .unwrap_or_else(|| "vi".into());
    let status = if editor.contains(char::is_whitespace) {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{editor} \"$1\""))
            .arg("sh")
            .arg(path)
            .status()
    } else {
        std::process::Command::new(&editor).arg(path).status()
    }
    .with_context(|| format!("cannot run the editor {editor:?} (set KUBE_EDITOR or EDITOR)"))?;
    if !status.success() {
        bail!("the editor {editor:?} exited with {status}: nothing was changed");
    }
    Ok(())
}

/// `drover edit`.
pub async fn edit(
    c: &Client,
    kind: &str,
    name: Option<&str>,
    namespace: Option<&str>,
    format: EditFormat,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<()> {
    let (kind, name) = match (kind.split_once('/'), name) {
        (Some((k, n)), None) => (k.to_string(), n.to_string()),
        (None, Some(n)) => (kind.to_string(), n.to_string()),
        (Some(_), Some(_)) => bail!("give the object as KIND NAME or KIND/NAME, not both"),
        (None, None) => bail!("give the object to edit: drover edit KIND NAME"),
    };
    let kind = Kind::parse(&kind)?;
    let ns = match namespace.filter(|n| !n.is_empty()) {
        _ if !kind.namespaced() => "",
        Some(n) => n,
        None => DEFAULT_NAMESPACE,
    };
    let object = c.get_object(kind.plural(), ns, &name).await.map_err(kube)?;
    let opened = serde_json::to_value(&object)?;
    let ext = match format {
        EditFormat::Yaml => "yaml",
        EditFormat::Json => "json",
    };
    let dir = std::env::temp_dir();
    let file = tempfile_in(&dir, ext)?;
    let path = file.path().to_path_buf();
    let mut errors: Vec<String> = Vec::new();
    let mut last_text = document(&opened, format, &errors);
    loop {
        std::fs::write(&path, &last_text)
            .with_context(|| format!("cannot write {}", path.display()))?;
        run_editor(&path)?;
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !errors.is_empty() && text == last_text {
            // The refusal the user saw in the file, then kubectl's words.
            for e in &errors {
                writeln!(err, "{e}")?;
            }
            bail!("Edit cancelled, no valid changes were saved.");
        }
        let v = match read_saved(&text, &opened) {
            Ok(Saved::Empty) => {
                writeln!(err, "Edit cancelled, saved file was empty.")?;
                return Ok(());
            }
            Ok(Saved::Unchanged) => {
                writeln!(err, "Edit cancelled, no changes made.")?;
                return Ok(());
            }
            Ok(Saved::Changed(v)) => v,
            Err(e) => {
                errors = vec![format!("{e:#}")];
                last_text = with_errors(&text, &errors);
                continue;
            }
        };
        let written = write_edit(c, kind, ns, &name, &opened, &v).await;
        match written {
            Ok(m) => {
                writeln!(out, "{} edited", m.reference())?;
                return Ok(());
            }
            Err(e) => {
                errors = vec![crate::errors::error_text(&e)];
                last_text = with_errors(&text, &errors);
            }
        }
    }
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed
/// keys, removed ones as `null`; lists whole.
pub fn merge_diff(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut p = serde_json::Map::new();
            for (k, old) in a {
                match b.get(k) {
                    None => {
                        p.insert(k.clone(), Value::Null);
                    }
                    Some(new) if new != old => {
                        p.insert(k.clone(), merge_diff(old, new));
                    }
                    Some(_) => {}
                }
            }
            for (k, new) in b {
                if !a.contains_key(k) {
                    p.insert(k.clone(), new.clone());
                }
            }
            Value::Object(p)
        }
        (_, to) => to.clone(),
    }
}

/// Writes what the user changed, as kubectl does: the difference between
/// the object opened and the one saved, applied to the object as it is now
/// (others may have written it meanwhile, e.g. its status) with
/// compare-and-swap on that read, started over on a conflict. A
/// `resourceVersion` the user changed is kept, so it is a precondition.
async fn write_edit(
    c: &Client,
    kind: Kind,
    ns: &str,
    name: &str,
    opened: &Value,
    saved: &Value,
) -> Result<Manifest> {
    let diff = merge_diff(opened, saved);
    let mut last = None;
    for _ in 0..5 {
        let current = c.get_object(kind.plural(), ns, name).await.map_err(kube)?;
        let mut v = serde_json::to_value(&current)?;
        drover_api::patch::merge_patch(&mut v, &diff);
        let m = decode_object(&serde_json::to_vec(&v)?)
            .map_err(|e| anyhow!("the edited object is not valid: {e}"))?;
        if m.name() != current.name() || Kind::of(&m) != kind {
            bail!(
                "the edited object is {}, not {}: edit cannot rename or change the kind",
                m.reference(),
                current.reference()
            );
        }
        match c.update_object(&m).await {
            Ok(m) => return Ok(m),
            Err(e)
                if e.code() == Some(tonic::Code::Aborted)
                    && diff["metadata"].get("resourceVersion").is_none() =>
            {
                last = Some(e)
            }
            Err(e @ ClientError::Server { .. }) => {
                bail!("{}", refusal(&e).unwrap_or_else(|| e.to_string()))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(kube(last.expect("a conflict was seen")))
}

/// The saved text again, its comments replaced by the header and `errors`.
fn with_errors(text: &str, errors: &[String]) -> String {
    let body: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut s = String::from(HEADER);
    for e in errors {
        for l in e.lines() {
            s.push_str(&format!("# {l}\n"));
        }
    }
    s.push_str("#\n");
    s.push_str(&body);
    s
}

/// A new private file `drover-edit-*.EXT` in `dir`, removed when dropped.
fn tempfile_in(dir: &Path, ext: &str) -> Result<TempFile> {
    for _ in 0..16 {
        let path = dir.join(format!("drover-edit-{:016x}.{ext}", rand::random::<u64>()));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        match o.open(&path) {
            Ok(_) => return Ok(TempFile(path)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(anyhow!("cannot create a file in {}: {e}", dir.display())),
        }
    }
    bail!("cannot create a file to edit in {}", dir.display())
}

struct TempFile(std::path::PathBuf);

impl TempFile {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "resourceVersion": "7"}, "data": {"a": "1"}})
    }

    #[test]
    fn the_document_round_trips_unchanged_in_both_formats() {
        for f in [EditFormat::Yaml, EditFormat::Json] {
            let d = document(&obj(), f, &[]);
            assert!(d.starts_with("# Please edit the object below."));
            assert_eq!(read_saved(&d, &obj()).unwrap(), Saved::Unchanged);
        }
    }

    #[test]
    fn comments_are_dropped_and_an_empty_file_cancels() {
        assert_eq!(read_saved(HEADER, &obj()).unwrap(), Saved::Empty);
        assert_eq!(read_saved("\n  \n# x\n", &obj()).unwrap(), Saved::Empty);
        let d = document(&obj(), EditFormat::Yaml, &["was refused".into()]);
        assert!(d.contains("# was refused\n"));
        let changed = d
            .replace("a: '1'", "a: '2'")
            .replace("a: \"1\"", "a: \"2\"");
        match read_saved(&changed, &obj()).unwrap() {
            Saved::Changed(v) => assert_eq!(v["data"]["a"], "2"),
            other => panic!("expected a change, got {other:?}"),
        }
        assert!(read_saved("data: [unclosed", &obj()).is_err());
    }

    #[test]
    fn the_difference_is_a_merge_patch() {
        let a = json!({"metadata": {"name": "c", "resourceVersion": "7", "labels": {"x": "1", "y": "2"}}, "data": {"a": "1"}, "list": [1, 2]});
        let b = json!({"metadata": {"name": "c", "resourceVersion": "7", "labels": {"x": "9"}}, "data": {"a": "1", "b": "2"}, "list": [2]});
        let d = merge_diff(&a, &b);
        assert_eq!(
            d,
            json!({"metadata": {"labels": {"x": "9", "y": null}}, "data": {"b": "2"}, "list": [2]})
        );
        let mut x = a.clone();
        drover_api::patch::merge_patch(&mut x, &d);
        assert_eq!(x, b);
        assert_eq!(merge_diff(&a, &a), json!({}));
    }

    #[test]
    fn errors_go_on_top_of_the_saved_text() {
        let t = with_errors(
            "# old comment\nkind: X\n",
            &["Error from server: no".into()],
        );
        assert!(t.starts_with(HEADER));
        assert!(t.contains("# Error from server: no\n#\nkind: X\n"));
        assert!(!t.contains("old comment"));
    }
}
