//! The settings a stream's sketches were counted under (mechanism, ε, columns, windows),
//! kept beside them so that state counted under other settings is refused, never merged.

use ldpstream_config::{compact, MechanismConfig, StreamConfig, WindowConfig};
use ldpstream_engine::mechanism::subset_default_k;

/// A stream's settings that its sketches depend on, as (name, value) pairs.
pub type Settings = Vec<(String, String)>;

/// The mechanism and its parameters, the columns read, and the set of windows: what must
/// not change between a checkpoint and the config that restores it.
pub fn settings_of(stream: &StreamConfig) -> Settings {
    let mut out: Settings = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));
    let m = &stream.mechanism;
    put("mechanism kind", m.kind().to_string());
    match m {
        MechanismConfig::Grr { epsilon, .. }
        | MechanismConfig::Bitflip { epsilon, .. }
        | MechanismConfig::Oue { epsilon, .. }
        | MechanismConfig::Laplace { epsilon, .. }
        | MechanismConfig::Hadamard { epsilon, .. } => put("mechanism epsilon", compact(*epsilon)),
        MechanismConfig::Cohort {
            epsilon,
            cohorts,
            seed,
            ..
        } => {
            put("mechanism epsilon", compact(*epsilon));
            put("mechanism cohorts", cohorts.to_string());
            put("mechanism seed", seed.to_string());
        }
        MechanismConfig::Subset { epsilon, domain, k } => {
            put("mechanism epsilon", compact(*epsilon));
            // The k the reports were drawn with: `k` left out and `k` set to its default
            // are one mechanism.
            let k = k.unwrap_or_else(|| subset_default_k(*epsilon, *domain));
            put("mechanism k", k.to_string());
        }
        MechanismConfig::Olh {
            epsilon, pool_seed, ..
        } => {
            put("mechanism epsilon", compact(*epsilon));
            let (g, pool_size) = m.olh_shape().unwrap_or((0, 0));
            put("mechanism g", g.to_string());
            put("mechanism pool_size", pool_size.to_string());
            put("mechanism pool_seed", pool_seed.to_string());
        }
        MechanismConfig::Gauss { rho, .. } => put("mechanism rho", compact(*rho)),
        MechanismConfig::Matrix { matrix } => put("mechanism matrix", format!("{matrix:?}")),
        MechanismConfig::Raw { .. } => {}
        MechanismConfig::Lgrr {
            epsilon_perm,
            epsilon_1,
            period,
            ..
        }
        | MechanismConfig::Losue {
            epsilon_perm,
            epsilon_1,
            period,
            ..
        }
        | MechanismConfig::Lsue {
            epsilon_perm,
            epsilon_1,
            period,
            ..
        } => {
            put("mechanism epsilon_perm", compact(*epsilon_perm));
            put("mechanism epsilon_1", compact(*epsilon_1));
            put("mechanism period", period.to_string());
        }
    }
    put("mechanism domain", m.domain().to_string());
    let c = &stream.columns;
    put("column report", format!("{:?}", c.report));
    match m {
        MechanismConfig::Hadamard { .. } => put("column row", format!("{:?}", c.row)),
        MechanismConfig::Cohort { .. } => put("column cohort", format!("{:?}", c.cohort)),
        MechanismConfig::Olh { .. } => put("column seed", format!("{:?}", c.seed)),
        _ => {}
    }
    put("column ts", format!("{:?}", c.ts));
    put("columns group_by", format!("{:?}", c.group_by));
    let mut windows: Vec<String> = stream
        .tests
        .iter()
        .map(|t| match t.window {
            WindowConfig::Global => "global".to_string(),
            WindowConfig::Cumulative => "cumulative".to_string(),
            WindowConfig::Tumbling { size } => format!("tumbling {size}"),
            WindowConfig::Sliding { size, slide } => format!("sliding {size} by {slide}"),
        })
        .collect();
    windows.sort();
    windows.dedup();
    put("windows", format!("[{}]", windows.join(", ")));
    out
}

/// "stream s: mechanism epsilon changed from 1 to 3; ...", or None when nothing changed.
pub fn describe_changes(stream: &str, old: &Settings, new: &Settings) -> Option<String> {
    let find = |s: &Settings, k: &str| s.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut keys: Vec<&String> = old.iter().chain(new.iter()).map(|(k, _)| k).collect();
    // Keep the order settings_of gives, old keys first.
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(*k));
    let changes: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let (was, now) = (find(old, k), find(new, k));
            (was != now).then(|| {
                let show = |v: Option<String>| v.unwrap_or_else(|| "(none)".to_string());
                format!("{k} changed from {} to {}", show(was), show(now))
            })
        })
        .collect();
    (!changes.is_empty()).then(|| format!("stream {stream}: {}", changes.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::Config;

    fn subset_stream(k: &str) -> StreamConfig {
        let text = format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
             mechanism = {{ kind = \"subset\", epsilon = 2.0, domain = 1000{k} }}\n\
             [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
        );
        Config::from_toml_str(&text, "t").unwrap().streams[0].clone()
    }

    /// Subset sketches depend on the k the reports were drawn with: `k` left out and `k`
    /// at its default (⌈1000/(e²+1)⌉ = 120) are one setting, another k is a change.
    #[test]
    fn subset_settings_carry_the_resolved_k() {
        let default = settings_of(&subset_stream(""));
        assert!(default.contains(&("mechanism k".to_string(), "120".to_string())));
        assert_eq!(settings_of(&subset_stream(", k = 120")), default);
        let change = describe_changes("s", &default, &settings_of(&subset_stream(", k = 100")));
        assert_eq!(
            change.as_deref(),
            Some("stream s: mechanism k changed from 120 to 100")
        );
    }
}
