//! kubectl-style tables: upper-case headers, columns padded with spaces.
//!
//! kubectl draws its tables with Go's tabwriter (minimum cell width 6,
//! padding 3, widths remembered across flushes): [`render`] does the same
//! for a whole table, [`Widths`] for the rows `get -w` prints one by one.

/// kubectl's minimum cell width (padding included).
const MIN_WIDTH: usize = 6;
/// Spaces between columns.
const PADDING: usize = 3;

fn cell_width(c: &str) -> usize {
    (c.chars().count() + PADDING).max(MIN_WIDTH)
}

/// Column widths that only grow: the header's table first, then every row
/// printed later lines up with it (as `kubectl get -w` does).
#[derive(Debug, Clone, Default)]
pub struct Widths(Vec<usize>);

impl Widths {
    /// Whether nothing was printed with these widths yet.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Widens the columns to fit `row`.
    pub fn fit(&mut self, row: &[&str]) {
        for (i, c) in row.iter().enumerate() {
            let w = cell_width(c);
            match self.0.get_mut(i) {
                Some(x) => *x = (*x).max(w),
                None => self.0.push(w),
            }
        }
    }

    /// One line (with its newline), padded to the widths; the last cell is
    /// not padded and trailing spaces are dropped.
    pub fn line(&self, row: &[&str]) -> String {
        let mut l = String::new();
        for (i, c) in row.iter().enumerate() {
            l.push_str(c);
            if i + 1 < row.len() {
                let w = self.0.get(i).copied().unwrap_or(0);
                let pad = w.saturating_sub(c.chars().count()).max(1);
                l.push_str(&" ".repeat(pad));
            }
        }
        let mut l = l.trim_end().to_string();
        l.push('\n');
        l
    }
}

/// Renders rows under headers, each column as wide as its widest cell plus
/// three spaces (at least six), no trailing spaces.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    render_with(&mut Widths::default(), headers, rows)
}

/// [`render`], keeping the widths for rows printed later.
pub fn render_with(widths: &mut Widths, headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| r.iter().map(String::as_str).collect())
        .collect();
    widths.fit(headers);
    for r in &rows {
        widths.fit(r);
    }
    let mut out = widths.line(headers);
    for r in &rows {
        out.push_str(&widths.line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let t = render(
            &["NAME", "AGE"],
            &[
                vec!["a".into(), "1s".into()],
                vec!["longer".into(), "2m".into()],
            ],
        );
        assert_eq!(t, "NAME     AGE\na        1s\nlonger   2m\n");
    }

    #[test]
    fn minimum_width_like_kubectl() {
        let t = render(&["IP", "X"], &[vec!["a".into(), "b".into()]]);
        assert_eq!(t, "IP    X\na     b\n");
    }

    #[test]
    fn later_rows_keep_and_grow_the_widths() {
        let mut w = Widths::default();
        let t = render_with(&mut w, &["NAME", "AGE"], &[vec!["a".into(), "1s".into()]]);
        assert_eq!(t, "NAME   AGE\na      1s\n");
        w.fit(&["b", "2s"]);
        assert_eq!(w.line(&["b", "2s"]), "b      2s\n");
        w.fit(&["a-much-longer-name", "3s"]);
        assert_eq!(
            w.line(&["a-much-longer-name", "3s"]),
            "a-much-longer-name   3s\n"
        );
    }
}
