//! The Kafka names a config makes ldpstream read and write, checked against each other
//! across streams. A topic ldpstream writes (results, dead letters, a Kafka sink, a
//! scale-out stream's state) that it also reads as reports would feed its own output
//! back in as garbage; two scale-out streams on one consumer group would share state
//! topics and transactional ids, and fence and overwrite each other.

use std::collections::BTreeMap;

use crate::error::ConfigError;
use crate::model::{Config, KafkaConfig, SinkConfig, SourceConfig};

/// The changelog and partials topics of a scale-out stream whose consumer group is
/// `group_id`. Its transactional ids (`<group_id>-fold-<p>`, `<group_id>-merge`) are
/// named after the group as well.
pub fn scale_out_state_topics(group_id: &str) -> (String, String) {
    (
        format!("{group_id}-changelog"),
        format!("{group_id}-partials"),
    )
}

pub(crate) fn validate_topic_names(config: &Config) -> Result<(), ConfigError> {
    let kafka: Vec<(String, &KafkaConfig)> = config
        .streams
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.source {
            SourceConfig::Kafka(k) => Some((format!("stream[{i}] ({:?})", s.name), k)),
            _ => None,
        })
        .collect();
    validate_group_ids(&kafka)?;
    validate_written_topics(config, &kafka)
}

/// Consumer groups: a scale-out stream needs one of its own.
fn validate_group_ids(kafka: &[(String, &KafkaConfig)]) -> Result<(), ConfigError> {
    let mut groups: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for (at, k) in kafka {
        let scale_out = k.scale_out.is_some();
        if let Some((other, other_scale_out)) =
            groups.insert(k.group_id.as_str(), (at.as_str(), scale_out))
        {
            if scale_out || other_scale_out {
                return Err(ConfigError::invalid(
                    format!("{at}.source.group_id"),
                    format!("{:?}", k.group_id),
                    format!(
                        "a group_id of its own: {other} uses it too, and a scale-out stream's \
                         state topics and transactional ids are named after its group"
                    ),
                ));
            }
        }
    }
    // A scale-out stream's merge reads in the consumer group `<group_id>-merge`: another
    // stream in that group would take the merge's partition away from it.
    for (at, k) in kafka {
        if let Some((owner, _)) = kafka.iter().find(|(_, other)| {
            other.scale_out.is_some() && format!("{}-merge", other.group_id) == k.group_id
        }) {
            return Err(ConfigError::invalid(
                format!("{at}.source.group_id"),
                format!("{:?}", k.group_id),
                format!(
                    "another group: {owner} is a scale-out stream whose merge uses the \
                     consumer group {:?}",
                    k.group_id
                ),
            ));
        }
    }
    Ok(())
}

/// A topic ldpstream writes may be neither one it reads nor another stream's state.
fn validate_written_topics(
    config: &Config,
    kafka: &[(String, &KafkaConfig)],
) -> Result<(), ConfigError> {
    // Every topic ldpstream reads as reports, and who reads it.
    let mut inputs: BTreeMap<&str, &str> = BTreeMap::new();
    for (at, k) in kafka {
        for t in &k.topics {
            inputs.entry(t.as_str()).or_insert(at.as_str());
        }
    }
    // Every scale-out state topic, and whose it is.
    let mut state: BTreeMap<String, &str> = BTreeMap::new();
    for (at, k) in kafka {
        if k.scale_out.is_some() {
            let (changelog, partials) = scale_out_state_topics(&k.group_id);
            state.insert(changelog, at.as_str());
            state.insert(partials, at.as_str());
        }
    }
    let owned_state = |key: String, topic: &str| -> Result<(), ConfigError> {
        match state.get(topic) {
            Some(owner) => Err(ConfigError::invalid(
                key,
                format!("{topic:?}"),
                format!("another topic: {topic:?} holds the scale-out state of {owner}"),
            )),
            None => Ok(()),
        }
    };
    let written = |key: String, topic: &str| -> Result<(), ConfigError> {
        owned_state(key.clone(), topic)?;
        match inputs.get(topic) {
            Some(reader) => Err(ConfigError::invalid(
                key,
                format!("{topic:?}"),
                format!(
                    "a topic no stream reads: {reader} reads {topic:?} as reports, so \
                     ldpstream would read its own output back"
                ),
            )),
            None => Ok(()),
        }
    };

    for (at, k) in kafka {
        for (j, t) in k.topics.iter().enumerate() {
            owned_state(format!("{at}.source.topics[{j}]"), t)?;
        }
        if let Some(t) = &k.dead_letter_topic {
            written(format!("{at}.source.dead_letter_topic"), t)?;
        }
        if let Some(so) = &k.scale_out {
            written(
                format!("{at}.source.scale_out.results_topic"),
                &so.results_topic,
            )?;
        }
    }
    for (i, sink) in config.serve.sinks.iter().enumerate() {
        if let SinkConfig::Kafka { topic, .. } = sink {
            written(format!("serve.sink[{i}].topic"), topic)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::model::Config;

    fn stream(name: &str, topic: &str, group: &str, extra: &str) -> String {
        format!(
            "[[stream]]\nname = \"{name}\"\nsource = {{ kind = \"kafka\", brokers = \"b:9092\", topics = [\"{topic}\"], group_id = \"{group}\"{extra} }}\nmechanism = {{ kind = \"grr\", epsilon = 1.0, domain = 4 }}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
        )
    }

    fn err(text: &str) -> String {
        Config::from_toml_str(text, "t").unwrap_err().to_string()
    }

    const SCALE_OUT: &str = ", scale_out = { results_topic = \"out\" }";

    #[test]
    fn scale_out_streams_need_a_group_of_their_own() {
        let e = err(&format!(
            "{}{}",
            stream("a", "in1", "g", SCALE_OUT),
            stream("b", "in2", "g", "")
        ));
        assert!(
            e.contains("stream[1] (\"b\").source.group_id = \"g\"")
                && e.contains("stream[0] (\"a\") uses it too"),
            "{e}"
        );
        // Without scale-out, sharing a group is the user's business, as before.
        Config::from_toml_str(
            &format!(
                "{}{}",
                stream("a", "in1", "g", ""),
                stream("b", "in2", "g", "")
            ),
            "t",
        )
        .unwrap();
        // The consumer group of a scale-out stream's merge is taken too.
        let e = err(&format!(
            "{}{}",
            stream("a", "in1", "g", SCALE_OUT),
            stream("b", "in2", "g-merge", "")
        ));
        assert!(
            e.contains("stream[1] (\"b\").source.group_id = \"g-merge\"")
                && e.contains("merge uses the consumer group"),
            "{e}"
        );
        // Two scale-out streams may share a results topic: records are keyed by stream.
        Config::from_toml_str(
            &format!(
                "{}{}",
                stream("a", "in1", "g", SCALE_OUT),
                stream("b", "in2", "h", SCALE_OUT)
            ),
            "t",
        )
        .unwrap();
    }

    #[test]
    fn written_topics_are_neither_read_nor_another_streams_state() {
        let two = |extra_b: &str, topic_b: &str| {
            format!(
                "{}{}",
                stream("a", "in1", "g", SCALE_OUT),
                stream("b", topic_b, "h", extra_b)
            )
        };
        let e = err(&two(", scale_out = { results_topic = \"in1\" }", "in2"));
        assert!(
            e.contains("stream[1] (\"b\").source.scale_out.results_topic = \"in1\"")
                && e.contains("stream[0] (\"a\") reads \"in1\""),
            "{e}"
        );
        let e = err(&two(
            ", scale_out = { results_topic = \"g-changelog\" }",
            "in2",
        ));
        assert!(
            e.contains("results_topic = \"g-changelog\"")
                && e.contains("holds the scale-out state of stream[0] (\"a\")"),
            "{e}"
        );
        let e = err(&two("", "g-partials"));
        assert!(
            e.contains("stream[1] (\"b\").source.topics[0] = \"g-partials\""),
            "{e}"
        );
        let e = err(&two(", dead_letter_topic = \"in1\"", "in2"));
        assert!(e.contains("source.dead_letter_topic = \"in1\""), "{e}");
        let e = err(&format!(
            "[serve]\nsink = [{{ kind = \"kafka\", brokers = \"b:9092\", topic = \"g-partials\" }}]\n{}",
            stream("a", "in1", "g", SCALE_OUT)
        ));
        assert!(e.contains("serve.sink[0].topic = \"g-partials\""), "{e}");
        let e = err(&format!(
            "[serve]\nsink = [{{ kind = \"kafka\", brokers = \"b:9092\", topic = \"in1\" }}]\n{}",
            stream("a", "in1", "g", "")
        ));
        assert!(e.contains("serve.sink[0].topic = \"in1\""), "{e}");
    }
}
