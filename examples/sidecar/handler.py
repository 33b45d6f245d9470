#!/usr/bin/env python3
"""A service behind `idem consume --handler http://127.0.0.1:PORT/orders`.

idem POSTs each message as it arrived, with the headers Idem-Id, Idem-Key,
Idem-Version, Idem-Event, Idem-Attempt and Idem-Timeout-Ms (how long idem waits for
the answer before it closes the connection: a duration, as clocks of two hosts
disagree), and never a duplicate. The answer decides:
2xx done (the body is stored and given to duplicates), 429/503 with Retry-After try
again then, other 5xx fail (retried with backoff, then dead-lettered), other 4xx
reject (dead-lettered at once).

This one appends "ID ATTEMPT" to LOG for every call, then answers by the body:
{"fail": true} fails the first attempt, {"busy": true} asks for a retry in a second
on the first attempt, {"reject": true} rejects; anything else succeeds with
{"handled": ID}, after {"sleep_ms": N} milliseconds if the body says so (work that
takes time; {"slow_once": true} only on the first attempt).

It honours the timeout: work that would end after it is not done (it stops when the
timeout has passed, as idem gives up then), so that idem's next call of the same id never finds
this one still running. Each call's span goes to LOG.spans as "ID START_MS END_MS
done|abandoned".

    python3 handler.py LOG [PORT]      # prints PORT=N once listening (PORT 0: any)
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per idem worker
    disable_nagle_algorithm = True  # headers and body are two writes: do not hold the second

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        msg_id = self.headers["Idem-Id"]
        attempt = int(self.headers["Idem-Attempt"])
        with open(self.server.log, "a") as log:
            log.write(f"{msg_id} {attempt}\n")
        try:
            order = json.loads(body)
        except ValueError:
            return self.answer(400, {"error": "not JSON"})
        if order.get("reject"):
            return self.answer(422, {"error": "refused"})
        if order.get("fail") and attempt == 1:
            return self.answer(500, {"error": "first attempt fails"})
        if order.get("busy") and attempt == 1:
            return self.answer(503, {"error": "busy"}, {"Retry-After": "1"})
        start = time.time()
        work = 0 if order.get("slow_once") and attempt > 1 else order.get("sleep_ms", 0) / 1000
        budget = int(self.headers.get("Idem-Timeout-Ms", "0")) / 1000
        if budget and work > budget:
            time.sleep(budget)
            self.span(msg_id, start, "abandoned")
            return self.answer(500, {"error": "the work would end after the timeout"})
        time.sleep(work)
        self.span(msg_id, start, "done")
        self.answer(200, {"handled": msg_id})

    def span(self, msg_id, start, outcome):
        with open(self.server.log + ".spans", "a") as spans:
            spans.write(f"{msg_id} {int(start * 1000)} {int(time.time() * 1000)} {outcome}\n")

    def answer(self, status, payload, headers=None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # idem gave up at its timeout and closed the connection

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2]) if len(sys.argv) > 2 else 0), Handler)
    server.log = sys.argv[1]
    print(f"PORT={server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
