use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// The null distribution of an identity test: `"uniform"` or explicit probabilities.
#[derive(Debug, Clone, PartialEq)]
pub enum NullSpec {
    Uniform,
    Probabilities(Vec<f64>),
}

impl NullSpec {
    /// The null as a probability vector over `d` categories.
    pub fn probabilities(&self, d: usize) -> Vec<f64> {
        match self {
            NullSpec::Uniform => vec![1.0 / d as f64; d],
            NullSpec::Probabilities(p) => p.clone(),
        }
    }
}

// Hand-written so that a bad value gets a message that says both accepted forms; an untagged
// enum would only say "did not match any variant".
impl<'de> Deserialize<'de> for NullSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NullVisitor;
        impl<'de> Visitor<'de> for NullVisitor {
            type Value = NullSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"uniform\" or a list of d probabilities")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NullSpec, E> {
                if v == "uniform" {
                    Ok(NullSpec::Uniform)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NullSpec, A::Error> {
                let mut p = Vec::new();
                while let Some(x) = seq.next_element::<Number>()? {
                    p.push(x.0);
                }
                Ok(NullSpec::Probabilities(p))
            }
        }
        deserializer.deserialize_any(NullVisitor)
    }
}

/// A probability written either as a float or as an integer (`1` or `0` in TOML).
struct Number(f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NumberVisitor;
        impl Visitor<'_> for NumberVisitor {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number(v as f64))
            }
        }
        deserializer.deserialize_any(NumberVisitor)
    }
}
