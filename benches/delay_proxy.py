#!/usr/bin/env python3
"""A TCP proxy that adds a fixed delay to each HTTP request: the first data from the
client on a connection, and the first after each answer from the server (a new request,
not the rest of a body), waits DELAY before it is forwarded. Stands in for a distant
object store where `tc netem` is not available.
Usage: delay_proxy.py LISTEN_PORT TARGET_PORT DELAY_MS"""
import asyncio
import sys

LISTEN, TARGET, DELAY = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 1000


async def pipe(reader, writer, turn, from_client):
    """Copy one direction. `turn[0]` is True when the server spoke last."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            if from_client and turn[0]:
                await asyncio.sleep(DELAY)
                turn[0] = False
            elif not from_client:
                turn[0] = True
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
    turn = [True]  # a new connection's first request is delayed too
    await asyncio.gather(
        pipe(client_reader, server_writer, turn, True),
        pipe(server_reader, client_writer, turn, False),
    )


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", LISTEN)
    async with server:
        await server.serve_forever()


asyncio.run(main())
