// Soak of a replicated deployment: two gateway replicas sharing one redis-server, four simulated engines,
// agent traffic (chat and Messages sessions with tools, sub-agent bursts, Responses chains without a session
// header, each turn through the next replica) while an engine is killed, an engine hangs, a reload removes an
// engine (and adds it back) and Redis restarts. Loopback only, bounded in time. Reports what the clients saw:
// requests, failures by cause, and affinity (turns served by their session's previous engine).
//
//   npm run build && node --import tsx bench/soak/replicas.ts [--seconds 120] [--concurrency 8]
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { SeededRandom } from "../../src/core/random.js";
import { metricValue } from "../../src/metrics/prometheus-text.js";
import { findRedisServer, REDIS_SERVER_MISSING, startRedisServer } from "../../src/store/redis-server.js";
import { freePort, waitHealthy } from "../common.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const { values } = parseArgs({
  options: { seconds: { type: "string", default: "120" }, concurrency: { type: "string", default: "8" } },
});
const DURATION_MS = Number(values.seconds) * 1000;
const CONCURRENCY = Number(values.concurrency);
const MODEL = "soak-model";
const ADMIN_TOKEN = "soak-admin-token-0123456789";
const ENGINES = ["e-0", "e-1", "e-2", "e-3"];
const REPLICAS = 2;

function startEngine(port: number): ChildProcess {
  return spawn(
    process.execPath,
    [CLI, "sim", "--port", String(port), "--profile", "qwen2.5-7b", "--time-scale", "20", "--model", MODEL],
    { stdio: "ignore" },
  );
}

function gatewayConfig(
  port: number,
  redisUrl: string,
  ports: ReadonlyMap<string, number>,
  without?: string,
): string {
  const config = {
    server: { host: "127.0.0.1", port, admin_token: ADMIN_TOKEN, max_body_bytes: 1_048_576 },
    backends: ENGINES.filter((id) => id !== without).map((id) => ({
      id,
      tier: "small",
      base_url: `http://127.0.0.1:${ports.get(id)}`,
      model: MODEL,
      max_inflight: 32,
    })),
    affinity: { store: { kind: "redis", url: redisUrl, timeout_ms: 100, key_prefix: "soak:" } },
    admission: {
      max_agents: 5000,
      default_token_budget: 50_000_000,
      max_queue_size: 512,
      queue_timeout_seconds: 10,
    },
    health: {
      probe_interval_seconds: 1,
      probe_timeout_seconds: 1,
      failures_to_mark_down: 2,
      successes_to_mark_up: 2,
      engine_metrics_interval_seconds: 1,
      stall_seconds: 4,
    },
    upstream: {
      first_byte_timeout_seconds: 10,
      stream_first_byte_timeout_seconds: 10,
      request_timeout_seconds: 60,
      drain_seconds: 20,
    },
  };
  return JSON.stringify(config, null, 2) + "\n";
}

/** A loaded machine starts processes slowly: waits of 20 s, three times. */
async function patiently(wait: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await wait();
    } catch (err) {
      if (attempt === 3) throw err;
    }
  }
}

/** How one request ended, as its client saw it. */
type Outcome = { ok: true; backend: string | undefined; responseId?: string } | { ok: false; cause: string };

interface Tally {
  requests: number;
  ok: number;
  failures: Map<string, number>;
  byApi: Map<string, { requests: number; ok: number }>;
  /** Turns of sessions with a previous turn: served by the previous turn's engine, moved by a fault, moved otherwise. */
  affinity: { turns: number; same: number; forced: number; redis: number; unforced: number };
  chains: { turns: number; answered: number };
}

/**
 * Fault windows per engine (ms since start; open until the fault ends, then 3 s more for the replicas to
 * see it end): a session moving off an engine while it was in one is a forced move.
 */
const faultWindows: { engine: string; what: string; fromMs: number; toMs: number }[] = [];
/** When Redis restarted (empty): moves within a few seconds of it are counted apart. */
const redisRestarts: number[] = [];
const REDIS_WINDOW_MS = 5000;
/** When each failure happened (s since start). */
const failureTimes: number[] = [];
const faultLog: string[] = [];

async function main(): Promise<void> {
  const redisPath = findRedisServer();
  if (redisPath === undefined) throw new Error(REDIS_SERVER_MISSING);
  const redis = await startRedisServer(redisPath);
  const ports = new Map<string, number>();
  for (const id of ENGINES) ports.set(id, await freePort());
  const engines = new Map<string, ChildProcess>();
  for (const id of ENGINES) engines.set(id, startEngine(ports.get(id)!));
  await Promise.all(
    [...ports.values()].map((p) => patiently(() => waitHealthy(`http://127.0.0.1:${p}/health`))),
  );
  const dir = await mkdtemp(join(tmpdir(), "agent-serve-soak-replicas-"));
  // Each replica has a config file of its own (its own port); a reload rewrites both.
  const replicas: { url: string; port: number; config: string; process: ChildProcess }[] = [];
  for (let i = 0; i < REPLICAS; i++) {
    const port = await freePort();
    const config = join(dir, `gateway-${i}.json`);
    await writeFile(config, gatewayConfig(port, redis.url, ports));
    const child = spawn(process.execPath, [CLI, "gateway", "--config", config, "--log-level", "warn"], {
      stdio: "ignore",
    });
    replicas.push({ url: `http://127.0.0.1:${port}`, port, config, process: child });
  }
  await Promise.all(replicas.map((r) => patiently(() => waitHealthy(`${r.url}/healthz`))));
  const pools = replicas.map((r) => new Pool(r.url, { connections: CONCURRENCY * 4 }));

  const tally: Tally = {
    requests: 0,
    ok: 0,
    failures: new Map(),
    byApi: new Map(),
    affinity: { turns: 0, same: 0, forced: 0, redis: 0, unforced: 0 },
    chains: { turns: 0, answered: 0 },
  };
  const started = performance.now();
  const elapsed = (): number => performance.now() - started;
  const random = new SeededRandom(31);
  let replicaTurn = 0;
  const nextReplica = (): number => replicaTurn++ % REPLICAS;

  const fail = (cause: string): Outcome => {
    tally.failures.set(cause, (tally.failures.get(cause) ?? 0) + 1);
    failureTimes.push(Math.round(elapsed() / 1000));
    return { ok: false, cause };
  };

  /** Sends one request through a replica and reads its answer to the end. */
  async function send(
    api: "chat" | "messages" | "responses",
    replica: number,
    body: Record<string, unknown>,
    headers: Record<string, string>,
  ): Promise<Outcome> {
    tally.requests++;
    const perApi = tally.byApi.get(api) ?? { requests: 0, ok: 0 };
    tally.byApi.set(api, perApi);
    perApi.requests++;
    const path = { chat: "/v1/chat/completions", messages: "/v1/messages", responses: "/v1/responses" }[api];
    let status: number;
    let text: string;
    let backend: string | undefined;
    try {
      const response = await pools[replica]!.request({
        path,
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
        headersTimeout: 90_000,
        bodyTimeout: 90_000,
      });
      status = response.statusCode;
      const header = response.headers["x-agent-serve-backend"];
      backend = typeof header === "string" ? header : undefined;
      text = await response.body.text();
    } catch (err) {
      return fail(`connection: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (status !== 200) {
      let code = "no error envelope";
      try {
        const envelope = JSON.parse(text) as { error?: { code?: string; type?: string; message?: string } };
        const message = (envelope.error?.message ?? "").replace(/resp_[A-Za-z0-9_-]+/g, "<id>").slice(0, 90);
        code = `${envelope.error?.code ?? envelope.error?.type ?? code}: ${message}`;
      } catch {
        // not JSON: the cause says so
      }
      return fail(`${api} ${status} ${code}`);
    }
    const stream = body["stream"] === true;
    if (stream) {
      const errorEvent = /event: error|data: \{"error"|"type":"response\.failed"/.test(text);
      const complete =
        api === "chat"
          ? text.includes("data: [DONE]")
          : api === "messages"
            ? text.includes("event: message_stop")
            : /"type":"response\.(completed|incomplete)"/.test(text);
      if (errorEvent) {
        const message = /"message":"([^"]{0,90})/.exec(
          text.slice(text.search(/event: error|"error"|response\.failed/)),
        )?.[1];
        return fail(`${api} stream ended by an error event (${backend ?? "?"}): ${message ?? "?"}`);
      }
      if (!complete) return fail(`${api} stream ended without its final event`);
    }
    tally.ok++;
    perApi.ok++;
    let responseId: string | undefined;
    if (api === "responses") {
      if (!stream) responseId = (JSON.parse(text) as { id?: string }).id;
      else
        for (const line of text.split("\n"))
          if (line.startsWith("data:") && line.includes("response.completed"))
            responseId = (JSON.parse(line.slice(5)) as { response: { id: string } }).response.id;
    }
    return { ok: true, backend, ...(responseId === undefined ? {} : { responseId }) };
  }

  /** Counts a session's turn against the engine of its previous turn. */
  function affinityOf(
    previous: { backend: string; atMs: number } | undefined,
    backend: string | undefined,
  ): void {
    if (previous === undefined || backend === undefined) return;
    tally.affinity.turns++;
    const nowMs = elapsed();
    if (backend === previous.backend) tally.affinity.same++;
    else if (
      faultWindows.some((w) => w.engine === previous.backend && w.toMs >= previous.atMs && w.fromMs <= nowMs)
    )
      tally.affinity.forced++;
    else if (redisRestarts.some((r) => r <= nowMs && nowMs - r <= REDIS_WINDOW_MS)) tally.affinity.redis++;
    else tally.affinity.unforced++;
  }

  const system = "You are a coding agent working in a repository. Use the tools when they help. ".repeat(20);
  const chatTools = [
    {
      type: "function",
      function: {
        name: "read_file",
        description: "Read a file of the repository",
        parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      },
    },
  ];
  const messagesTools = [
    {
      name: "run_tests",
      description: "Run the test suite",
      input_schema: { type: "object", properties: { filter: { type: "string" } } },
    },
  ];

  /** A chat or Messages session of a few turns, each through the next replica. */
  async function session(api: "chat" | "messages", id: string, agent: string, turns: number): Promise<void> {
    let previous: { backend: string; atMs: number } | undefined;
    const history: { role: string; content: string }[] = [];
    for (let turn = 1; turn <= turns && elapsed() < DURATION_MS; turn++) {
      history.push({ role: "user", content: `step ${turn} of ${id}: look at src/file-${turn}.ts` });
      const stream = random.next() < 0.5;
      const body =
        api === "chat"
          ? {
              model: MODEL,
              stream,
              max_tokens: 24,
              tools: chatTools,
              messages: [{ role: "system", content: system }, ...history],
            }
          : { model: MODEL, stream, max_tokens: 24, system, tools: messagesTools, messages: history };
      const atMs = elapsed();
      const outcome = await send(api, nextReplica(), body, { "x-session-id": id, "x-agent-id": agent });
      history.push({ role: "assistant", content: `done with step ${turn}` });
      if (!outcome.ok) continue;
      affinityOf(previous, outcome.backend);
      if (outcome.backend !== undefined) previous = { backend: outcome.backend, atMs };
    }
  }

  /** A Responses chain: previous_response_id only, no session header, each turn through the next replica. */
  async function chain(turns: number): Promise<void> {
    let previousId: string | undefined;
    let previous: { backend: string; atMs: number } | undefined;
    for (let turn = 1; turn <= turns && elapsed() < DURATION_MS; turn++) {
      const atMs = elapsed();
      const outcome = await send(
        "responses",
        nextReplica(),
        {
          model: MODEL,
          stream: random.next() < 0.5,
          max_output_tokens: 24,
          input: `chain step ${turn}`,
          ...(previousId === undefined ? {} : { previous_response_id: previousId }),
        },
        {},
      );
      tally.chains.turns++;
      if (!outcome.ok) {
        // The chain ends here (its cause is counted). An engine that was killed lost the responses it stored.
        const owner = previous?.backend;
        const killed = faultWindows.some(
          (w) => w.engine === owner && w.what.includes("SIGKILL") && w.toMs >= (previous?.atMs ?? 0),
        );
        if (killed && outcome.cause.includes("404")) {
          tally.failures.set(outcome.cause, tally.failures.get(outcome.cause)! - 1);
          if (tally.failures.get(outcome.cause) === 0) tally.failures.delete(outcome.cause);
          fail(
            `responses 404: the chain's engine was SIGKILLed and restarted (its stored responses gone with it)`,
          );
        }
        return;
      }
      tally.chains.answered++;
      affinityOf(previous, outcome.backend);
      if (outcome.backend !== undefined) previous = { backend: outcome.backend, atMs };
      previousId = outcome.responseId;
    }
  }

  // Faults, at fixed fractions of the run (each window ends well before the run does).
  const at = (fraction: number): number => fraction * DURATION_MS;
  const wait = (untilMs: number): Promise<void> =>
    new Promise((resolve) => setTimeout(resolve, Math.max(0, untilMs - elapsed())));
  /** Opens a fault window now; the function it returns closes it (3 s later, for the replicas to notice). */
  const openFault = (engine: string, what: string): (() => void) => {
    const window = { engine, what, fromMs: elapsed(), toMs: Infinity };
    faultWindows.push(window);
    return () => {
      window.toMs = elapsed() + 3000;
      faultLog.push(`${(window.fromMs / 1000).toFixed(0)}-${(window.toMs / 1000).toFixed(0)} s: ${what}`);
    };
  };
  const simFault = (engine: string, fault: object): Promise<unknown> =>
    fetch(`http://127.0.0.1:${ports.get(engine)}/sim/fault`, {
      method: "POST",
      body: JSON.stringify(fault),
    }).catch(() => undefined);
  const reloadAll = async (without?: string): Promise<void> => {
    for (const r of replicas) await writeFile(r.config, gatewayConfig(r.port, redis.url, ports, without));
    await Promise.all(
      replicas.map((r) =>
        fetch(`${r.url}/admin/reload`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        }),
      ),
    );
  };
  const faults = (async () => {
    await wait(at(0.15));
    let close = openFault("e-0", "e-0 SIGKILLed, restarted");
    engines.get("e-0")!.kill("SIGKILL");
    await wait(at(0.25));
    engines.set("e-0", startEngine(ports.get("e-0")!));
    close();

    await wait(at(0.3));
    close = openFault("e-1", "e-1 hung");
    await simFault("e-1", { kind: "hang" });
    await wait(at(0.4));
    await simFault("e-1", { kind: "none" });
    close();

    await wait(at(0.45));
    close = openFault("e-2", "e-2 removed by a reload (drained), added back by another");
    await reloadAll("e-2");
    await wait(at(0.52));
    redisRestarts.push(elapsed());
    faultLog.push(`${(elapsed() / 1000).toFixed(0)} s: redis-server SIGKILLed and restarted (empty)`);
    await redis.restart();
    await wait(at(0.6));
    await reloadAll();
    close();

    await wait(at(0.7));
    close = openFault("e-3", "e-3 SIGKILLed, restarted");
    engines.get("e-3")!.kill("SIGKILL");
    await wait(at(0.78));
    engines.set("e-3", startEngine(ports.get("e-3")!));
    close();
  })();

  let counter = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (elapsed() < DURATION_MS) {
        const roll = random.next();
        const n = counter++;
        const agent = `agent-${random.int(20)}`;
        if (roll < 0.35) await session("chat", `chat-${n}`, agent, 6);
        else if (roll < 0.6) await session("messages", `messages-${n}`, agent, 6);
        else if (roll < 0.8) await chain(5);
        else {
          // A sub-agent burst: the parent's turn, then four sub-agents at once, then the parent again.
          await session("chat", `parent-${n}`, agent, 1);
          await Promise.all(
            Array.from({ length: 4 }, (_, i) =>
              session(i % 2 === 0 ? "chat" : "messages", `parent-${n}/sub-${i}`, agent, 2),
            ),
          );
          await session("chat", `parent-${n}`, agent, 1);
        }
      }
    }),
  );
  await faults;

  const scraped = await Promise.all(replicas.map((r) => fetch(`${r.url}/metrics`).then((res) => res.text())));
  const memory = scraped.map((text) => metricValue(text, "process_resident_memory_bytes") / 2 ** 20);
  const storeErrors = scraped.map((text) => metricValue(text, "agentserve_binding_store_errors_total"));
  await Promise.all(pools.map((p) => p.close()));
  for (const r of replicas) r.process.kill("SIGTERM");
  await Promise.all(replicas.map((r) => new Promise((resolve) => r.process.once("exit", resolve))));
  for (const engine of engines.values()) engine.kill("SIGTERM");
  await redis.stop();
  await rm(dir, { recursive: true, force: true });

  const failures = [...tally.failures].sort((a, b) => b[1] - a[1]);
  const { affinity, chains } = tally;
  const outsideForced = affinity.turns - affinity.forced;
  console.log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? "?"}, node ${process.version}`);
  console.log(
    `command: node --import tsx bench/soak/replicas.ts --seconds ${values.seconds} --concurrency ${CONCURRENCY}`,
  );
  console.log("");
  console.log("| requests | succeeded | failed | chat | Messages | Responses |");
  console.log("| --- | --- | --- | --- | --- | --- |");
  const api = (name: string): string => {
    const entry = tally.byApi.get(name) ?? { requests: 0, ok: 0 };
    return `${entry.ok}/${entry.requests}`;
  };
  console.log(
    `| ${tally.requests} | ${tally.ok} | ${tally.requests - tally.ok} | ${api("chat")} | ${api("messages")} | ${api("responses")} |`,
  );
  console.log("");
  console.log("failures by cause:");
  for (const [cause, count] of failures) console.log(`- ${cause}: ${count}`);
  if (failures.length === 0) console.log("- none");
  console.log("");
  console.log(
    `affinity: ${affinity.same}/${affinity.turns} turns on their previous turn's engine; ${affinity.forced} forced moves ` +
      `(the previous engine was faulted or removed); ${affinity.redis} moves within ${REDIS_WINDOW_MS / 1000} s of the ` +
      `Redis restart; outside forced moves ${affinity.same}/${outsideForced} ` +
      `(${((100 * affinity.same) / Math.max(1, outsideForced)).toFixed(1)}%)`,
  );
  console.log(`Responses chain turns answered: ${chains.answered}/${chains.turns}`);
  console.log(`faults: ${faultLog.join("; ")}`);
  console.log(`failures at (s): ${failureTimes.join(", ") || "none"}`);
  console.log(`binding store errors (timeouts, outage) per replica: ${storeErrors.join(", ")}`);
  console.log(`replicas' RSS at the end: ${memory.map((m) => `${m.toFixed(0)} MB`).join(", ")}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
