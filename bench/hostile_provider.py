"""A provider gone wrong, for the attack bench: answers every call 200 with a body that never ends.

`--body json`: an endless run of spaces as `application/json` (chunked, no length); `--body sse`: the same as
`text/event-stream`, one line that never ends. It writes as fast as the reader takes, so what it costs the reader
is all the reader's own.

Run: python bench/hostile_provider.py --port 9200 --body json
"""

from __future__ import annotations

import argparse

from aiohttp import web

BLOCK = b" " * 65_536


def app(body: str) -> web.Application:
    """An app answering any POST with an endless body."""
    kind = "application/json" if body == "json" else "text/event-stream"

    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"content-type": kind})
        await resp.prepare(request)
        if body == "sse":
            await resp.write(b"data: ")
        try:
            while True:
                await resp.write(BLOCK)
        except (ConnectionError, RuntimeError):  # the reader stopped reading: as it should
            pass
        return resp

    a = web.Application()
    a.router.add_post("/{tail:.*}", endless)
    return a


def main() -> None:
    """Serve until killed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--body", choices=["json", "sse"], default="json")
    args = ap.parse_args()
    web.run_app(app(args.body), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
