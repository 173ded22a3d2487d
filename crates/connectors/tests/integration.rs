//! The connectors against real files and the conformance suite: the dictionary-key path
//! against the Arrow reader, group columns read as dictionaries against the reference
//! fold, and every randomizer and message encoding against
//! conformance/golden.json (which this suite also writes). One test binary, one module per
//! area.

mod conformance;
mod dictionary_keys;
mod group_dictionary;
