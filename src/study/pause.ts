// The studies' wait between a simulated user's steps (think time, arrival gaps): real time, since a study drives
// real processes; nothing to wait for returns at once.

/** Resolves after `ms` of real time; at once when `ms` is not positive. */
export function pause(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
