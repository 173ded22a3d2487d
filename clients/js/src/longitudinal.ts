// The longitudinal kinds' two rounds (docs/STATISTICS.md §1.9), as the engine draws them
// (engine/src/mechanism/longitudinal/mod.rs), word for word: round 1 is the one-shot kind
// at ε∞ (grr, oue, bitflip), memoized; round 2 randomizes the memo again so that one
// report follows the one-shot kind at ε1 exactly.

import { checkDomain, checkEpsilon, checkInput, checkPeriod, DEFAULT_PERIOD, LongitudinalConfig } from "./config.js";
import { LdpClientError } from "./errors.js";
import { expNeg } from "./exp.js";
import { draw, Prepared, prepare, Report } from "./mechanisms.js";
import { Response } from "./memo.js";
import { bernoulliExact, uniformBelow } from "./sampling.js";
import { WordSource } from "./source.js";

export interface PreparedLongitudinal {
  kind: LongitudinalConfig["kind"];
  domain: number;
  periodMs: number;
  /** Round 1: the one-shot kind at ε∞. */
  first: Prepared;
  /** Round 2's one probability: lgrr's lie, or the unary kinds' flip of every memo bit. */
  second: number;
  /** The kind whose report format (and law) one report has. */
  composed: "grr" | "oue" | "bitflip";
}

/**
 * Round 2's probability from a = e^{−ε∞}, b = e^{−ε1} (lsue: at ε/2), correctly rounded,
 * evaluated left to right as every client does (conformance/README.md): only + − × ÷ on
 * the same doubles, so every client draws against the same double.
 */
function secondRound(kind: LongitudinalConfig["kind"], epsilonPerm: number, epsilon1: number, domain: number): number {
  if (kind === "lsue") {
    const [a, b] = [expNeg(epsilonPerm / 2), expNeg(epsilon1 / 2)];
    return (b - a) / ((1 + b) * (1 - a));
  }
  const [a, b] = [expNeg(epsilonPerm), expNeg(epsilon1)];
  if (kind === "losue") return (b - a) / ((1 + b) * (1 - a));
  const others = domain - 1;
  return (others * (b - a)) / ((1 - a) * (1 + others * b));
}

/** Checks the table as the server does (validate/longitudinal.rs), in its order. */
export function prepareLongitudinal(config: LongitudinalConfig): PreparedLongitudinal {
  const epsilonPerm = checkEpsilon(config.epsilon_perm, "epsilon_perm");
  const epsilon1 = checkEpsilon(config.epsilon_1, "epsilon_1");
  if (epsilon1 >= epsilonPerm) {
    throw new LdpClientError(
      "epsilon_1",
      epsilon1,
      `less than epsilon_perm (${epsilonPerm}): a single report must be more private than the memo it is drawn from`,
    );
  }
  const periodMs = checkPeriod(config.period ?? DEFAULT_PERIOD);
  const domain = checkDomain(config.domain);
  const composed = config.kind === "lgrr" ? "grr" : config.kind === "losue" ? "oue" : "bitflip";
  const first = prepare({ kind: composed, epsilon: epsilonPerm, domain });
  return { kind: config.kind, domain, periodMs, first, second: secondRound(config.kind, epsilonPerm, epsilon1, domain), composed };
}

/** Round 1: the memo of x, drawn exactly as the one-shot kind at ε∞ draws a report. */
export function memoize(m: PreparedLongitudinal, x: number, source: WordSource): Response {
  return draw(m.first, x, source).report as Response;
}

/** A memo's shape for this mechanism, or an error naming what is wrong with it. */
export function checkResponse(m: PreparedLongitudinal, r: Response, what: string): Response {
  if (m.kind === "lgrr") {
    if (typeof r !== "number") throw new LdpClientError(what, "packed bits", "a category (an lgrr memo)");
    return checkInput(r, m.domain);
  }
  const bytes = Math.ceil(m.domain / 8);
  if (typeof r === "number" || r.length !== bytes) {
    throw new LdpClientError(what, typeof r === "number" ? r : `${r.length} bytes`, `${bytes} packed bytes (a ${m.kind} memo at d = ${m.domain})`);
  }
  return r;
}

/**
 * Round 2: one report from the memo. lgrr: Bernoulli(lie); on a lie y = uniform(d−1),
 * reported y + (y ≥ memo). losue, lsue: every bit flipped with the one probability.
 */
export function reportFrom(m: PreparedLongitudinal, memo: Response, source: WordSource): Response {
  if (typeof memo === "number") {
    if (!bernoulliExact(source, m.second)) return memo;
    const y = uniformBelow(source, m.domain - 1);
    return y >= memo ? y + 1 : y;
  }
  const out = memo.slice();
  for (let j = 0; j < m.domain; j++) {
    if (bernoulliExact(source, m.second)) out[j >> 3] ^= 1 << (j & 7);
  }
  return out;
}

/** A response as the composed kind's report, which the message encoders take. */
export function asReport(m: PreparedLongitudinal, r: Response): Report {
  if (typeof r === "number") return { kind: "grr", report: r };
  return { kind: m.composed === "grr" ? "oue" : m.composed, report: r };
}
