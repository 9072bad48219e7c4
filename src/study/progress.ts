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

/** Where a step stands: what the plain lines and the bar show. */
interface StepState {
  label: string;
  total: number;
  count: number;
  failures: number;
}

/** A Progress that keeps the step's counts and shows them through `show` on each event. */
function stepProgress(show: {
  start(step: StepState): void;
  tick(step: StepState): void;
  done(step: StepState): void;
}): Progress {
  const step: StepState = { label: "", total: 0, count: 0, failures: 0 };
  return {
    start(label, total) {
      Object.assign(step, { label, total, count: 0, failures: 0 });
      show.start(step);
    },
    tick(failed) {
      step.count++;
      if (failed) step.failures++;
      show.tick(step);
    },
    done() {
      show.done(step);
    },
  };
}

function countText(step: StepState): string {
  return `${step.count}/${step.total}${step.failures > 0 ? ` (${step.failures} failed)` : ""}`;
}

/** One line when a step starts, at each quarter of it, and when it ends (with the failures so far). */
export function plainProgress(write: (line: string) => void): Progress {
  let reported = 0;
  return stepProgress({
    start(step) {
      reported = 0;
      write(`${step.label}: started, ${step.total} to go\n`);
    },
    tick(step) {
      const quarter = step.total === 0 ? 0 : Math.floor((step.count / step.total) * PLAIN_STEPS);
      if (quarter > reported && step.count < step.total) {
        reported = quarter;
        write(`${step.label}: ${countText(step)}\n`);
      }
    },
    done(step) {
      write(`${step.label}: done, ${countText(step)}\n`);
    },
  });
}

/** A bar redrawn in place on a terminal; plain lines when `stream` is not one. */
export function terminalProgress(stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return plainProgress((line) => stream.write(line));
  const draw = (step: StepState): void => {
    const width = 30;
    const filled = step.total === 0 ? 0 : Math.round((step.count / step.total) * width);
    const bar = "#".repeat(Math.min(width, filled)).padEnd(width, ".");
    stream.write(`\r${step.label.padEnd(24)} [${bar}] ${countText(step)}`);
  };
  return stepProgress({ start: draw, tick: draw, done: () => stream.write("\n") });
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
  /** Run only these of the study's conditions, by name (kvevents only): a condition rerun costs a minute, not eight. */
  conditions?: readonly string[];
  progress: Progress;
}
