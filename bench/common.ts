// Shared by the benchmarks that run real processes: a free loopback port, and waiting for a URL to answer.
import { createServer } from "node:net";

/** A port the OS hands out now (for configs that must name a port before the process starts). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Polls `url` until it answers 2xx (at most 20 s). */
export async function waitHealthy(url: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${url} never answered`);
}
