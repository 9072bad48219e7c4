// `agent-serve study [NAME]`: runs a load study and writes its report under studies/results/<run-id>/.
import { parseArgs } from "node:util";
import { UsageError, type Command } from "../cli/command.js";
import { terminalProgress, type StudyOptions } from "./progress.js";
import { withReceiptTable } from "./receipt-table.js";
import { checkLine, markdownTable, writeRun } from "./report-writer.js";
import type { StudyResult } from "./result.js";
import { writeSeedSpread } from "./seed-spread.js";
import { STUDY_NAMES, type StudyName } from "./study-names.js";
import { runAffinityStudy } from "./studies/affinity.js";
import { runAgentsStudy } from "./studies/agents.js";
import { runFailureStudy } from "./studies/failure.js";
import { runFairnessStudy } from "./studies/fairness.js";
import { runHotspotStudy } from "./studies/hotspot.js";
import { runKvEventsStudy } from "./studies/kvevents.js";
import { runReplicasStudy } from "./studies/replicas.js";
import { runSaturationStudy } from "./studies/saturation.js";
import { runSessionlessStudy } from "./studies/sessionless.js";
import { runSessionsStudy } from "./studies/sessions.js";

interface StudyDefinition {
  run(options: StudyOptions): Promise<StudyResult>;
  /** Engine time per wall time when not given: each study sized to take about a minute. */
  defaultTimeScale: number;
}

/** Every study of STUDY_NAMES (the type makes the two lists agree), in the order `all` runs them. */
export const STUDIES: Record<StudyName, StudyDefinition> = {
  affinity: { run: runAffinityStudy, defaultTimeScale: 5 },
  saturation: { run: runSaturationStudy, defaultTimeScale: 10 },
  failure: { run: runFailureStudy, defaultTimeScale: 1 },
  sessions: { run: runSessionsStudy, defaultTimeScale: 8 },
  hotspot: { run: runHotspotStudy, defaultTimeScale: 10 },
  sessionless: { run: runSessionlessStudy, defaultTimeScale: 10 },
  replicas: { run: runReplicasStudy, defaultTimeScale: 10 },
  agents: { run: runAgentsStudy, defaultTimeScale: 10 },
  fairness: { run: runFairnessStudy, defaultTimeScale: 10 },
  kvevents: { run: runKvEventsStudy, defaultTimeScale: 10 },
};

const HELP = `usage: agent-serve study [NAME] [--gateway URL] [--engines sim|real] [--seed N] [--seeds N]
                         [--time-scale X] [--out DIR] [--quick] [--strict] [--conditions A,B]

Runs a load study and prints its verdict, tables and checks; writes summary.json, requests.csv,
report.md and SVG charts to DIR/<run-id>/. Without --gateway it starts its own simulated engines and
gateway in this process, fresh for every condition. Progress goes to stderr (a bar on a terminal,
a line per quarter of each condition otherwise). Exits 0 when the study ran, whatever it found: a goal
not met is a finding ('goal NOT met'), not an error; 1 when it could not run (2: bad usage).

studies:
  affinity     (default) the original's Study 2: affinity ON (12 x 6) vs OFF (72 fresh ids) vs TTL 0
  saturation   the original's Study 1: concurrency 1, 4, 8, 16 with 2-turn sessions, repeated
  failure      the original's Study 4: one engine killed and restarted under steady traffic
  sessions     long agent sessions: affinity vs least-in-flight, round-robin and random
  hotspot      placement under hot spots (uniform, Zipf + fan-out, mixed engines): round-robin,
               least-loaded, plain and bounded-load affinity, prefix placement, SGLang, llm-d
  sessionless  requests without session ids from N agent templates: the balancers, prefix
               placement plain and bounded, SGLang, llm-d
  replicas     three gateway processes sharing bindings in memory vs in Redis (a redis-server the study
               starts; redis-server must be on PATH) through a 503, an engine outage, a replica restart
  agents       coding-agent traffic (long growing sessions, sub-agent bursts): the client's own session
               signal vs prefix placement only vs least-loaded
  fairness     interactive agents beside sub-agent bursts on full engines: the flow scheduler's
               fifo, fair and least-attained (also with a per-agent cap) vs the interactive agents alone
  kvevents     coding-agent sessions of 100-200k tokens on engines whose KV caches hold a few of them:
               approximate vs KV-event-driven placement, with 1 and 3 gateway replicas (and 3 sharing a
               redis-server the study starts; redis-server must be on PATH)
  all          every study above, one after the other

flags:
      --gateway URL   drive this running gateway (real engines) instead; conditions that need a
                      different config or control of an engine are skipped (failure needs control)
      --engines KIND  engines started for each condition: sim (default), or real: llama.cpp on the CPU
                      ('agent-serve engine' with its generated model, node-llama-cpp needed), in
                      wall-clock time (time scale 1), with shorter replies; affinity only
      --seed N        workload seed (default 42): same seed, same prompts and session order
      --seeds N       run it N times, seeds N, N+1, ...; each run writes its own report, then
                      DIR/<name>-...-seeds<N>/spread.md gives min / median / max per condition,
                      TTFT over all seeds' calls pooled, and in how many seeds each check held
                      (default 1)
      --time-scale X  simulated engine time per wall time (default per study: affinity 5,
                      saturation 10, sessions 8, failure 1,
                      hotspot 10, sessionless 10, replicas 10, agents 10, fairness 10,
                      kvevents 10); latencies are reported in engine time
      --out DIR       where run directories go (default studies/results)
      --quick         small counts (a few seconds per study), for smoke tests
      --strict        exit 1 when any check or goal is not met (for CI that gates on a study)
      --conditions A,B
                      kvevents: run only these conditions, by name (e.g. roomy-r1-approximate); an
                      unknown name is refused with the list of names
      --shared-system-prompt
                      affinity and saturation: one system prompt for all sessions (as one agent
                      application) instead of one per session; then every engine soon holds it,
                      whatever the placement, and only the conversation history depends on affinity
  -h, --help          this text`;

/**
 * The exit code of studies that ran: 0, whatever they found (a goal not met is a finding, shown as such);
 * with --strict, 1 when any check or goal did not hold. A study that could not run never gets here (it threw).
 */
export function studyExitCode(results: readonly StudyResult[], strict: boolean): number {
  return strict && results.some((r) => r.checks.some((c) => !c.passed)) ? 1 : 0;
}

/** The command line that repeats one run: this study, this seed, the other flags as given. */
function reproduceCommand(argv: readonly string[], studyName: string, seed: number): string {
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--seed" || arg === "--seeds") i++;
    else if (!arg.startsWith("--seed=") && !arg.startsWith("--seeds=") && arg !== "all" && !(arg in STUDIES))
      rest.push(arg);
  }
  return ["agent-serve study", studyName, ...rest, "--seed", String(seed)].join(" ");
}

/** What the terminal shows of a finished run: the verdict first, two tables, every check, the report's path. */
export function studyOutcome(result: StudyResult, dir: string): string {
  const lines = [`\n# ${result.title}\n`];
  if (result.verdict !== undefined) lines.push(`Verdict: ${result.verdict}\n`);
  for (const table of result.tables.slice(0, 2)) lines.push(`${table.title}\n\n${markdownTable(table)}\n`);
  for (const check of result.checks) lines.push(checkLine(check));
  const unmet = result.checks.filter((c) => !c.passed).length;
  lines.push(
    "",
    unmet === 0
      ? `All ${result.checks.length} checks held.`
      : `${unmet} of ${result.checks.length} checks did not hold: findings of this run, not errors (--strict makes them exit 1).`,
    `report: ${dir}/report.md`,
    "",
  );
  return lines.join("\n");
}

function runId(name: string, seed: number, now: Date): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${name}-${stamp}-s${seed}`;
}

export const studyCommand: Command = {
  name: "study",
  help: HELP,
  async run(argv) {
    let parsed;
    try {
      parsed = parseArgs({
        args: argv,
        allowPositionals: true,
        options: {
          gateway: { type: "string" },
          engines: { type: "string", default: "sim" },
          seed: { type: "string", default: "42" },
          seeds: { type: "string", default: "1" },
          strict: { type: "boolean", default: false },
          "time-scale": { type: "string" },
          out: { type: "string", default: "studies/results" },
          quick: { type: "boolean", default: false },
          "shared-system-prompt": { type: "boolean", default: false },
          conditions: { type: "string" },
        },
      });
    } catch (err) {
      throw new UsageError(err instanceof Error ? err.message : String(err));
    }
    const { values, positionals } = parsed;
    if (positionals.length > 1) throw new UsageError("give at most one study name");
    const name = positionals[0] ?? "affinity";
    const isStudy = (n: string): n is StudyName => (STUDY_NAMES as readonly string[]).includes(n);
    if (name !== "all" && !isStudy(name))
      throw new UsageError(`unknown study '${name}' (the studies: ${STUDY_NAMES.join(", ")}, all)`);
    const names: readonly StudyName[] = name === "all" ? STUDY_NAMES : [name as StudyName];
    const seed = Number(values.seed);
    if (!Number.isInteger(seed) || seed < 0) throw new UsageError("--seed must be a non-negative integer");
    const seedCount = Number(values.seeds);
    if (!Number.isInteger(seedCount) || seedCount < 1 || seedCount > 100)
      throw new UsageError("--seeds must be an integer from 1 to 100");
    const timeScale = values["time-scale"] === undefined ? undefined : Number(values["time-scale"]);
    if (timeScale !== undefined && !(timeScale > 0))
      throw new UsageError("--time-scale must be a positive number");
    if (values.gateway !== undefined && !/^https?:\/\/[^/]+/.test(values.gateway)) {
      throw new UsageError("--gateway must be an http(s) URL");
    }
    const conditions = values.conditions?.split(",").filter((c) => c !== "");
    if (conditions !== undefined && !names.every((n) => n === "kvevents"))
      throw new UsageError("--conditions applies to the kvevents study only");
    const engines = values.engines;
    if (engines !== "sim" && engines !== "real") throw new UsageError("--engines must be sim or real");
    if (engines === "real") {
      if (values.gateway !== undefined)
        throw new UsageError("--engines real starts its own engines: drop --gateway");
      if (!names.every((n) => n === "affinity"))
        throw new UsageError("--engines real runs the affinity study only");
      if (timeScale !== undefined && timeScale !== 1)
        throw new UsageError("--engines real runs in wall-clock time: --time-scale must be 1 or left out");
    }

    const finished: StudyResult[] = [];
    for (const studyName of names) {
      const study = STUDIES[studyName];
      const runs: StudyResult[] = [];
      for (let i = 0; i < seedCount; i++) {
        const runSeed = seed + i;
        const startedAt = new Date();
        const id = runId(studyName, runSeed, startedAt);
        if (seedCount > 1) process.stderr.write(`${studyName}: seed ${runSeed} (${i + 1} of ${seedCount})\n`);
        // Every report shows engine reuse, tokens lost by cause and TTFT next to binding hits (route receipts).
        const result = withReceiptTable(
          await study.run({
            seed: runSeed,
            timeScale: engines === "real" ? 1 : (timeScale ?? study.defaultTimeScale),
            engines,
            quick: values.quick,
            sharedSystemPrompt: values["shared-system-prompt"],
            ...(conditions === undefined ? {} : { conditions }),
            runId: id,
            progress: terminalProgress(),
            ...(values.gateway === undefined ? {} : { gatewayUrl: values.gateway }),
          }),
        );
        const dir = await writeRun(values.out, result, {
          runId: id,
          command: reproduceCommand(argv, studyName, runSeed),
          startedAt,
          durationSeconds: (Date.now() - startedAt.getTime()) / 1000,
        });
        process.stdout.write(studyOutcome(result, dir));
        runs.push(result);
      }
      if (runs.length > 1) {
        const spread = await writeSeedSpread(values.out, runs, runId(studyName, seed, new Date()));
        process.stdout.write(spread.text);
      }
      finished.push(...runs);
    }
    return studyExitCode(finished, values.strict);
  },
};
