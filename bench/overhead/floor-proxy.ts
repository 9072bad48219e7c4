// The floor for any Node.js proxy on this machine: node:http in, undici dispatch out, no logic at all.
// The overhead benchmark measures it beside the gateway, so the gateway's own cost can be told apart from
// what loopback TCP, the extra process hop and Node's HTTP stack cost anyway.
//
//   node --import tsx bench/overhead/floor-proxy.ts PORT UPSTREAM_URL
import { createServer } from "node:http";
import { Pool, type Dispatcher } from "undici";

const [port, upstream] = [Number(process.argv[2]), process.argv[3]!];
const pool = new Pool(upstream, { connections: 1024, pipelining: 1 });
// A normal exit on SIGTERM, so that `--cpu-prof` writes its profile (profile-run.ts --floor).
process.once("SIGTERM", () => process.exit(0));

createServer({ noDelay: true, keepAlive: true }, (req, res) => {
  const body: Buffer[] = [];
  req.on("data", (chunk: Buffer) => body.push(chunk));
  req.on("end", () => {
    const handler: Dispatcher.DispatchHandler = {
      // Declaring onRequestStart selects undici's current handler API (the one the gateway uses).
      onRequestStart() {},
      onResponseStart(_controller, statusCode, headers) {
        res.writeHead(statusCode, { "content-type": String(headers["content-type"] ?? "application/json") });
      },
      onResponseData(_controller, chunk) {
        res.write(chunk);
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError(_controller, error) {
        if (!res.headersSent) res.writeHead(502);
        res.end(String(error));
      },
    };
    pool.dispatch(
      {
        path: req.url ?? "/",
        method: "POST",
        headers: { "content-type": "application/json" },
        body: Buffer.concat(body),
      },
      handler,
    );
  });
}).listen(port, "127.0.0.1", () => process.stdout.write(`floor proxy listening on ${port}\n`));
