// The cancel reason of a request whose client disconnected (its own file: attempts and the server both test it).
import { GatewayError } from "../core/errors.js";

export class ClientClosedError extends GatewayError {
  override name = "ClientClosedError";
  constructor(message: string) {
    super("client_closed", message);
  }
}
