#!/usr/bin/env python3
"""A TCP proxy that adds a fixed delay to each request: data from the client that
arrives after the line was quiet for at least DELAY (a new request, not the rest of a
body) waits DELAY before it is forwarded. Stands in for a distant object store where
`tc netem` is not available. Usage: delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS"""
import asyncio
import sys
import time

LISTEN, TARGET, DELAY = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000


async def pipe(reader, writer, delayed):
    last = 0.0
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            now = time.monotonic()
            if delayed and now - last >= DELAY:
                await asyncio.sleep(DELAY)
            last = time.monotonic()
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def handle(client_reader, client_writer):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", TARGET)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(
        pipe(client_reader, server_writer, True),
        pipe(server_reader, client_writer, False),
    )


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", LISTEN)
    async with server:
        await server.serve_forever()


asyncio.run(main())
