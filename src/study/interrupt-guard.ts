// Stops a study's child processes when the study itself is interrupted (SIGINT, SIGTERM), then lets it die.

/**
 * While installed, SIGINT or SIGTERM first runs every registered kill (synchronous: SIGKILL to a child,
 * nothing awaited), then removes the guard and raises the signal again, so the process ends as it would
 * have without the guard. Children started with pipes are not in a terminal's process group's reach when
 * the signal comes from `kill PID`, so without this a redis-server or gateway would outlive the study.
 */
export class InterruptGuard {
  private readonly kills = new Set<() => void>();
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    for (const kill of this.kills) {
      try {
        kill();
      } catch {
        // the others must still run
      }
    }
    this.dispose();
    process.kill(process.pid, signal);
  };

  constructor() {
    process.on("SIGINT", this.onSignal);
    process.on("SIGTERM", this.onSignal);
  }

  /** Registers a kill; the returned function unregisters it (after a graceful stop). */
  add(kill: () => void): () => void {
    this.kills.add(kill);
    return () => this.kills.delete(kill);
  }

  dispose(): void {
    process.off("SIGINT", this.onSignal);
    process.off("SIGTERM", this.onSignal);
    this.kills.clear();
  }
}
