// One run of the demo fleet: the target gateway (embedded or given), the tools, the agents, the summary.
import { GatewayError } from "../core/errors.js";
import type { GatewayConfig } from "../config/schema.js";
import type { StudyResult } from "../study/result.js";
import { defaultTools } from "./default-tools.js";
import { startEmbeddedDemo } from "./embedded-demo.js";
import { runFleet, sessionModel, type AgentRun, type FleetEvents } from "./fleet.js";
import { summarize } from "./summary.js";
import { Toolbox } from "./toolbox.js";

export interface AgentRunOptions {
  agents: number;
  turns: number;
  maxSteps: number;
  maxTokens: number;
  /** A running gateway; without it the config's simulated engines and a gateway start in this process. */
  gatewayUrl?: string;
  /** The config the embedded demo runs (ignored with gatewayUrl). */
  config?: GatewayConfig;
  timeScale?: number;
  model: string;
  tierHint: string | undefined;
  apiKey: string;
  requestTimeoutMs: number;
  seed: number;
  runId: string;
  /** Builds the live view once the time scale is known. */
  view(timeScale: number): FleetEvents & { finish(): void };
}

export async function runAgentDemo(
  options: AgentRunOptions,
): Promise<{ result: StudyResult; runs: AgentRun[] }> {
  if (options.gatewayUrl === undefined && options.config === undefined)
    throw new GatewayError(
      "usage_error",
      "runAgentDemo needs a gateway URL or a config for the embedded demo",
    );
  const demo =
    options.gatewayUrl === undefined
      ? await startEmbeddedDemo(
          options.config!,
          options.timeScale === undefined ? {} : { timeScale: options.timeScale },
        )
      : undefined;
  try {
    const baseUrl = demo?.url ?? options.gatewayUrl!;
    const timeScale = demo?.timeScale ?? 1;
    const toolbox = new Toolbox(await defaultTools());
    try {
      const view = options.view(timeScale);
      const nowMs = (): number => performance.now();
      const runs = await runFleet({
        agents: options.agents,
        turns: options.turns,
        maxSteps: options.maxSteps,
        toolbox,
        runId: options.runId,
        events: view,
        modelFor: (sessionId) =>
          sessionModel(
            {
              baseUrl,
              apiKey: options.apiKey,
              model: options.model,
              tierHint: options.tierHint,
              maxTokens: options.maxTokens,
              timeoutMs: options.requestTimeoutMs,
              nowMs,
            },
            sessionId,
          ),
      });
      view.finish();
      const result = summarize({
        runs,
        toolNames: toolbox.tools.map((tool) => tool.name),
        timeScale,
        seed: options.seed,
        maxSteps: options.maxSteps,
        configs: [demo?.config ?? { gateway: options.gatewayUrl }],
      });
      return { result, runs };
    } finally {
      await toolbox.close();
    }
  } finally {
    await demo?.close();
  }
}
