//! The Arrow schema a Parquet file's batches are read in: its own, except that the group
//! columns stay dictionary-encoded (`Dictionary(Int32, Utf8)`). A Parquet string column is
//! almost always dictionary-encoded, and read as plain strings every row's value is copied
//! out of the dictionary and then hashed by the fold to find its group. Read as a
//! dictionary, a batch's rows are integer keys into the column chunk's one dictionary,
//! which the fold interns once per entry (`engine::stream::keys`). A chunk whose writer
//! fell back to plain pages is still read: the reader builds each batch's dictionary
//! itself, so the fold gets the same values either way.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use ldpstream_engine::stream::ReportLayout;

/// `schema` with every group column of `layout` that is a plain string column asked for
/// as a dictionary of the same strings; None when no column changes.
pub fn dictionary_group_schema(schema: &Schema, layout: &ReportLayout) -> Option<SchemaRef> {
    let mut changed = false;
    let fields: Vec<Arc<Field>> = schema
        .fields()
        .iter()
        .map(|f| {
            let plain = matches!(f.data_type(), DataType::Utf8 | DataType::LargeUtf8);
            if plain && layout.group_by.iter().any(|g| g == f.name()) {
                changed = true;
                let dictionary = DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(f.data_type().clone()),
                );
                Arc::new(f.as_ref().clone().with_data_type(dictionary))
            } else {
                Arc::clone(f)
            }
        })
        .collect();
    changed.then(|| Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())))
}
