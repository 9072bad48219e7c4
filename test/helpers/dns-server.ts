// Test fixture: a DNS server on a loopback UDP port (the dns2 package) answering from records a test changes.
import { createRequire } from "node:module";

interface DnsQuestion {
  name: string;
  type: number;
}
interface DnsPacket {
  questions: DnsQuestion[];
  answers: Record<string, unknown>[];
  header: { rcode: number };
}
interface Dns2Module {
  UDPServer: new (handler: (request: DnsPacket, send: (response: DnsPacket) => Promise<unknown>) => void) => {
    listen(port: number, address: string): Promise<void>;
    address(): { port: number };
    close(callback?: () => void): void;
  };
  Packet: {
    TYPE: Record<"A" | "AAAA" | "SRV", number>;
    CLASS: { IN: number };
    createResponseFromRequest(request: DnsPacket): DnsPacket;
  };
}

// dns2 ships CommonJS without type declarations: loaded through require and typed by the interface above.
const dns2 = createRequire(import.meta.url)("dns2") as Dns2Module;

export interface SrvRecord {
  target: string;
  port: number;
}

export interface LoopbackDns {
  /** `127.0.0.1:PORT`, for a resolver's setServers() or a discovery entry's `servers`. */
  readonly server: string;
  /** The SRV records served for `name` from now on (TTL 0, so nothing caches them). */
  setSrv(name: string, records: readonly SrvRecord[]): void;
  /** Questions answered so far. */
  readonly queries: number;
  close(): Promise<void>;
}

export async function startLoopbackDns(): Promise<LoopbackDns> {
  const srv = new Map<string, readonly SrvRecord[]>();
  let queries = 0;
  const server = new dns2.UDPServer((request, send) => {
    const response = dns2.Packet.createResponseFromRequest(request);
    const question = request.questions[0];
    queries++;
    const records = question === undefined ? undefined : srv.get(question.name.toLowerCase());
    if (question !== undefined && question.type === dns2.Packet.TYPE.SRV && records !== undefined) {
      for (const record of records) {
        response.answers.push({
          name: question.name,
          type: dns2.Packet.TYPE.SRV,
          class: dns2.Packet.CLASS.IN,
          ttl: 0,
          priority: 0,
          weight: 1,
          port: record.port,
          target: record.target,
        });
      }
    } else {
      response.header.rcode = 3; // NXDOMAIN
    }
    void send(response);
  });
  await server.listen(0, "127.0.0.1");
  return {
    server: `127.0.0.1:${server.address().port}`,
    setSrv: (name, records) => srv.set(name.toLowerCase(), records),
    get queries() {
      return queries;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
