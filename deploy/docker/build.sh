#!/usr/bin/env bash
# The image's build steps: the README's release build, then the runtime files laid out
# under DEST exactly as the runtime stage copies them to /. The Dockerfile's build stage
# runs this script, and deploy/check.sh runs it in CI (there is no Docker engine there).
#
#   deploy/docker/build.sh DEST
#
# Honours CARGO_TARGET_DIR. Fails when the binary needs a shared library that
# debian:bookworm-slim does not have.
set -euo pipefail
dest="${1:?usage: build.sh DEST}"
cd "$(dirname "$0")/../.."
cargo build --release --locked --bin ldpstream
target="${CARGO_TARGET_DIR:-target}"
install -D -m 0755 "$target/release/ldpstream" "$dest/usr/local/bin/ldpstream"
install -D -m 0755 deploy/docker/healthcheck.sh "$dest/usr/local/bin/ldpstream-healthcheck"
install -D -m 0644 examples/demo.toml "$dest/etc/ldpstream/config.toml"

# Libraries of packages with Priority required in Debian 12 (libc6, libgcc-s1, zlib1g),
# which the slim image keeps. Anything else would have to be apt-get installed there.
missing=0
while read -r lib _; do
  case "$lib" in
    linux-vdso.so.*|/lib64/ld-linux-x86-64.so.*|ld-linux-*|libc.so.6|libm.so.6|libgcc_s.so.1|\
    libpthread.so.0|libdl.so.2|librt.so.1|libz.so.1) ;;
    *) echo "error: the binary needs $lib, which debian:bookworm-slim does not have" >&2; missing=1 ;;
  esac
done < <(ldd "$dest/usr/local/bin/ldpstream" | sed -E 's/^[[:space:]]+//')
exit "$missing"
