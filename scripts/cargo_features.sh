# shellcheck shell=bash
# Sourced by every script that runs `cargo test` or `cargo build` on the workspace for the
# tests (scripts/test.sh, js_client_test.sh, python_env.sh, the bench scripts). cargo
# unifies dependency features over the packages and features of one build, so a command
# with another feature set compiles the workspace's crates again; with one shared set,
# each script after test.sh's compile only runs what is built.
#
#   kafka-integration-tests      the Kafka tests fail, not pass, without a broker
#   conformance-replay           the Python extension's test-only replay of fixed random
#                                words (conformance/README.md); `pip install ./python` never
#                                has it
# shellcheck disable=SC2034 # used by the scripts that source this file
cargo_features=(--workspace --features ldpstream/kafka-integration-tests --features ldpstream-python/conformance-replay)
