// `agent-serve agent`: a fleet of tool-using agents against a gateway, with a live view and a report.
import { parseArgs } from "node:util";
import { UsageError, type Command } from "../cli/command.js";
import { DEFAULT_CONFIG_PATH, loadOrReport } from "../cli/gateway-command.js";
import { markdownTable, writeRun } from "../study/report-writer.js";
import { runAgentDemo } from "./agent-run.js";
import { liveView } from "./live-view.js";

const HELP = `usage: agent-serve agent [--agents N] [--turns N] [--gateway URL] [flags]

Runs N agents at once, each a tool-using loop over the openai SDK with its own X-Session-Id: per user
turn it calls the model, runs the tools the model asks for, hands back their results and calls the model
again, until a text answer. Tools: read_file (the bundled workspace), search_corpus (full-text index of
the bundled articles), calculator, run_javascript (QuickJS in WebAssembly); see docs/agent.md for their
limits. A live view shows each agent's engine, affinity, TTFT, cached tokens and tool calls; at the end a
summary (hit rate, warm vs cold TTFT, cached share, tool calls) is printed and written to
DIR/<run-id>/ (report.md, summary.json, requests.csv). Exits 1 when one of the summary's checks fails.

Without --gateway it starts the config's simulated engines and a gateway in this process, on ports the
OS picks, and stops them at the end.

flags:
      --agents N        concurrent agents, one session each (default 4)
      --turns N         user turns per agent (default 8)
      --gateway URL     drive this running gateway (real engines, or 'npm start') instead
  -c, --config FILE     config of the embedded demo (default ${DEFAULT_CONFIG_PATH})
      --time-scale X    embedded demo: simulated engine time per wall time (default the config's);
                        TTFT is reported in engine time
      --tier TIER       X-Tier-Hint of every request (default small); 'auto' lets the gateway's rules
                        choose, which may move a growing conversation to another tier
      --model NAME      model field of every request (default auto)
      --max-steps N     model calls per user turn; the last is told to answer without tools (default 6)
      --max-tokens N    max_tokens of every model call (default 256)
      --timeout-seconds N  per model call (default 120)
      --api-key KEY     bearer key for a gateway with client keys (default $AGENT_SERVE_API_KEY)
      --seed N          recorded in the report; names the embedded demo's sessions, so the same seed
                        gives the same placement (default 42)
      --out DIR         where run directories go (default studies/results)
  -h, --help            this text`;

function positiveInt(value: string, flag: string, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new UsageError(`${flag} must be an integer from 1 to ${max}`);
  return n;
}

function runId(seed: number, now: Date): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `agent-${stamp}-s${seed}`;
}

export const agentCommand: Command = {
  name: "agent",
  help: HELP,
  async run(argv) {
    let values;
    try {
      ({ values } = parseArgs({
        args: argv,
        options: {
          agents: { type: "string", default: "4" },
          turns: { type: "string", default: "8" },
          gateway: { type: "string" },
          config: { type: "string", short: "c", default: DEFAULT_CONFIG_PATH },
          "time-scale": { type: "string" },
          tier: { type: "string", default: "small" },
          model: { type: "string", default: "auto" },
          "max-steps": { type: "string", default: "6" },
          "max-tokens": { type: "string", default: "256" },
          "timeout-seconds": { type: "string", default: "120" },
          "api-key": { type: "string" },
          seed: { type: "string", default: "42" },
          out: { type: "string", default: "studies/results" },
        },
      }));
    } catch (err) {
      throw new UsageError(err instanceof Error ? err.message : String(err));
    }
    const agents = positiveInt(values.agents, "--agents", 256);
    const turns = positiveInt(values.turns, "--turns", 1000);
    const maxSteps = positiveInt(values["max-steps"], "--max-steps", 50);
    const maxTokens = positiveInt(values["max-tokens"], "--max-tokens", 32768);
    const timeoutSeconds = positiveInt(values["timeout-seconds"], "--timeout-seconds", 3600);
    const seed = Number(values.seed);
    if (!Number.isInteger(seed) || seed < 0) throw new UsageError("--seed must be a non-negative integer");
    const timeScale = values["time-scale"] === undefined ? undefined : Number(values["time-scale"]);
    if (timeScale !== undefined && !(timeScale > 0))
      throw new UsageError("--time-scale must be a positive number");
    if (values.gateway !== undefined && !/^https?:\/\/[^/]+/.test(values.gateway))
      throw new UsageError("--gateway must be an http(s) URL");
    if (values.gateway !== undefined && timeScale !== undefined)
      throw new UsageError("--time-scale applies to the embedded demo only: drop it with --gateway");

    const config = values.gateway === undefined ? await loadOrReport(values.config) : undefined;
    if (values.gateway === undefined && config === undefined) return 2;
    const startedAt = new Date();
    const id = runId(seed, startedAt);
    const stdout = process.stdout;
    const { result } = await runAgentDemo({
      agents,
      turns,
      maxSteps,
      maxTokens,
      ...(values.gateway === undefined ? {} : { gatewayUrl: values.gateway }),
      ...(config === undefined ? {} : { config }),
      ...(timeScale === undefined ? {} : { timeScale }),
      model: values.model,
      tierHint: values.tier === "" ? undefined : values.tier,
      apiKey: values["api-key"] ?? process.env["AGENT_SERVE_API_KEY"] ?? "agent-serve-demo",
      requestTimeoutMs: timeoutSeconds * 1000,
      seed,
      // Session ids name the run: fixed for a fresh embedded demo (same seed, same placement, reproducible);
      // with the timestamp on a long-lived gateway, so a rerun never finds the last run's bindings.
      runId: values.gateway === undefined ? `agent-s${seed}` : id,
      view: (scale) =>
        liveView({
          agents,
          turns,
          timeScale: scale,
          tty: stdout.isTTY === true,
          write: (t) => stdout.write(t),
        }),
    });
    const dir = await writeRun(values.out, result, {
      runId: id,
      command: `agent-serve agent ${argv.join(" ")}`.trim(),
      startedAt,
      durationSeconds: (Date.now() - startedAt.getTime()) / 1000,
    });
    stdout.write(`\n# ${result.title}\n\n`);
    for (const table of result.tables) stdout.write(`${table.title}\n\n${markdownTable(table)}\n\n`);
    for (const check of result.checks)
      stdout.write(`${check.passed ? "PASS" : "FAIL"}  ${check.claim}: ${check.detail}\n`);
    stdout.write(`\nreport: ${dir}/report.md\n`);
    return result.checks.every((check) => check.passed) ? 0 : 1;
  },
};
