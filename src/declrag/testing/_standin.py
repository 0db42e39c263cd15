"""An instant OpenAI-compatible chat endpoint on loopback, so that a test or benchmark measures the server and not the
model: ``POST .../chat/completions`` answers `ANSWER` at once, as one JSON response or, when the request asks for
``stream``, as server-sent chunks ending in ``data: [DONE]``. It is its own process (``python -m
declrag.testing._standin --port P``), off the cores' GIL of both the server and the load generator."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "It is stated in the passage [1]."


def _chunk(delta: dict, finish: str | None) -> bytes:
    body = {"id": "standin", "object": "chat.completion.chunk", "created": 0, "model": "standin",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 (the handler's name)
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        try:
            stream = bool(json.loads(raw).get("stream"))
        except ValueError:
            stream = False
        if stream:
            parts = [_chunk({"role": "assistant", "content": ""}, None)]
            parts += [_chunk({"content": w}, None) for w in ANSWER.split(" ")[:1]]
            parts += [_chunk({"content": " " + w}, None) for w in ANSWER.split(" ")[1:]]
            parts += [_chunk({}, "stop"), b"data: [DONE]\n\n"]
            body, kind = b"".join(parts), "text/event-stream"
        else:
            body = json.dumps({"id": "standin", "object": "chat.completion", "created": 0, "model": "standin",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": ANSWER}}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 8,
                                         "total_tokens": 18}}).encode()
            kind = "application/json"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def start(port: int) -> subprocess.Popen:
    """The stand-in in a child process on ``port``, once it accepts connections."""
    import socket

    proc = subprocess.Popen([sys.executable, "-m", "declrag.testing._standin", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180  # its imports (declrag.testing's, DSPy's) are slow on a busy machine
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the stand-in LM did not start within 180 s (exit code {proc.poll()})")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    server = ThreadingHTTPServer(("127.0.0.1", p.parse_args().port), Handler)
    server.daemon_threads = True
    server.serve_forever()
