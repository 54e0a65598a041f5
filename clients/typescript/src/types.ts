// The shapes of urlflow's delegation API (docs/openapi.yaml), as this package returns them.
// Fields urlflow adds in later versions are passed through untyped.

/** Where an elicitation stands. */
export type State =
  | "pending"
  | "consented"
  | "in_progress"
  | "failed"
  | "complete"
  | "declined"
  | "cancelled"
  | "expired"
  | "unknown";

/** The states in which an elicitation has ended. */
export const endedStates: readonly State[] = ["complete", "declined", "cancelled", "expired", "unknown"];

/** A secret slot's or a provider's credential: what a tool needs of its user. */
export interface Need {
  /** The slot, or the provider: one of the two. */
  slot?: string;
  provider?: string;
  /** Tells apart several accounts of one target (1 to 32 of a-z 0-9 _ -); none for the default. */
  label?: string;
  /** The access to ask of a provider (its defaults when absent). */
  scopes?: string[];
}

/** One elicitation of the service, as urlflow describes it (never a value). */
export interface Elicitation {
  id: string;
  state: State;
  kind: "secret" | "oauth";
  target: string;
  label?: string;
  service?: string;
  userRef?: string;
  /** The page to send the user to, while the flow runs. */
  url?: string;
  call?: string;
  metadata?: Record<string, string>;
  createdAt: string;
  updatedAt: string;
  expiresAt: string;
  [more: string]: unknown;
}

/** The answer of a create: what is stored, or the flow that asks the user. */
export interface CreateAnswer {
  status: "stored" | "user_action_required" | "ended";
  userRef?: string;
  elicitation?: Elicitation;
  credential?: Record<string, unknown>;
  /** For a 2026-07-28 client's input_required result. */
  requestState?: string;
  /** Whether urlflow created the elicitation (HTTP 201) or found it (200). */
  created: boolean;
}

/** How a credential the service holds stands (POST /credentials/status). */
export interface CredentialStatus {
  kind: "secret" | "oauth";
  target: string;
  label?: string;
  userRef: string;
  status: "stored" | "not_stored" | "locked" | "reconnect" | "unopenable" | "incomplete" | "missing_scopes";
  storedAt?: string;
  verifiedAt?: string;
  lastUsedAt?: string;
  refreshedAt?: string;
  account?: string;
  scopes?: string[];
  missingScopes?: string[];
  lockedAt?: string;
  lockReason?: string;
  releasable?: boolean;
  offline?: boolean;
  metadata?: Record<string, string>;
  /** What the user entered with a secret for its slot's address. */
  parameters?: Record<string, string>;
  [more: string]: unknown;
}

/** A page of the service's credentials (GET /credentials). */
export interface CredentialList {
  credentials: CredentialStatus[];
  /** The cursor of the next page; absent at the end. */
  next?: string;
}

/** What the deletion of one credential did. */
export interface Deletion {
  kind: "secret" | "oauth";
  target: string;
  label?: string;
  userRef?: string;
  deleted: boolean;
  revocation?: "revoked" | "unsupported" | "failed";
}

/** A request through urlflow's proxy, with the user's credential injected by urlflow. */
export interface ProxyRequest {
  method: string;
  /** Under the API's base URL, which no call leaves. */
  path: string;
  /** Parameters, a list for one repeated. */
  query?: Record<string, string | string[]>;
  /** Your own headers (not the connection's, nor the credential's). */
  headers?: Record<string, string>;
  /** Text, or bytes (sent in base64). */
  body?: string | Uint8Array;
  contentType?: string;
  /** For GET, HEAD, PUT and DELETE: times to send again on 429, 502, 503, 504 (at most 3). */
  retries?: number;
  /** Response headers to return besides the API's own, within its allow-list. */
  responseHeaders?: string[];
}

/** The API's answer through the proxy, the credential redacted. */
export interface ProxyResponse {
  status: number;
  headers: Record<string, string>;
  /** The body as text, or base64 when bodyEncoding says so. */
  body: string;
  bodyEncoding: "text" | "base64";
  convertedFrom?: string;
  redirected?: string;
  attempts?: number;
}

/** A change of state of one of the service's elicitations (the data of an "elicitation" event). */
export interface ElicitationChange {
  /** "created", or the event of the change ("client_accept", "verified", "cancel", ...). */
  event: string;
  from?: State;
  to: State;
  at: string;
  elicitation: Elicitation;
}

/** A change of a credential the service holds (event stream "credential", webhooks credential.*). */
export interface CredentialEvent {
  type:
    | "credential.stored"
    | "credential.replaced"
    | "credential.deleted"
    | "credential.locked"
    | "credential.reconnect_required"
    | "credential.released"
    | "credential.offline_withdrawn";
  at: string;
  service: string;
  kind: "secret" | "oauth";
  target: string;
  label?: string;
  userRef: string;
  actor: string;
  reason?: string;
  call?: string;
  metadata?: Record<string, string>;
  [more: string]: unknown;
}

/**
 * What the event stream yields, each with its position (id). Other types, which later
 * versions of urlflow may send, are skipped. After a "reset", events were lost: read the
 * state of your running elicitations again.
 */
export type StreamEvent =
  | { type: "elicitation"; id: string; data: ElicitationChange }
  | { type: "credential"; id: string; data: CredentialEvent }
  | { type: "reset"; id: string };
