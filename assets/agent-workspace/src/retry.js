// Retries an async call with exponential backoff and full jitter; gives up after maxAttempts.
export async function retry(
  call,
  { maxAttempts = 4, baseMs = 100, capMs = 2000, random = Math.random } = {},
) {
  let lastError;
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    try {
      return await call(attempt);
    } catch (err) {
      lastError = err;
      const ceiling = Math.min(capMs, baseMs * 2 ** attempt);
      await new Promise((resolve) => setTimeout(resolve, random() * ceiling));
    }
  }
  throw lastError;
}
