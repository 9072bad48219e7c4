// Drives a scheduler on a manual clock with no timers: for tests, calibration and offline studies.
import { GatewayError } from "../core/errors.js";
import type { ManualClock } from "../core/clock.js";
import type { Scheduler, StepOutput, StepPlan } from "./scheduler.js";

/** Runs one step: plan, let its simulated time pass, commit. Undefined when the engine is idle. */
export function runStep(
  scheduler: Scheduler,
  clock: ManualClock,
): { plan: StepPlan; outputs: StepOutput[] } | undefined {
  const plan = scheduler.schedule();
  if (!plan) return undefined;
  clock.advance(plan.durationMs);
  return { plan, outputs: scheduler.commit(plan) };
}

/** Steps until nothing is left to compute; `onStep` sees every committed step. Returns the number of steps. */
export function runUntilIdle(
  scheduler: Scheduler,
  clock: ManualClock,
  onStep?: (plan: StepPlan, outputs: StepOutput[]) => void,
  maxSteps = 10_000_000,
): number {
  let steps = 0;
  while (steps < maxSteps) {
    const result = runStep(scheduler, clock);
    if (!result) return steps;
    steps += 1;
    onStep?.(result.plan, result.outputs);
  }
  throw new GatewayError("internal_error", `engine still busy after ${maxSteps} steps`);
}
