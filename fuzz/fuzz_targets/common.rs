//! Streams the harnesses decode for: one per mechanism, with a group column, so every
//! report layout is exercised.

use ldpstream_config::{Config, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;

const MECHANISMS: [&str; 10] = [
    r#"{ kind = "grr", epsilon = 1.0, domain = 16 }"#,
    r#"{ kind = "bitflip", epsilon = 1.0, domain = 20 }"#,
    r#"{ kind = "oue", epsilon = 2.0, domain = 20 }"#,
    r#"{ kind = "subset", epsilon = 1.0, domain = 12, k = 3 }"#,
    r#"{ kind = "gauss", rho = 0.5, domain = 4, max_abs = 1000.0 }"#,
    r#"{ kind = "laplace", epsilon = 1.0, domain = 4 }"#,
    r#"{ kind = "hadamard", epsilon = 1.0, domain = 8 }"#,
    r#"{ kind = "cohort", epsilon = 1.0, domain = 8, cohorts = 8, seed = 1 }"#,
    r#"{ kind = "matrix", matrix = [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]] }"#,
    r#"{ kind = "raw", domain = 5 }"#,
];

pub fn streams(source: &str) -> Vec<(StreamConfig, Mechanism)> {
    MECHANISMS
        .iter()
        .map(|mechanism| {
            let text = format!(
                "[[stream]]\nname = \"s\"\nsource = {source}\nmechanism = {mechanism}\ncolumns = {{ group_by = [\"group\"] }}\n"
            );
            let config = Config::from_toml_str(&text, "fuzz").expect("harness config is valid");
            let stream = config.streams.into_iter().next().expect("one stream");
            let m = Mechanism::from_config(&stream.mechanism).expect("valid mechanism");
            (stream, m)
        })
        .collect()
}
