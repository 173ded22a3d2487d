// Produces privatized reports to Kafka as a device fleet would: each true value goes
// through the client's randomizer (crypto.getRandomValues) and is sent as a stamped JSON
// message with kafkajs, then one end marker per partition. For the end-to-end test
// (tests/kafka_js_client.rs) and as an example.
//
//   node scripts/produce-kafka.mjs BROKERS TOPIC '<mechanism JSON>' P0,P1,... N [PARTITIONS]
//
// The true values are exact quotas: round(N·p_k) users hold category k, interleaved.
import { Kafka, logLevel } from "kafkajs";
import { Randomizer } from "../dist/index.js";

const [brokers, topic, mechanismJson, pArg, nArg, partitionsArg] = process.argv.slice(2);
const randomizer = new Randomizer(JSON.parse(mechanismJson));
const p = pArg.split(",").map(Number);
const n = Number(nArg);
const partitions = Number(partitionsArg ?? 4);

// Category of user i: the first k whose cumulative quota exceeds (i·g mod n), g coprime to n,
// so each category's users are spread over the whole stream.
const quota = [];
let acc = 0;
for (const pk of p) quota.push((acc += Math.round(pk * n)));
const stride = 999_983; // a prime: coprime to any n it does not divide
const valueOf = (i) => {
  const u = (i * stride) % n;
  return quota.findIndex((q) => u < q);
};

const kafka = new Kafka({ clientId: "ldpstream-js-e2e", brokers: brokers.split(","), logLevel: logLevel.ERROR });
const producer = kafka.producer();
await producer.connect();
const batch = 20_000;
for (let start = 0; start < n; start += batch) {
  const messages = [];
  for (let i = start; i < Math.min(n, start + batch); i++) {
    messages.push({ partition: i % partitions, value: randomizer.json(valueOf(i)) });
  }
  await producer.send({ topic, messages });
}
await producer.send({
  topic,
  messages: Array.from({ length: partitions }, (_, k) => ({ partition: k, value: '{"end":true}' })),
});
await producer.disconnect();
