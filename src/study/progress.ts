// What a running study says on stderr: a one-line progress bar on a terminal, plain lines otherwise (CI, pipes).
import type { EngineKind } from "./environment.js";

export interface Progress {
  start(label: string, total: number): void;
  tick(failed: boolean): void;
  done(): void;
}

export const silentProgress: Progress = { start() {}, tick() {}, done() {} };

/** Plain lines (not a TTY) at these fractions of a step: a log stays short and still shows the study moving. */
const PLAIN_STEPS = 4;

/** One line when a step starts, at each quarter of it, and when it ends (with the failures so far). */
export function plainProgress(write: (line: string) => void): Progress {
  let label = "";
  let total = 0;
  let count = 0;
  let failures = 0;
  let reported = 0;
  const status = (): string => `${count}/${total}${failures > 0 ? ` (${failures} failed)` : ""}`;
  return {
    start(nextLabel, nextTotal) {
      label = nextLabel;
      total = nextTotal;
      count = 0;
      failures = 0;
      reported = 0;
      write(`${label}: started, ${total} to go\n`);
    },
    tick(failed) {
      count++;
      if (failed) failures++;
      const step = total === 0 ? 0 : Math.floor((count / total) * PLAIN_STEPS);
      if (step > reported && count < total) {
        reported = step;
        write(`${label}: ${status()}\n`);
      }
    },
    done() {
      write(`${label}: done, ${status()}\n`);
    },
  };
}

export function terminalProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return plainProgress((line) => stream.write(line));
  let label = "";
  let total = 0;
  let count = 0;
  let failures = 0;
  const draw = (): void => {
    const width = 30;
    const filled = total === 0 ? 0 : Math.round((count / total) * width);
    const bar = "#".repeat(Math.min(width, filled)).padEnd(width, ".");
    stream.write(
      `\r${label.padEnd(24)} [${bar}] ${count}/${total}${failures > 0 ? ` (${failures} failed)` : ""}`,
    );
  };
  return {
    start(nextLabel, nextTotal) {
      label = nextLabel;
      total = nextTotal;
      count = 0;
      failures = 0;
      draw();
    },
    tick(failed) {
      count++;
      if (failed) failures++;
      draw();
    },
    done() {
      stream.write("\n");
    },
  };
}

export interface StudyOptions {
  seed: number;
  timeScale: number;
  /** Drive this running gateway instead of starting engines and a gateway here. */
  gatewayUrl?: string;
  /** Smaller counts, for the test suite. */
  quick: boolean;
  /** Engines the study starts (default simulated); only the affinity study runs on real ones. */
  engines?: EngineKind;
  /** Names this run: session ids carry it, so runs never share bindings on a long-lived gateway. */
  runId: string;
  /**
   * One system prompt for every session (an application's single agent) instead of one per session (each
   * session a task with its own instructions and context). Shared, a fresh session already finds its
   * system prompt cached on every engine, whatever the placement.
   */
  sharedSystemPrompt?: boolean;
  progress: Progress;
}
