// A service behind `idem consume --handler http://127.0.0.1:PORT/orders`, in Node.
// The same contract and behaviour as handler.py (read its header):
//
//     node handler.js LOG [PORT]      # prints PORT=N once listening (PORT 0: any)
"use strict";
const fs = require("node:fs");
const http = require("node:http");

const [log, port = "0"] = process.argv.slice(2);

function answer(res, status, payload, headers = {}) {
  const data = JSON.stringify(payload);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data), ...headers });
  res.end(data);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const id = req.headers["idem-id"];
    const attempt = Number(req.headers["idem-attempt"]);
    fs.appendFileSync(log, `${id} ${attempt}\n`);
    let order;
    try {
      order = JSON.parse(Buffer.concat(chunks).toString());
    } catch {
      return answer(res, 400, { error: "not JSON" });
    }
    if (order.reject) return answer(res, 422, { error: "refused" });
    if (order.fail && attempt === 1) return answer(res, 500, { error: "first attempt fails" });
    if (order.busy && attempt === 1) return answer(res, 503, { error: "busy" }, { "Retry-After": "1" });
    // The timeout honoured as handler.py does: work that would end after it is not done.
    const start = Date.now();
    const work = order.slow_once && attempt > 1 ? 0 : order.sleep_ms || 0;
    const budget = Number(req.headers["idem-timeout-ms"] || 0);
    const span = (outcome) => fs.appendFileSync(`${log}.spans`, `${id} ${start} ${Date.now()} ${outcome}\n`);
    if (budget && work > budget) {
      return setTimeout(() => {
        span("abandoned");
        answer(res, 500, { error: "the work would end after the timeout" });
      }, budget);
    }
    setTimeout(() => {
      span("done");
      answer(res, 200, { handled: id });
    }, work);
  });
});
server.keepAliveTimeout = 60_000;  // one connection per idem worker, kept
server.listen(Number(port), "127.0.0.1", () => console.log(`PORT=${server.address().port}`));
