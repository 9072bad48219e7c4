// The cancel reason of a request whose client disconnected (its own file: attempts and the server both test it).

export class ClientClosedError extends Error {
  override name = "ClientClosedError";
}
