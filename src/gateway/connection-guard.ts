// Keeps room for new clients under a connection flood: idle client sockets are closed first, oldest first.
import type { Server } from "node:http";
import type { Socket } from "node:net";

/** Reclaiming starts when open connections reach this share of the cap, and frees down to the lower one. */
const HIGH_WATER = 0.9;
const LOW_WATER = 0.8;

/**
 * A socket is idle while no request of it is being answered: a connection that never sent a byte, one still
 * sending its headers, or a kept-alive one between requests. Under a flood of such sockets, node's own
 * maxConnections would refuse every newcomer (health checks and the admin API included) until the header
 * timeouts run out; closing the oldest idle sockets instead lets new clients in.
 */
/** What the guard keeps of a socket it watches, on the socket itself (no map to hash it into per request). */
interface Watched {
  /** Requests of it being answered now. */
  busy: number;
  /** When it last became idle (connected, or its last request ended), as a count: lower is longer idle. */
  idleSince: number;
}

const WATCHED = Symbol("connection-guard");
type WatchedSocket = Socket & { [WATCHED]?: Watched };

export class ConnectionGuard {
  /** Every socket open on the server. */
  private readonly sockets = new Set<WatchedSocket>();
  /** Advances each time a socket becomes idle: the idle order, oldest first. */
  private idleCount = 0;
  private reclaimedCount = 0;

  constructor(
    private readonly server: Server,
    private limit: number,
  ) {
    server.maxConnections = limit;
    server.on("connection", (socket: Socket) => this.onConnection(socket));
  }

  /** Open connections the gateway holds now. */
  get open(): number {
    return this.sockets.size;
  }

  /** Idle sockets closed to make room, since start. */
  get reclaimed(): number {
    return this.reclaimedCount;
  }

  setLimit(limit: number): void {
    this.limit = limit;
    this.server.maxConnections = limit;
  }

  private onConnection(socket: WatchedSocket): void {
    socket[WATCHED] = { busy: 0, idleSince: this.idleCount++ };
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    if (this.open >= Math.ceil(this.limit * HIGH_WATER)) this.reclaim(socket);
  }

  /** A request of the socket began (server.ts calls it and requestEnded: no listeners per request). */
  requestStarted(socket: WatchedSocket): void {
    const watched = socket[WATCHED];
    if (watched !== undefined) watched.busy++;
  }

  /** Its response closed. */
  requestEnded(socket: WatchedSocket): void {
    const watched = socket[WATCHED];
    if (watched === undefined || watched.busy === 0) return;
    // The most recently active idle socket goes last.
    if (--watched.busy === 0) watched.idleSince = this.idleCount++;
  }

  /** Closes the oldest idle sockets (never the one that just arrived) down to the low-water mark. */
  private reclaim(newcomer: Socket): void {
    const target = Math.floor(this.limit * LOW_WATER);
    const idle = [...this.sockets].filter((s) => s !== newcomer && !s.destroyed && s[WATCHED]!.busy === 0);
    idle.sort((a, b) => a[WATCHED]!.idleSince - b[WATCHED]!.idleSince);
    for (const socket of idle) {
      if (this.open <= target) break;
      this.sockets.delete(socket);
      this.reclaimedCount++;
      socket.destroy();
    }
  }
}
