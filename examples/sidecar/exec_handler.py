#!/usr/bin/env python3
"""A handler behind `idem consume --handler 'exec:python3 exec_handler.py LOG'`.

idem starts one such process per worker and writes one JSON line per message to its
stdin: {"id", "key", "version", "event", "attempt", "body"} ("body_base64" instead of
"body" when the body is not UTF-8). It answers with one line:
{"status": "ok"|"fail"|"retry"|"reject", "delay_ms": N, "result": ..., "error": ...}.

The same behaviour as handler.py: "ID ATTEMPT" appended to LOG per call; {"fail":
true} fails the first attempt, {"busy": true} retries it after a second, {"reject":
true} rejects; a body that is not UTF-8 is ok with {"handled": ID, "bytes": N};
anything else is ok with the result {"handled": ID}, after
{"sleep_ms": N} milliseconds if the body says so. And {"crash":
true} makes the process exit on the first attempt without answering: idem fails
that message (it is retried) and starts a new process.
"""
import base64
import json
import os
import sys
import time


def answer(request):
    if "body_base64" in request:  # not UTF-8, so not JSON: say what came
        data = base64.b64decode(request["body_base64"])
        return {"status": "ok", "result": {"handled": request["id"], "bytes": len(data)}}
    try:
        order = json.loads(request.get("body", ""))
    except ValueError:
        return {"status": "reject", "error": "not JSON"}
    if order.get("reject"):
        return {"status": "reject", "error": "refused"}
    if order.get("fail") and request["attempt"] == 1:
        return {"status": "fail", "error": "first attempt fails"}
    if order.get("busy") and request["attempt"] == 1:
        return {"status": "retry", "delay_ms": 1000}
    time.sleep(order.get("sleep_ms", 0) / 1000)
    return {"status": "ok", "result": {"handled": request["id"]}}


def main():
    log = sys.argv[1]
    for line in sys.stdin:
        request = json.loads(line)
        with open(log, "a") as f:
            f.write(f"{request['id']} {request['attempt']}\n")
        if '"crash"' in request.get("body", "") and request["attempt"] == 1:
            os._exit(3)
        sys.stdout.write(json.dumps(answer(request)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
