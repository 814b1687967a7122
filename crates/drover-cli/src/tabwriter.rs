//! Go's `text/tabwriter` (elastic tabstops), which kubectl's output goes
//! through: `describe` aligns its `Key:\tvalue` lines with it, so drover's
//! describe lines up exactly like kubectl's.
//!
//! Text is made of cells: a cell ends at a tab, the last cell of a line is
//! not part of any column. A column block is a run of consecutive lines
//! that all have a (tab-terminated) cell in that column; every cell of the
//! block is padded to the block's widest cell plus `padding`. A line with
//! fewer cells ends the block, so a line without a tab separates the
//! alignment above it from the one below.

/// Aligns `text` like Go's `tabwriter.NewWriter(out, minwidth, _, padding, ' ', 0)`.
pub fn align(text: &str, minwidth: usize, padding: usize) -> String {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let trailing_newline = body.len() != text.len();
    let lines: Vec<Vec<&str>> = body.split('\n').map(|l| l.split('\t').collect()).collect();
    let mut w = Writer {
        lines: &lines,
        widths: Vec::new(),
        out: String::with_capacity(text.len() * 2),
        minwidth,
        padding,
    };
    w.format(0, lines.len());
    let mut out = w.out;
    if !trailing_newline {
        out.pop();
    }
    out
}

/// What `kubectl describe` uses: minwidth 0, padding 2.
pub fn describe(text: &str) -> String {
    align(text, 0, 2)
}

struct Writer<'a> {
    lines: &'a [Vec<&'a str>],
    widths: Vec<usize>,
    out: String,
    minwidth: usize,
    padding: usize,
}

fn width(s: &str) -> usize {
    s.chars().count()
}

impl Writer<'_> {
    fn format(&mut self, mut line0: usize, line1: usize) {
        let column = self.widths.len();
        let mut this = line0;
        while this < line1 {
            if column + 1 >= self.lines[this].len() {
                this += 1;
                continue;
            }
            // A column block starts here: print the lines before it.
            self.write_lines(line0, this);
            line0 = this;
            let mut w = self.minwidth;
            while this < line1 {
                let line = &self.lines[this];
                if column + 1 >= line.len() {
                    break;
                }
                w = w.max(width(line[column]) + self.padding);
                this += 1;
            }
            self.widths.push(w);
            self.format(line0, this);
            self.widths.pop();
            line0 = this;
        }
        self.write_lines(line0, line1);
    }

    fn write_lines(&mut self, line0: usize, line1: usize) {
        for line in &self.lines[line0..line1] {
            for (j, cell) in line.iter().enumerate() {
                self.out.push_str(cell);
                if j < self.widths.len() && j + 1 < line.len() {
                    let pad = self.widths[j].saturating_sub(width(cell));
                    self.out.extend(std::iter::repeat_n(' ', pad));
                }
            }
            self.out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_lines_share_a_column() {
        let t = describe("Name:\tx\nNode-Selector:\t<none>\n");
        assert_eq!(t, "Name:           x\nNode-Selector:  <none>\n");
    }

    #[test]
    fn a_line_without_a_tab_ends_the_block() {
        let t = describe("A:\t1\nPlain line: 3\nLonger key:\t2\n");
        assert_eq!(t, "A:  1\nPlain line: 3\nLonger key:  2\n");
    }

    #[test]
    fn continuation_lines_align_under_the_value() {
        let t = describe("Labels:\ta=b\n\tc=d\nAnnotations:\t<none>\n");
        assert_eq!(
            t,
            "Labels:       a=b\n              c=d\nAnnotations:  <none>\n"
        );
    }

    #[test]
    fn nested_columns_are_aligned_per_block() {
        // Two-column rows inside a one-column block (like describe's
        // Conditions table under "Conditions:").
        let t = describe("  Type\tStatus\n  Ready\tTrue\nX:\ty\n");
        assert_eq!(t, "  Type   Status\n  Ready  True\nX:       y\n");
    }

    #[test]
    fn empty_last_cell_keeps_padding_like_go() {
        assert_eq!(
            describe("HostPathType:\t\nPath:\t/x\n"),
            "HostPathType:  \nPath:          /x\n"
        );
    }

    #[test]
    fn minwidth_and_no_trailing_newline() {
        assert_eq!(align("a\tb\nccc\td", 6, 3), "a     b\nccc   d");
    }
}
