//! Throughput comparison for `serve`'s Kafka source (not run in CI; see RESULTS.md).
//!
//!   kafka-bench produce --brokers B --topic T --n N [--format binary|json] [--domain D]
//!                       [--groups G] [--seconds S] [--rate R]
//!       writes N GenRR reports (event times 1 ms apart) round-robin over the topic's
//!       partitions, then one end marker per partition. With --groups G each report
//!       carries a group column `g` cycling over G values. With --seconds S it writes
//!       for S seconds instead (N is then a cap, 0 for none), stamps reports with the
//!       wall clock and sends no end markers: a live feed for the overload run
//!       (benches/overload_rss.sh). --rate R holds the feed at R messages per second
//!       (checked every 4096 messages) instead of full speed: the load run;
//!   kafka-bench consume --brokers B --topic T --n N
//!       a bare rdkafka consumer that only counts messages (with the same tuned fetch
//!       settings `serve` uses by default) and prints messages per second.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_default();
    let brokers = arg(&args, "--brokers").ok_or("--brokers is required")?;
    let topic = arg(&args, "--topic").ok_or("--topic is required")?;
    let n: u64 = arg(&args, "--n").ok_or("--n is required")?.parse()?;
    match mode.as_str() {
        "produce" => produce(&brokers, &topic, n, &args),
        "consume" => consume(&brokers, &topic, n),
        _ => Err("usage: kafka-bench produce|consume --brokers B --topic T --n N".into()),
    }
}

fn partitions(
    consumer: &BaseConsumer,
    topic: &str,
) -> Result<Vec<i32>, Box<dyn std::error::Error>> {
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(30))?;
    let t = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .ok_or("no such topic")?;
    Ok(t.partitions().iter().map(|p| p.id()).collect())
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn produce(
    brokers: &str,
    topic: &str,
    n: u64,
    args: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    let json = arg(args, "--format").as_deref() == Some("json");
    let d: u64 = arg(args, "--domain")
        .unwrap_or_else(|| "16".into())
        .parse()?;
    let groups: u64 = arg(args, "--groups")
        .unwrap_or_else(|| "0".into())
        .parse()?;
    let seconds: Option<f64> = arg(args, "--seconds").map(|s| s.parse()).transpose()?;
    let rate: Option<f64> = arg(args, "--rate").map(|s| s.parse()).transpose()?;
    if rate.is_some_and(|r: f64| !(r.is_finite() && r > 0.0)) {
        return Err("--rate: expected messages per second > 0".into());
    }
    let labels: Vec<String> = (0..groups).map(|g| format!("g{g}")).collect();
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()?;
    let parts = partitions(&probe, topic)?;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("batch.num.messages", "100000")
        .set("queue.buffering.max.messages", "1000000")
        .create()?;
    let t0 = 1_767_225_600_000i64;
    let started = Instant::now();
    let mut x: u64 = 1;
    let (n, total) = match seconds {
        Some(_) if n == 0 => (u64::MAX, u64::MAX),
        Some(_) => (n, n),
        None => (n, n + parts.len() as u64),
    };
    let deadline = seconds.map(|s| started + Duration::from_secs_f64(s));
    let mut sent = 0u64;
    let mut now_ms = wall_clock_ms();
    for i in 0..total {
        // Reading the clock every 4096 messages keeps it out of the producer's way.
        if i % 4096 == 0 && deadline.is_some() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if let Some(rate) = rate {
                let due = started + Duration::from_secs_f64(i as f64 / rate);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            now_ms = wall_clock_ms();
        }
        sent += 1;
        let p = parts[(i % parts.len() as u64) as usize];
        let group: Vec<&str> = match labels.len() {
            0 => Vec::new(),
            len => vec![labels[(i % len as u64) as usize].as_str()],
        };
        let payload: Vec<u8> = if i >= n {
            if json {
                br#"{"end":true}"#.to_vec()
            } else {
                vec![0xFF]
            }
        } else {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = ((x >> 33) % d) as u32;
            let ts = if deadline.is_some() {
                now_ms
            } else {
                t0 + i as i64
            };
            match (json, group.first()) {
                (true, Some(g)) => format!(r#"{{"report":{r},"ts":{ts},"g":"{g}"}}"#).into_bytes(),
                (true, None) => format!(r#"{{"report":{r},"ts":{ts}}}"#).into_bytes(),
                (false, _) => {
                    ldpstream_connectors::messages::encode_binary_u32(Some(ts), r, &group)
                }
            }
        };
        loop {
            match producer.send(
                BaseRecord::<(), [u8]>::to(topic)
                    .partition(p)
                    .payload(&payload),
            ) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
    }
    producer.flush(Duration::from_secs(300))?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "produced {sent} messages in {secs:.2} s ({:.0} msg/s)",
        sent as f64 / secs
    );
    Ok(())
}

fn consume(brokers: &str, topic: &str, n: u64) -> Result<(), Box<dyn std::error::Error>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "kafka-bench")
        .set("enable.auto.commit", "false")
        .set("fetch.queue.backoff.ms", "10")
        .set("queued.min.messages", "500000")
        .create()?;
    let mut tpl = TopicPartitionList::new();
    for p in partitions(&consumer, topic)? {
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    let started = Instant::now();
    let mut count = 0u64;
    let mut bytes = 0u64;
    while count < n {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            count += 1;
            bytes += m.payload_len() as u64;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "bare consumer: {count} messages ({bytes} bytes) in {secs:.2} s = {:.0} msg/s",
        count as f64 / secs
    );
    Ok(())
}
