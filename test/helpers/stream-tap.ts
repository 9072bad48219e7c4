// Test fixture: a loopback HTTP proxy in front of one engine that records the answer text of the event streams it
// forwards and can cut one stream after a number of text events (the gateway then sees the engine break it).
//
// What it forwarded is exactly what the gateway got from that engine, so a test knows where a stream broke (the
// text the gateway holds and continues from) whether the tap cut it or the engine was killed behind it.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What one streamed answer brought through the tap. */
export interface TappedStream {
  /** The answer text of the whole events forwarded (chat deltas, completions text, Messages text deltas). */
  text: string;
  /** Forwarded events that carried answer text. */
  textEvents: number;
  /** The tap cut it, or the engine's side broke off before the stream's end. */
  broken: boolean;
}

export interface StreamTap {
  url: string;
  /** Streams forwarded, in order of their request. */
  readonly streams: readonly TappedStream[];
  /** The next stream is cut after this many text events (once). */
  cutNextAfter(textEvents: number): void;
  /**
   * Runs `action` as the next stream's `textEvents`-th text event goes by (once), e.g. to kill the engine behind
   * the tap at a known point of its answer, whatever the speed of the client downstream.
   */
  whenNextReaches(textEvents: number, action: () => void): void;
  close(): Promise<void>;
}

/** The answer text an SSE `data:` payload carries, for the three streaming APIs. */
function eventText(data: string): string {
  if (!data.startsWith("{")) return "";
  try {
    const event = JSON.parse(data) as {
      choices?: { delta?: { content?: unknown }; text?: unknown }[];
      delta?: { type?: unknown; text?: unknown };
    };
    const choice = event.choices?.[0];
    const text =
      choice?.delta?.content ?? choice?.text ?? (event.delta?.type === "text_delta" && event.delta.text);
    return typeof text === "string" ? text : "";
  } catch {
    return "";
  }
}

export async function startStreamTap(target: string): Promise<StreamTap> {
  const streams: TappedStream[] = [];
  const upstream = new URL(target);
  let cutAfter: number | undefined;
  let hook: { textEvents: number; action: () => void } | undefined;

  const relay = (req: IncomingMessage, res: ServerResponse): void => {
    let tapped: TappedStream | undefined;
    // The engine's side is gone (or the tap cuts it): what was written still reaches the gateway (the socket ends
    // after its queued bytes), then the connection closes without the stream's end.
    const breakOff = (): void => {
      if (tapped) tapped.broken = true;
      if (res.socket) res.socket.end();
      else res.destroy();
    };
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        const streamed = String(answer.headers["content-type"] ?? "").startsWith("text/event-stream");
        if (!streamed) {
          answer.pipe(res);
          return;
        }
        res.flushHeaders();
        const stream: TappedStream = { text: "", textEvents: 0, broken: false };
        tapped = stream;
        streams.push(stream);
        const cut = cutAfter;
        const reached = hook;
        cutAfter = undefined;
        hook = undefined;
        let pending = "";
        answer.setEncoding("utf8");
        answer.on("data", (chunk: string) => {
          pending += chunk;
          let end: number;
          // Whole events only, so that what the gateway got is exactly what is recorded.
          while ((end = pending.indexOf("\n\n")) >= 0) {
            const event = pending.slice(0, end + 2);
            pending = pending.slice(end + 2);
            const data = event
              .split("\n")
              .filter((line) => line.startsWith("data: "))
              .map((line) => line.slice("data: ".length))
              .join("\n");
            const text = eventText(data);
            stream.text += text;
            if (text !== "") stream.textEvents += 1;
            res.write(event);
            if (text !== "" && reached?.textEvents === stream.textEvents) reached.action();
            if (cut !== undefined && stream.textEvents >= cut) {
              answer.removeAllListeners("data");
              breakOff();
              answer.destroy();
              return;
            }
          }
        });
        answer.on("end", () => {
          if (!stream.broken) res.end();
        });
        answer.on("aborted", breakOff);
        answer.on("error", breakOff);
      },
    );
    forward.on("error", breakOff);
    res.on("close", () => forward.destroy());
    req.pipe(forward);
  };

  const server: Server = createServer(relay);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    streams,
    cutNextAfter: (textEvents) => void (cutAfter = textEvents),
    whenNextReaches: (textEvents, action) => void (hook = { textEvents, action }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
