# The agent-serve gateway image: a build stage compiles the TypeScript, a slim runtime stage runs it as a non-root user.
# Build:  docker build -t agent-serve:0.1.0 .
# Try:    docker run --rm -p 127.0.0.1:8000:8000 agent-serve:0.1.0 start --config configs/container.yaml
#         (the gateway and three simulated engines in this one container; docs/deployment.md)
# Run:    docker run -p 8000:8000 -e AGENT_SERVE_API_KEYS=<sha256> -v $PWD/my-gateway.yaml:/etc/agent-serve/gateway.yaml:ro agent-serve:0.1.0
#         (engines at addresses the container can reach: not 127.0.0.1, which is the container's own; off loopback
#         the gateway needs client keys or server.allow_open: true)
# Other commands: docker run agent-serve:0.1.0 sim --host 0.0.0.0 --port 8001 (the entrypoint is the CLI);
#         docker run --rm agent-serve:0.1.0 agent --agents 2 --turns 2 (the demo agent fleet, in the container).

# ---- build: every dependency but the optional llama.cpp engine, then tsc ----------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the package's own `prepare` (the build) runs below, once the sources are here.
RUN npm ci --omit=optional --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies and the compiled code only -------------------------------------
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# No dev dependencies (no tsc, so no `prepare`), no optional ones: node-llama-cpp serves `agent-serve
# engine`, never the gateway. test/deploy/dockerfile.test.ts checks that nothing the gateway imports is
# left out by this line.
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The configs (the container quick start's, the demo's that `agent` and `start` read by default) and the
# agent fleet's workspace and corpus: every command the image documents runs (docs/deployment.md).
COPY configs ./configs
COPY assets ./assets
# Where `study` and `agent` write their reports by default, writable by the user below.
RUN mkdir -p studies/results && chown 1000:1000 studies/results
# The node image's `node` user, by number: Kubernetes' runAsNonRoot can only verify a numeric user.
USER 1000:1000
EXPOSE 8000
# Docker's own check (Kubernetes uses the Deployment's probes instead). The slim image has no curl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.AGENT_SERVE_PORT || 8000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["gateway", "--config", "/etc/agent-serve/gateway.yaml"]
