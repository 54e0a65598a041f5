/**
 * A request that urlflow refused or could not serve. For a refused proxy call, reason says
 * what the user must do: "not_stored", "locked", "reconnect", "unopenable" or "incomplete"
 * (ask them again: create an elicitation), or "carried" (the request carried the
 * credential: never send it, urlflow adds it).
 */
export class UrlflowError extends Error {
  readonly status: number;
  readonly reason: string | undefined;

  constructor(status: number, message: string, reason?: string) {
    super(reason ? `urlflow: ${status} ${message} (${reason})` : `urlflow: ${status} ${message}`);
    this.name = "UrlflowError";
    this.status = status;
    this.reason = reason;
  }
}
