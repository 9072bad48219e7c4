// A child process's link to the `agent-serve start` that spawned it: readiness goes up the IPC channel, and
// the channel closing (the parent ended, even by SIGKILL) tells the child to stop.

/** The message a child sends once it listens. */
export interface ReadyMessage {
  kind: "ready";
  url: string;
}

export function isReadyMessage(message: unknown): message is ReadyMessage {
  return (
    typeof message === "object" &&
    message !== null &&
    (message as { kind?: unknown }).kind === "ready" &&
    typeof (message as { url?: unknown }).url === "string"
  );
}

/** Spawned with an IPC channel (by `agent-serve start`): there is a parent to watch. */
export function hasParentLink(): boolean {
  return typeof process.send === "function";
}

/** Tells the parent this process listens at `url` (nothing without a parent). */
export function reportReady(url: string): void {
  const message: ReadyMessage = { kind: "ready", url };
  process.send?.(message);
}

/**
 * Resolves when the parent is gone. The kernel closes the channel's socket when the parent dies however it
 * dies, so this holds after a SIGKILL, where no signal handler of the parent could have stopped its children.
 * Never resolves without a parent.
 */
export function parentGone(): Promise<"parent gone"> {
  return new Promise((resolve) => {
    if (hasParentLink()) process.once("disconnect", () => resolve("parent gone"));
  });
}
