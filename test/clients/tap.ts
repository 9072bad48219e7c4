// A recording HTTP relay in front of one engine, so a test knows exactly what the engine said (ids, usage, calls).
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request that reached the engine, and the engine's whole answer. */
export interface Exchange {
  /** Which engine answered (the tap's label). */
  engine: string;
  method: string;
  path: string;
  requestBody: string;
  status: number;
  responseBody: string;
}

export interface EngineTap {
  /** Origin to use instead of the engine's. */
  readonly url: string;
  close(): Promise<void>;
}

function readAll(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    stream.on("data", (part: Buffer) => parts.push(part));
    stream.on("end", () => resolve(Buffer.concat(parts)));
    stream.on("error", reject);
  });
}

/**
 * Relays every request to `targetOrigin` and appends the exchange to `log` once the engine's answer has ended.
 * Bytes pass through as they arrive (streams stay streams); only the copy is buffered.
 */
export async function startEngineTap(
  engine: string,
  targetOrigin: string,
  log: Exchange[],
): Promise<EngineTap> {
  const target = new URL(targetOrigin);
  const server: Server = createServer((clientRequest, clientResponse) => {
    void (async () => {
      const requestBody = await readAll(clientRequest);
      const upstream = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: clientRequest.method,
          path: clientRequest.url,
          headers: { ...clientRequest.headers, host: target.host },
        },
        (engineResponse) => {
          clientResponse.writeHead(engineResponse.statusCode ?? 502, engineResponse.headers);
          const parts: Buffer[] = [];
          engineResponse.on("data", (part: Buffer) => {
            parts.push(part);
            clientResponse.write(part);
          });
          engineResponse.on("end", () => {
            log.push({
              engine,
              method: clientRequest.method ?? "",
              path: clientRequest.url ?? "",
              requestBody: requestBody.toString("utf8"),
              status: engineResponse.statusCode ?? 0,
              responseBody: Buffer.concat(parts).toString("utf8"),
            });
            clientResponse.end();
          });
        },
      );
      upstream.on("error", (err) => clientResponse.destroy(err));
      clientResponse.on("close", () => upstream.destroy());
      upstream.end(requestBody);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
