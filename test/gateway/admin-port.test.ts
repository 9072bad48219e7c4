// server.admin_port: /admin on a port of its own, and only there; the API's port no longer answers it.
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

const TOKEN = "admin-port-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

describe("server.admin_port", () => {
  let engine: ScriptedEngine;
  let gw: TestGateway;
  let admin: string;
  beforeAll(async () => {
    engine = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      server: { admin_token: TOKEN, admin_port: 0 },
    });
    admin = gw.gateway.adminUrl!;
  });
  afterAll(async () => {
    await gw.close();
    await engine.close();
  });

  it("serves /admin on its own port, with the admin token", async () => {
    expect(admin).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(admin).not.toBe(gw.url);
    const listed = await fetch(`${admin}/admin/backends`, { headers: auth });
    expect(listed.status).toBe(200);
    expect(JSON.stringify(await listed.json())).toContain('"only"');
    expect((await fetch(`${admin}/admin/backends`)).status).toBe(401);
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
  });

  it("the API's port no longer answers /admin, and the admin port answers nothing of the API", async () => {
    const onApi = await fetch(`${gw.url}/admin/backends`, { headers: auth });
    expect(onApi.status).toBe(404);
    expect(await onApi.json()).toMatchObject({ error: { code: "not_found" } });
    expect((await post(gw.url)).status).toBe(200);
    const apiOnAdmin = await post(admin);
    expect(apiOnAdmin.status).toBe(404);
    for (const path of ["/metrics", "/readyz", "/v1/models"])
      expect((await fetch(`${admin}${path}`)).status, path).toBe(404);
  });

  it("without admin_port, /admin stays on the API's port", async () => {
    const shared = await startGatewayFor([{ id: "only", url: engine.url }], {
      server: { admin_token: TOKEN },
    });
    try {
      expect(shared.gateway.adminUrl).toBeUndefined();
      expect((await fetch(`${shared.url}/admin/backends`, { headers: auth })).status).toBe(200);
    } finally {
      await shared.close();
    }
  });

  it("a taken admin port fails the start (the gateway closes what it opened)", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      await expect(
        startGatewayFor([{ id: "only", url: engine.url }], {
          server: { admin_token: TOKEN, admin_port: port },
        }),
      ).rejects.toMatchObject({ code: "EADDRINUSE" });
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
