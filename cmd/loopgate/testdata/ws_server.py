#!/usr/bin/python3
"""WebSocket upstream for the tunnel tests (python3-websockets).

Usage: ws_server.py PORT. Prints "ready" once listening.

  /echo     echoes every message as it came (text or binary); the message
            "server-close" makes the server start the close handshake
            (code 4000, reason "bye")
  /refuse   refuses the upgrade with 403 "refused"
"""
import asyncio
import http
import sys

import websockets


async def handler(ws, path):
    try:
        async for msg in ws:
            if msg == "server-close":
                await ws.close(code=4000, reason="bye")
                return
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass  # the raw test clients hang up without a close frame


async def process_request(path, headers):
    if path == "/refuse":
        return http.HTTPStatus.FORBIDDEN, [("Content-Type", "text/plain")], b"refused"
    return None


async def main():
    async with websockets.serve(handler, "127.0.0.1", int(sys.argv[1]), process_request=process_request,
                                max_size=None, max_queue=None, compression=None, ping_interval=None):
        print("ready", flush=True)
        await asyncio.Future()


asyncio.run(main())
