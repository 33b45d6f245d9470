#!/usr/bin/env python3
"""A handler behind `idem consume --handler 'exec:python3 exec_handler.py LOG'`.

idem starts one such process per worker and writes one JSON line per message to its
stdin: {"id", "key", "version", "event", "attempt", "timeout_ms", "body"}
("body_base64" instead of "body" when the body is not UTF-8; "timeout_ms" is how long
idem waits for the answer before it kills this process). It answers with one line naming
the same id: {"id": ..., "status": "ok"|"fail"|"retry"|"reject", "delay_ms": N,
"result": ..., "error": ...}. stdout carries answers only: print anything else to
stderr (idem skips a line that is not JSON, and replaces a process whose answer names
another id).

The same behaviour as handler.py: "ID ATTEMPT" appended to LOG per call; {"fail":
true} fails the first attempt, {"busy": true} retries it after a second, {"reject":
true} rejects; a body that is not UTF-8 is ok with {"handled": ID, "bytes": N};
anything else is ok with the result {"handled": ID}, after
{"sleep_ms": N} milliseconds if the body says so ({"slow_once": true}: on the first
attempt only; work that would take longer than timeout_ms is not done). And {"crash":
true} makes the process exit on the first attempt without answering: idem fails
that message (it is retried) and starts a new process. Two misbehaviours for the
tests: {"debug": true} prints a stray line to stdout before the answer, and
{"wrong_id": true} answers for another id the first time the message comes.
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
    work = 0 if order.get("slow_once") and request["attempt"] > 1 else order.get("sleep_ms", 0) / 1000
    budget = request.get("timeout_ms", 0) / 1000
    if budget and work > budget:  # honour the timeout: not done
        time.sleep(budget)
        return {"status": "fail", "error": "the work would end after the timeout"}
    time.sleep(work)
    return {"status": "ok", "result": {"handled": request["id"]}}


def named(request, reply):
    """reply, naming the request's id as the request did (id or id_base64)."""
    key = "id" if "id" in request else "id_base64"
    return {key: request[key], **reply}


def misbehave(request, log):
    """The id to answer for: another one the first time a {"wrong_id": true} comes."""
    body = request.get("body", "")
    if '"debug"' in body:
        sys.stdout.write(f"debug: got {request['id']}\n")
    marker = f"{log}.answered-wrong-{request.get('id', '')}"
    if '"wrong_id"' in body and not os.path.exists(marker):
        open(marker, "w").close()
        return {**request, "id": "someone-else"}
    return request


def main():
    log = sys.argv[1]
    for line in sys.stdin:
        request = json.loads(line)
        with open(log, "a") as f:
            f.write(f"{request.get('id', request.get('id_base64'))} {request['attempt']}\n")
        if '"crash"' in request.get("body", "") and request["attempt"] == 1:
            os._exit(3)
        reply = named(misbehave(request, log), answer(request))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
