// A network namespace with loopback only (unshare -n) and child processes started inside it (nsenter).
import { spawn, type ChildProcess } from "node:child_process";
import { rootNamespaceUnavailable } from "../helpers/namespace-availability.js";

/** How long a process of the rig may run before it is killed (its whole process group). */
export const DEFAULT_CHILD_TIMEOUT_MS = 180_000;
const OUTPUT_KEPT_CHARS = 256 * 1024;

/** Process groups still running; killed if the test process exits without closing its rig (a crash, a kill). */
const liveGroups = new Set<number>();
process.once("exit", () => {
  for (const pgid of liveGroups) killGroup(pgid);
});

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // the group is already gone
  }
}

export interface NsExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when the rig killed it for running past its timeout. */
  timedOut: boolean;
}

export interface NsProcess {
  readonly child: ChildProcess;
  /** Everything it printed so far (stdout and stderr, the last 256 KiB). */
  output(): string;
  /** Only its stdout (the gateway's JSON log lines), the last 256 KiB. */
  stdout(): string;
  /** Resolves with the first match in its output; rejects if it exits first. */
  waitForLine(pattern: RegExp): Promise<RegExpMatchArray>;
  readonly exited: Promise<NsExit>;
  /** SIGKILL to its whole process group (the CLIs start shells and helper binaries). */
  kill(): void;
  /** Sends `signal` to the process itself (e.g. SIGTERM: the gateway drains and writes its last log lines). */
  signal(signal: NodeJS.Signals): void;
}

export interface SpawnOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs?: number;
}

export interface Netns {
  /** The pid whose /proc/PID/ns/net every child joins. */
  readonly holderPid: number;
  spawn(command: string, args: string[], options?: SpawnOptions): NsProcess;
  /** Kills every process started in it, then the namespace's holder (the namespace goes with it). */
  close(): Promise<void>;
}

/** Why the rig cannot run here, or undefined (outside CI its tests skip then: test/helpers/network-namespace.ts). */
export const netnsUnavailable = rootNamespaceUnavailable;

/** Starts the namespace: a holder process inside it that lives until its stdin closes. */
export async function startNetns(): Promise<Netns> {
  const why = netnsUnavailable();
  if (why !== undefined) throw new Error(`cannot run the coding-agent tests: ${why}`);
  // `cat` holds the namespace open and exits when the test process's end of the pipe closes, even when
  // vitest itself is killed, so no namespace outlives its test.
  const holder = spawn(
    "unshare",
    ["-n", "--", "sh", "-c", "ip link set lo up && echo netns-ready && exec cat"],
    {
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  const ready = await new Promise<boolean>((resolve) => {
    let text = "";
    holder.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      text += chunk;
      if (text.includes("netns-ready")) resolve(true);
    });
    holder.stderr!.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
    holder.once("exit", () => resolve(false));
    holder.once("error", () => resolve(false));
  });
  if (!ready || holder.pid === undefined)
    throw new Error("unshare -n failed: no network namespace for the test");
  const holderPid = holder.pid;
  const children: NsProcess[] = [];

  return {
    holderPid,
    spawn(command, args, options = {}) {
      const proc = spawnGroup(
        "nsenter",
        [`--net=/proc/${holderPid}/ns/net`, "--", command, ...args],
        options,
      );
      children.push(proc);
      return proc;
    },
    async close() {
      for (const proc of children) proc.kill();
      await Promise.all(children.map((proc) => proc.exited));
      const gone = new Promise((resolve) => holder.once("exit", resolve));
      if (holder.exitCode === null && holder.signalCode === null) {
        holder.stdin!.end();
        holder.kill("SIGKILL");
        await gone;
      }
    },
  };
}

/** A child in its own process group, killed with the group at its timeout. */
function spawnGroup(command: string, args: string[], options: SpawnOptions): NsProcess {
  const child = spawn(command, args, {
    env: options.env ?? process.env,
    cwd: options.cwd,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let all = "";
  let out = "";
  let timedOut = false;
  const waiters: { pattern: RegExp; resolve: (m: RegExpMatchArray) => void; reject: (e: Error) => void }[] =
    [];
  if (child.pid !== undefined) liveGroups.add(child.pid);
  const kill = (): void => {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    killGroup(child.pid);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, options.timeoutMs ?? DEFAULT_CHILD_TIMEOUT_MS);
  const check = (): void => {
    for (const waiter of [...waiters]) {
      const match = all.match(waiter.pattern);
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
  };
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    out = (out + chunk).slice(-OUTPUT_KEPT_CHARS);
    all = (all + chunk).slice(-OUTPUT_KEPT_CHARS);
    check();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    all = (all + chunk).slice(-OUTPUT_KEPT_CHARS);
    check();
  });
  const exited = new Promise<NsExit>((resolve) => {
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    const finish = (): void => {
      clearTimeout(timer);
      for (const waiter of waiters.splice(0))
        waiter.reject(new Error(`${command} exited (${exit?.code ?? exit?.signal}):\n${all}`));
      resolve({ code: exit?.code ?? null, signal: exit?.signal ?? null, timedOut });
    };
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      // what the CLI left behind in its group (a shell a tool started) holds the pipes open: end it
      if (child.pid !== undefined) {
        killGroup(child.pid);
        liveGroups.delete(child.pid);
      }
    });
    // after "exit" and once the pipes are drained, so output() is complete
    child.once("close", finish);
    child.once("error", (err) => {
      all += `\n${err.message}`;
      finish();
    });
  });
  return {
    child,
    output: () => all,
    stdout: () => out,
    waitForLine: (pattern) =>
      new Promise((resolve, reject) => {
        const match = all.match(pattern);
        if (match) return resolve(match);
        if (child.exitCode !== null || child.signalCode !== null)
          return reject(new Error(`${command} exited:\n${all}`));
        waiters.push({ pattern, resolve, reject });
      }),
    exited,
    kill,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}
