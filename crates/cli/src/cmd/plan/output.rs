//! The planner's tables.

use crate::out::table::{Align, Table};

/// The planner's tables: a rule under the header, numbers right-aligned
/// except in the last column.
pub(super) fn planner_table(header: &[&str]) -> Table {
    let mut align = vec![Align::Number; header.len()];
    if let Some(last) = align.last_mut() {
        *last = Align::Left;
    }
    Table::new(header).rule().align(&align)
}

/// Prints a planner table.
pub(super) fn print_table(header: &[&str], rows: Vec<Vec<String>>) {
    out!("{}", planner_table(header).rows(rows).render().trim_end());
}
