//! Numbers in error messages, written as a person would write them.

/// A number as a person would write it: `f64`'s `Display` spells 1e308 with 309 digits.
pub fn compact(value: f64) -> String {
    let plain = value.to_string();
    if plain.len() > 12 {
        format!("{value:e}")
    } else {
        plain
    }
}
