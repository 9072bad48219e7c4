// The gateway's per-request log line through pino, with the destination settings of the seventh and ninth rounds
// (bench/README.md): CPU µs per line, the lines written to stdout (send it to /dev/null).
//
//   node --import tsx bench/overhead/log-line.ts old|new|batch|whole > /dev/null
//
// old: 4 KB batches and flush(callback) every 100 ms (which also fsyncs stdout, and piles a drain listener per
// flush while a write is slow); new: 16 KB batches and sonic-boom's periodicFlush (the seventh round); batch: the
// lines gathered by LogLineBatch and handed to sonic-boom 16 KB at a time (the ninth round, src/cli/run-gateway.ts);
// whole: that, and the line serialised whole by logInfoLine (src/core/json-log-line.ts) as the gateway now does.
// Lines are logged 16 per event-loop turn, as a gateway at concurrency 16 would.
import { pino, type Logger } from "pino";
import { logInfoLine, markDefaultFormat } from "../../src/core/json-log-line.js";
import { LogLineBatch } from "../../src/cli/log-batch.js";

const mode = process.argv[2];
if (mode !== "old" && mode !== "new" && mode !== "batch" && mode !== "whole")
  throw new Error("usage: log-line.ts old|new|batch|whole");
const destination =
  mode === "old"
    ? pino.destination({ dest: 1, sync: false, minLength: 4096 })
    : mode === "new"
      ? pino.destination({ dest: 1, sync: false, minLength: 16_000, periodicFlush: 100 })
      : new LogLineBatch(pino.destination({ dest: 1, sync: false, minLength: 0 }), 16_000, 100);
if (mode === "old") setInterval(() => destination.flush(() => undefined), 100).unref();
const logger = markDefaultFormat(pino({ name: "agent-serve" }, destination));
const log =
  mode === "whole" ? logInfoLine : (to: Logger, fields: object, message: string) => to.info(fields, message);

const LINES = 200_000;
const PER_TURN = 16;
const started = process.cpuUsage();
let written = 0;
await new Promise<void>((done) => {
  const turn = (): void => {
    for (let k = 0; k < PER_TURN && written < LINES; k++, written++) {
      log(
        logger,
        {
          reqId: `r-${written}`,
          method: "POST",
          path: "/v1/chat/completions",
          status: 200,
          ms: 1.2,
          session: "s-1",
          tier: "small",
          backend: "e0",
          reason: "affinity_hit",
          hit: true,
          reusable: 32,
          cached: 32,
          lost: 0,
          lostCause: "none",
        },
        "request",
      );
    }
    if (written < LINES) setImmediate(turn);
    else done();
  };
  turn();
});
const used = process.cpuUsage(started);
process.stderr.write(`${mode}: ${((used.user + used.system) / LINES).toFixed(2)} µs of CPU per line\n`);
