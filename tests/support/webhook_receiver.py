#!/usr/bin/python3
"""Test-only Alertmanager webhook receiver: appends every POSTed body as one JSON
line to the file given as argv[2]; listens on 127.0.0.1:argv[1]. Copied into the
controller container by tests/integration/test_monitoring.py (stdlib only)."""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[2], "a") as handle:
            handle.write(json.dumps(json.loads(body)) + "\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args):
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
