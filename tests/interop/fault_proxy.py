"""A fault proxy on loopback: HTTP/1.1 between a client (xlake) and a server (moto, a
catalog, serve), one request at a time, with faults injected into a share of them.

Each request is read whole (head, then a `Content-Length` or chunked body) and sent to the
server on a fresh connection with `Connection: close`, whose whole answer is read back;
answers go to the client with `Connection: close` too, so every request is one connection
and a fault hits exactly one request. Modes (`FaultProxy.set(mode, share)`):

- `pass`: no fault;
- `latency`: every request waits `latency` seconds before it is sent on;
- `reset`: the client's connection is reset (RST): before the request reaches the server
  or, for half of them, after it took effect there (the reply lost on the way back);
- `half_open`: the request is accepted and never answered (the connection stays open
  until the client gives up);
- `truncate`: the server's answer is cut halfway, then the connection closed;
- `slowdown`: answered 503 with S3's `SlowDown` error body, without reaching the server.

The faults are drawn from a seeded `random.Random`, so a run repeats. `counts` tells how
many requests went through and how many of each fault were injected. Toxiproxy would do
the TCP faults, but not `slowdown` or a fault per request over pooled connections; this
is small enough to read in one sitting and needs nothing installed.
"""
import asyncio
import random
import socket
import struct
import threading
from collections import Counter

MODES = ("pass", "latency", "reset", "half_open", "truncate", "slowdown")

SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>xlake-fault-proxy</RequestId></Error>"
)


class FaultProxy:
    """Listens on 127.0.0.1 (`endpoint`), forwards to `upstream` (`host:port`).
    `translate((head, body))`, if given, rewrites each request on its way and returns it
    with a function that rewrites the server's answer (see gcs.py)."""

    def __init__(self, upstream, seed=0, translate=None):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.translate = translate
        self.random = random.Random(seed)
        self.mode, self.share, self.latency = "pass", 0.0, 0.0
        self.counts = Counter()
        # (arrived, answered) on the loop's clock, per request: what overlapped (benches).
        self.timeline = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def set(self, mode, share=0.0, latency=0.0):
        """Inject `mode` into `share` of the requests from now on (`latency`: every one)."""
        assert mode in MODES, mode
        self.mode, self.share, self.latency = mode, share, latency

    def stop(self):
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def _fault(self):
        """The fault for the next request, or None."""
        if self.mode in ("pass", "latency") or self.random.random() >= self.share:
            return None
        return self.mode

    async def _client(self, reader, writer):
        try:
            request = await read_message(reader)
            if request is None:
                return
            self.counts["requests"] += 1
            arrived = self.loop.time()
            fault = self._fault()
            if fault:
                self.counts[fault] += 1
            if self.mode == "latency":
                await asyncio.sleep(self.latency)
            if fault == "half_open":
                await reader.read()  # until the client gives up
                return
            if fault == "slowdown":
                writer.write(slowdown_answer())
                await writer.drain()
                return
            if fault == "reset" and self.random.random() < 0.5:
                return reset(writer)
            rewrite_answer = None
            if self.translate:
                request, rewrite_answer = self.translate(request)
            answer = await self._forward(request)
            if rewrite_answer:
                answer = rewrite_answer(answer)
            if fault == "reset":
                return reset(writer)
            if fault == "truncate":
                answer = answer[: len(answer) // 2]
            writer.write(answer)
            await writer.drain()
            self.timeline.append((arrived, self.loop.time()))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _forward(self, request):
        head, body = request
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        try:
            up_writer.write(with_connection_close(head) + body)
            await up_writer.drain()
            answer = await up_reader.read()  # the server closes after its answer
        finally:
            up_writer.close()
        head, _, rest = answer.partition(b"\r\n\r\n")
        return with_connection_close(head) + rest


async def read_message(reader):
    """A request's (head, body) as bytes, the head without its closing blank line; None at
    end of stream."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    head = head[:-4]
    headers = headers_of(head)
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            body += size_line + await reader.readexactly(size + 2)
            if size == 0:
                return head, body
    return head, await reader.readexactly(int(headers.get(b"content-length", b"0")))


def headers_of(head):
    """{lower-case name: value} of a message head's header lines, as bytes."""
    return {k.strip().lower(): v.strip() for k, _, v in
            (line.partition(b":") for line in head.split(b"\r\n")[1:])}


def with_connection_close(head):
    """`head` (request or status line and headers) with `Connection: close`, and its
    blank line."""
    lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


def slowdown_answer():
    return (
        b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
        + f"Content-Length: {len(SLOWDOWN_BODY)}\r\n".encode()
        + b"Connection: close\r\n\r\n" + SLOWDOWN_BODY
    )


def reset(writer):
    """Close the client's connection with a RST, not a FIN."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
