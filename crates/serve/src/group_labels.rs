//! A record's group as Prometheus labels: one label per group column, so that two distinct
//! groups never share a label set (a joined `k=v,k2=v2` string let `(null, "w")` and
//! `("", "w")`, or `("x,b=y", "z")` and `("x", "y,b=z")`, overwrite each other).
//!
//! Names: column `c` is label `group_c` when `c` is made of ASCII letters, digits and
//! `_`; any other column is `groupx_` followed by the lowercase hex of its UTF-8 bytes.
//! The two prefixes differ at their sixth character, so no two columns share a label.
//!
//! Values: Prometheus treats an empty label value as an absent label, so null is the empty
//! value; a string is itself, except that one which is empty or starts with `~` gets one
//! more `~` in front (`""` → `"~"`, `"~a"` → `"~~a"`). Removing one leading `~` decodes it.

use std::collections::BTreeSet;

use ldpstream_engine::record::TestRecord;

const ESCAPE: char = '~';

/// The label name of group column `column`.
pub fn label_name(column: &str) -> String {
    if !column.is_empty()
        && column
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        format!("group_{column}")
    } else {
        let hex: String = column.bytes().map(|b| format!("{b:02x}")).collect();
        format!("groupx_{hex}")
    }
}

/// The label value of one group column's value.
pub fn label_value(value: Option<&str>) -> String {
    match value {
        None => String::new(),
        Some(v) if v.is_empty() || v.starts_with(ESCAPE) => format!("{ESCAPE}{v}"),
        Some(v) => v.to_string(),
    }
}

/// The group label names of every configured stream, in one fixed order: a metric vector
/// has one label set, so a stream lacking a column leaves that label empty (absent).
#[derive(Debug, Clone, Default)]
pub struct GroupLabels {
    columns: Vec<String>,
    names: Vec<String>,
}

impl GroupLabels {
    pub fn new<'a>(columns: impl IntoIterator<Item = &'a str>) -> GroupLabels {
        let columns: Vec<String> = columns
            .into_iter()
            .map(str::to_string)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let names = columns.iter().map(|c| label_name(c)).collect();
        GroupLabels { columns, names }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// The values of [`Self::names`] for `record`; a column not in its group is empty.
    pub fn values(&self, record: &TestRecord) -> Vec<String> {
        self.columns
            .iter()
            .map(|c| {
                record
                    .group
                    .as_ref()
                    .and_then(|g| g.get(c))
                    .map_or_else(String::new, |v| label_value(v.as_deref()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_values_get_distinct_labels() {
        let values = [None, Some(""), Some("~"), Some("~~"), Some("a"), Some("~a")];
        let encoded: BTreeSet<String> = values.iter().map(|v| label_value(*v)).collect();
        assert_eq!(encoded.len(), values.len(), "{encoded:?}");
        assert_eq!(label_value(None), "");
        assert_eq!(label_value(Some("")), "~");
        assert_eq!(label_value(Some("eu")), "eu");
    }

    #[test]
    fn distinct_columns_get_distinct_valid_names() {
        let columns = ["region", "user_type", "a-b", "a_b", "", "2d", "é"];
        let names: BTreeSet<String> = columns.iter().map(|c| label_name(c)).collect();
        assert_eq!(names.len(), columns.len(), "{names:?}");
        for n in &names {
            let mut chars = n.chars();
            assert!(chars.next().is_some_and(|c| c.is_ascii_alphabetic()), "{n}");
            assert!(chars.all(|c| c.is_ascii_alphanumeric() || c == '_'), "{n}");
        }
        assert_eq!(label_name("region"), "group_region");
        assert_eq!(label_name("a-b"), "groupx_612d62");
    }
}
