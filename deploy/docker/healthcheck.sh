#!/usr/bin/env bash
# The image's HEALTHCHECK: GET /healthz on the local HTTP port, with bash's /dev/tcp (the
# slim image has neither curl nor wget). Exit 0 on a 200 answer, 1 otherwise.
#   LDPSTREAM_HEALTH_PORT   the port (default 9898, the image's --listen)
set -uo pipefail
port="${LDPSTREAM_HEALTH_PORT:-9898}"
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3
IFS= read -r -t 3 status <&3 || exit 1
exec 3<&-
case "$status" in
  "HTTP/1."?" 200 "*) exit 0 ;;
  *) echo "healthz: $status" >&2; exit 1 ;;
esac
