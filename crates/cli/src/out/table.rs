//! The one table renderer of the `glassbox` command.
//!
//! Every command that prints columns (`run`, `plan`, `bench`, `report`,
//! `trace list`) builds a [`Table`] and says how it looks: the indent, the
//! gap between columns, a rule under the header, each column's alignment and
//! minimum width. Columns are as wide as their widest cell (counted in
//! characters, so `→` and CJK text count once); a left-aligned last column
//! gets no trailing spaces. A small module rather than a crate: the tables
//! are plain text with no borders, and each command's exact layout is kept.

/// How a column's cells sit in their width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
    /// Right for a number, optionally with one unit word (`4.87 GB`, `$0.18`,
    /// `12%`, `-`), left for anything else.
    Number,
}

/// A table: header, rows and layout. Build with [`Table::new`] and the
/// layout methods, then [`render`](Table::render).
#[derive(Debug, Clone)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    align: Vec<Align>,
    min_width: Vec<usize>,
    indent: &'static str,
    gap: usize,
    rule: bool,
}

impl Table {
    /// Left-aligned columns, two spaces apart, no indent, no rule.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            align: Vec::new(),
            min_width: Vec::new(),
            indent: "",
            gap: 2,
            rule: false,
        }
    }

    /// Text written before every line.
    pub fn indent(mut self, indent: &'static str) -> Self {
        self.indent = indent;
        self
    }

    /// Spaces between columns.
    pub fn gap(mut self, spaces: usize) -> Self {
        self.gap = spaces;
        self
    }

    /// A line of dashes under the header, as wide as each column.
    pub fn rule(mut self) -> Self {
        self.rule = true;
        self
    }

    /// Alignment per column; columns not named are left-aligned.
    pub fn align(mut self, align: &[Align]) -> Self {
        self.align = align.to_vec();
        self
    }

    /// Minimum width per column (cells are never cut).
    pub fn min_width(mut self, widths: &[usize]) -> Self {
        self.min_width = widths.to_vec();
        self
    }

    /// Adds the rows (each as many cells as the header; extra cells are not shown).
    pub fn rows(mut self, rows: Vec<Vec<String>>) -> Self {
        self.rows.extend(rows);
        self
    }

    /// The table, one `\n`-terminated line per row.
    pub fn render(&self) -> String {
        let cols = self.header.len();
        let mut widths: Vec<usize> = (0..cols)
            .map(|i| {
                let header = self.header[i].chars().count();
                header.max(self.min_width.get(i).copied().unwrap_or(0))
            })
            .collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        self.line(&mut out, &widths, &self.header);
        if self.rule {
            let dashes: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            self.line(&mut out, &widths, &dashes);
        }
        for row in &self.rows {
            self.line(&mut out, &widths, row);
        }
        out
    }

    fn line(&self, out: &mut String, widths: &[usize], cells: &[String]) {
        out.push_str(self.indent);
        let n = cells.len().min(widths.len());
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let last = i + 1 == n;
            let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
            let right = match self.align.get(i).copied().unwrap_or(Align::Left) {
                Align::Left => false,
                Align::Right => true,
                Align::Number => is_number(cell),
            };
            if right {
                out.push_str(&pad);
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if !last {
                    out.push_str(&pad);
                }
            }
            if !last {
                out.push_str(&" ".repeat(self.gap));
            }
        }
        out.push('\n');
    }
}

/// A number, optionally with one unit word: `4.87 GB`, `$0.18`, `12%`, `-`.
fn is_number(cell: &str) -> bool {
    let mut words = cell.split_whitespace();
    let first = words.next().unwrap_or("");
    words.count() <= 1
        && (first == "-"
            || first
                .trim_start_matches('$')
                .trim_end_matches('%')
                .parse::<f64>()
                .is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    #[test]
    fn numbers_right_text_left_with_a_rule() {
        let t = Table::new(&["gpu", "mem GB", "note"])
            .rule()
            .align(&[Align::Number, Align::Number, Align::Left])
            .rows(rows(&[&["h100-sxm", "80", "fast"], &["l4", "-", "x"]]))
            .render();
        assert_eq!(
            t,
            "gpu       mem GB  note\n\
             --------  ------  ----\n\
             h100-sxm      80  fast\n\
             l4             -  x\n"
        );
    }

    #[test]
    fn indent_gap_min_width_and_wide_characters() {
        let t = Table::new(&["node", "n"])
            .indent("  ")
            .gap(1)
            .min_width(&[6, 3])
            .align(&[Align::Left, Align::Right])
            .rows(rows(&[&["a → b", "7"], &["检索", "12"]]))
            .render();
        assert_eq!(t, "  node     n\n  a → b    7\n  检索      12\n");
        // A left-aligned last column carries no trailing spaces.
        let t = Table::new(&["a", "bbb"])
            .rows(rows(&[&["xyz", ""]]))
            .render();
        assert_eq!(t, "a    bbb\nxyz  \n");
    }

    #[test]
    fn what_counts_as_a_number() {
        for n in ["4.87 GB", "$0.18", "12%", "-", "1e9", "300"] {
            assert!(is_number(n), "{n}");
        }
        for t in ["h100", "met", "a b c", "4 GB x", ""] {
            assert!(!is_number(t), "{t}");
        }
    }
}
