//! The columns a user chooses: `-o custom-columns=HEADER:PATH,…` (each
//! path a kubectl JSONPath, relaxed as kubectl does: `.a.b`, `a.b` and
//! `{.a.b}` alike; several results joined by commas, none as `<none>`),
//! and the label columns `get` adds to its tables: `-L key,…` (a column per
//! key, headed by the key's last segment in upper case) then
//! `--show-labels` (`LABELS`: every `k=v`, sorted, or `<none>`), in
//! kubectl's order.
//!
//! Pure: objects in, cells out.

use crate::jsonpath::{self, Template};
use crate::table;
use drover_api::Manifest;

/// One `HEADER:PATH` of `-o custom-columns`.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub header: String,
    pub path: Template,
}

/// Reads `-o custom-columns`'s value.
pub fn parse(spec: &str) -> Result<Vec<Column>, String> {
    if spec.trim().is_empty() {
        return Err(
            "custom-columns format specified but no custom columns given (e.g. -o custom-columns=NAME:.metadata.name)"
                .into(),
        );
    }
    let mut cols = Vec::new();
    for part in split_columns(spec) {
        let Some((header, path)) = part.split_once(':') else {
            return Err(format!(
                "unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>"
            ));
        };
        let path = jsonpath::relaxed(path).map_err(|e| format!("custom-columns {part}: {e}"))?;
        cols.push(Column {
            header: header.to_string(),
            path,
        });
    }
    Ok(cols)
}

/// Splits at the commas that are not inside brackets, braces or quotes
/// (`NAME:.a[?(@.x=="1,2")]` is one column).
fn split_columns(spec: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, None::<char>, 0);
    for (i, c) in spec.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{' | '(') => depth += 1,
            (None, ']' | '}' | ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(&spec[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&spec[start..]);
    parts
}

/// One object's cells.
pub fn cells(cols: &[Column], m: &Manifest) -> Vec<String> {
    let v = serde_json::to_value(m).unwrap_or(serde_json::Value::Null);
    cols.iter()
        .map(|c| {
            let vals: Vec<String> = c
                .path
                .results(&v)
                .into_iter()
                .flatten()
                .map(jsonpath::text)
                .collect();
            if vals.is_empty() {
                "<none>".to_string()
            } else {
                vals.join(",")
            }
        })
        .collect()
}

/// The headers of the columns.
pub fn headers(cols: &[Column]) -> Vec<String> {
    cols.iter().map(|c| c.header.clone()).collect()
}

/// The whole `-o custom-columns` table.
pub fn render(cols: &[Column], items: &[Manifest]) -> String {
    let h = headers(cols);
    let h: Vec<&str> = h.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = items.iter().map(|m| cells(cols, m)).collect();
    table::render(&h, &rows)
}

/// `-L` and `--show-labels`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelColumns {
    pub keys: Vec<String>,
    pub show_labels: bool,
}

impl LabelColumns {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.show_labels
    }

    /// The headers they add: each key's last `/` segment in upper case,
    /// then `LABELS`.
    pub fn headers(&self) -> Vec<String> {
        let mut h: Vec<String> = self
            .keys
            .iter()
            .map(|k| k.rsplit('/').next().unwrap_or(k).to_uppercase())
            .collect();
        if self.show_labels {
            h.push("LABELS".into());
        }
        h
    }

    /// The cells they add for one object (an absent label: empty).
    pub fn cells(&self, m: &Manifest) -> Vec<String> {
        let labels = &m.metadata().labels;
        let mut c: Vec<String> = self
            .keys
            .iter()
            .map(|k| labels.get(k).cloned().unwrap_or_default())
            .collect();
        if self.show_labels {
            let all: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            c.push(if all.is_empty() {
                "<none>".into()
            } else {
                all.join(",")
            });
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_api::parse_manifests;

    fn pods() -> Vec<Manifest> {
        parse_manifests(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web, labels: {app: web, app.kubernetes.io/tier: front}}\nspec:\n  nodeName: n1\n  containers: [{name: a, image: busybox}, {name: b, image: nginx}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bare}\nspec:\n  nodeName: n2\n  containers: [{name: a, image: redis}]\n",
        )
        .expect("pods parse")
    }

    #[test]
    fn custom_columns_print_a_table_with_none_and_commas() {
        let cols =
            parse("NAME:.metadata.name,NODE:spec.nodeName,IMAGES:{.spec.containers[*].image},APP:.metadata.labels.app")
                .unwrap();
        assert_eq!(
            render(&cols, &pods()),
            "NAME   NODE   IMAGES          APP\nweb    n1     busybox,nginx   web\nbare   n2     redis           <none>\n"
        );
    }

    #[test]
    fn custom_column_specs_are_checked() {
        assert!(parse("").unwrap_err().contains("no custom columns given"));
        assert_eq!(
            parse("NAME").unwrap_err(),
            "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"
        );
        assert!(parse("N:.a[").is_err());
        let cols =
            parse(r#"R:.status.conditions[?(@.reason=="a,b")].status,N:.metadata.name"#).unwrap();
        assert_eq!(headers(&cols), vec!["R", "N"]);
    }

    #[test]
    fn label_columns_then_all_labels() {
        let lc = LabelColumns {
            keys: vec!["app".into(), "app.kubernetes.io/tier".into()],
            show_labels: true,
        };
        assert_eq!(lc.headers(), vec!["APP", "TIER", "LABELS"]);
        let p = pods();
        assert_eq!(
            lc.cells(&p[0]),
            vec!["web", "front", "app=web,app.kubernetes.io/tier=front"]
        );
        assert_eq!(lc.cells(&p[1]), vec!["", "", "<none>"]);
        assert!(LabelColumns::default().is_empty());
    }
}
