"""A stub LLM for the end-to-end tests: an OpenAI-compatible chat
completions server on 127.0.0.1 (a random port) whose answers a Python
function computes from the request's messages, so runs are offline and
deterministic."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class StubLLM:
    """``with StubLLM(respond) as llm:`` serves ``llm.url`` (an ``api_base``)
    until the block ends; ``respond(messages) -> str`` answers each request;
    ``llm.requests`` holds the messages received."""

    def __init__(self, respond: Callable[[list[dict]], str]):
        self.respond = respond
        self.requests: list[list[dict]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                messages = body.get("messages", [])
                stub.requests.append(messages)
                text = stub.respond(messages)
                out = json.dumps({
                    "id": f"stub-{len(stub.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "stub"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
