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
export class ConnectionGuard {
  /** Insertion order is age: the first entries are the longest idle. */
  private readonly idle = new Set<Socket>();
  private readonly busy = new Map<Socket, number>();
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
    return this.idle.size + this.busy.size;
  }

  /** Idle sockets closed to make room, since start. */
  get reclaimed(): number {
    return this.reclaimedCount;
  }

  setLimit(limit: number): void {
    this.limit = limit;
    this.server.maxConnections = limit;
  }

  private onConnection(socket: Socket): void {
    this.idle.add(socket);
    socket.once("close", () => {
      this.idle.delete(socket);
      this.busy.delete(socket);
    });
    if (this.open >= Math.ceil(this.limit * HIGH_WATER)) this.reclaim(socket);
  }

  /** A request of the socket began (server.ts calls it and requestEnded: no listeners per request). */
  requestStarted(socket: Socket): void {
    if (this.idle.delete(socket) || this.busy.has(socket))
      this.busy.set(socket, (this.busy.get(socket) ?? 0) + 1);
  }

  /** Its response closed. */
  requestEnded(socket: Socket): void {
    const count = this.busy.get(socket);
    if (count === undefined) return;
    if (count > 1) this.busy.set(socket, count - 1);
    else if (!socket.destroyed) {
      this.busy.delete(socket);
      this.idle.add(socket); // re-added at the end: the most recently active idle socket goes last
    }
  }

  /** Closes the oldest idle sockets (never the one that just arrived) down to the low-water mark. */
  private reclaim(newcomer: Socket): void {
    const target = Math.floor(this.limit * LOW_WATER);
    for (const socket of this.idle) {
      if (this.open <= target) break;
      if (socket === newcomer) continue;
      this.idle.delete(socket);
      this.reclaimedCount++;
      socket.destroy();
    }
  }
}
