// Test fixture: `agent-serve engine` processes (real llama.cpp on the CPU) on OS-assigned loopback ports.
//
// Where node-llama-cpp cannot load (no prebuilt binary for the platform) the engine exits 1 with its own message:
// the caller gets that message to skip with, except under CI=true, where it is a failure (CI must run them).
import { runCli, type CliProcess } from "./processes.js";

export interface RealEngineProcess {
  url: string;
  process: CliProcess;
}

/** Starts one engine; resolves with it, or with the reason it cannot run here. */
export async function spawnRealEngine(
  modelPath: string,
  servedModel: string,
  flags: string[] = [],
): Promise<RealEngineProcess | string> {
  const proc = runCli([
    "engine",
    "--port",
    "0",
    "--model",
    modelPath,
    "--served-model-name",
    servedModel,
    ...flags,
  ]);
  const listening = proc.waitForLine(/listening on (http:\/\/\S+)/).then((m) => m[1]!);
  const outcome = await Promise.race([listening, proc.exited]);
  if (typeof outcome === "string") return { url: outcome, process: proc };
  listening.catch(() => undefined);
  if (outcome.code === 1 && proc.output().includes("node-llama-cpp")) {
    if (process.env["CI"] === "true")
      throw new Error(`CI must run the real-engine tests, but: ${proc.output()}`);
    return proc.output().trim();
  }
  throw new Error(`engine exited (${outcome.code ?? outcome.signal}):\n${proc.output()}`);
}

/** A non-streamed answer with the token ids vLLM's return_token_ids adds to it. */
export interface AnswerIds {
  text: string;
  promptIds: number[];
  replyIds: number[];
}

/** A chat or completions answer straight from an engine, not streamed, with `return_token_ids: true`. */
export async function answerWithIds(
  engineUrl: string,
  api: "chat" | "completions",
  body: object,
): Promise<AnswerIds> {
  const path = api === "chat" ? "/v1/chat/completions" : "/v1/completions";
  const res = await fetch(`${engineUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: false, return_token_ids: true }),
  });
  if (res.status !== 200) throw new Error(`${engineUrl}${path}: ${res.status} ${await res.text()}`);
  const answer = (await res.json()) as {
    prompt_token_ids?: number[];
    choices: {
      message?: { content: string };
      text?: string;
      token_ids: number[];
      prompt_token_ids?: number[];
    }[];
  };
  const choice = answer.choices[0]!;
  return {
    text: choice.message?.content ?? choice.text ?? "",
    // Chat puts the prompt's ids on the response, completions on each choice (as vLLM does).
    promptIds: answer.prompt_token_ids ?? choice.prompt_token_ids ?? [],
    replyIds: choice.token_ids,
  };
}
