"""Answers every webhook with 200 and prints what it received, until Ctrl-C."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        key = self.headers.get("idempotency-key")
        print(self.command, self.path, key, body.decode(), flush=True)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"received": True}).encode())

    do_PUT = do_PATCH = do_POST

    def log_message(self, *args: object) -> None:  # the print above is the log
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()
