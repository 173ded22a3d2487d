#!/usr/bin/env python3
"""A TCP proxy in front of the local test broker, plain or TLS-terminating.

- TLS: Tansu 0.6.0 (the broker the integration tests run) cannot serve TLS itself: its
  `--cert` and `--key` flags are declared as conflicting, and `--cert` alone still
  listens in plaintext. The TLS tests therefore put this proxy in front of it. The broker
  advertises the proxy's address, so every connection librdkafka makes (bootstrap, then
  the advertised broker) goes through a real TLS handshake against the test's own CA.
- Plain: the outage test stops the proxy (the broker, and the messages it holds in
  memory, stay) and starts it again on the same port.

    proxy.py LISTEN_PORT TARGET_HOST:TARGET_PORT [CERT_PEM KEY_PEM]

Prints "ready" on stdout once it listens. Standard library only.
"""

import asyncio
import ssl
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    listen_port = int(sys.argv[1])
    target_host, target_port = sys.argv[2].rsplit(":", 1)
    context = None
    if len(sys.argv) > 4:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(sys.argv[3], sys.argv[4])

    async def handle(client_reader, client_writer):
        try:
            broker_reader, broker_writer = await asyncio.open_connection(
                target_host, int(target_port)
            )
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            pipe(client_reader, broker_writer), pipe(broker_reader, client_writer)
        )

    server = await asyncio.start_server(
        handle, "127.0.0.1", listen_port, ssl=context, reuse_address=True
    )
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
