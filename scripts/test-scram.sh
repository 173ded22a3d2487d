#!/usr/bin/env bash
# The successful SASL/SCRAM login against a real broker: builds (once, about 10 minutes)
# a Tansu 0.6.0 with the sqlite storage engine, which keeps users (the suite's PyPI
# broker keeps none), and runs the test that scripts/test.sh leaves ignored for that
# reason: tests/kafka_security.rs, a_scram_user_reads_a_topic_and_a_wrong_password_is_refused.
# Fails when the test fails or did not run.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
LDPSTREAM_TANSU_USERS=$(./deploy/kafka/install-tansu-users.sh)
export LDPSTREAM_TANSU_USERS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test "${cargo_features[@]}" --test integration -- --ignored --exact \
  kafka::security::a_scram_user_reads_a_topic_and_a_wrong_password_is_refused 2>&1 | tee "$log"
grep -q "test result: ok. 1 passed" "$log" || { echo "error: the SCRAM test did not pass" >&2; exit 1; }
