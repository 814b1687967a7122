//! kubectl-style tables: upper-case headers, columns padded with spaces.

/// Renders rows under headers, each column as wide as its widest cell plus
/// three spaces, no trailing spaces.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            l.push_str(c);
            if i + 1 < cells.len() {
                let pad = widths[i] - c.chars().count() + 3;
                l.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for r in rows {
        line(r.iter().map(String::as_str).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_line_up() {
        let t = super::render(
            &["NAME", "AGE"],
            &[
                vec!["a".into(), "1s".into()],
                vec!["longer".into(), "2m".into()],
            ],
        );
        assert_eq!(t, "NAME     AGE\na        1s\nlonger   2m\n");
    }
}
