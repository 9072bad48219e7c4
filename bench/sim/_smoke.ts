import { startSimEngine } from "/work/main/src/sim/index.js";
const h = await startSimEngine({ profile: "qwen2.5-7b", timeScale: 10 });
console.log(h.url);
const body = { model: h.model, messages: [{ role: "user", content: "hello there" }], max_tokens: 8 };
let r = await fetch(h.url + "/v1/chat/completions", {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
console.log(r.status, await r.text());
r = await fetch(h.url + "/v1/chat/completions", {
  method: "POST",
  body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
});
console.log(r.status, r.headers.get("content-type"), await r.text());
r = await fetch(h.url + "/v1/completions", {
  method: "POST",
  body: JSON.stringify({ prompt: "abc", max_tokens: 3, stream: true }),
});
console.log(await r.text());
r = await fetch(h.url + "/v1/chat/completions", { method: "POST", body: "{bad" });
console.log(r.status, await r.text());
r = await fetch(h.url + "/v1/chat/completions", {
  method: "POST",
  body: JSON.stringify({ model: "x", messages: [] }),
});
console.log(r.status, await r.text());
r = await fetch(h.url + "/v1/chat/completions", {
  method: "POST",
  body: JSON.stringify({ model: "x", messages: [{ role: "user", content: "a" }] }),
});
console.log(r.status, await r.text());
r = await fetch(h.url + "/v1/models");
console.log(await r.text());
r = await fetch(h.url + "/metrics");
console.log(
  (await r.text())
    .split("\n")
    .filter((l) => l.startsWith("vllm:") && !l.includes("bucket"))
    .join("\n"),
);
console.log(h.stats());
await h.close();
