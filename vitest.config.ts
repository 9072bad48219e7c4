import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Property tests on a fixed seed (FC_SEED overrides it): see the file.
    setupFiles: ["test/helpers/fast-check-seed.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
