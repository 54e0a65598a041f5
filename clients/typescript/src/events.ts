import type { CredentialEvent, ElicitationChange, StreamEvent } from "./types.js";

/** One event of a text/event-stream, as the HTML standard's parser reads it. */
export interface RawEvent {
  id: string;
  event: string;
  data: string;
}

/**
 * Reads urlflow's event stream: the events it knows (elicitation, credential, reset), in
 * order; comments, events of other types (a later urlflow may add some) and data that is
 * not JSON are skipped.
 */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamEvent> {
  for await (const raw of parseEventStream(body)) {
    const ev = streamEvent(raw);
    if (ev) yield ev;
  }
}

/** The StreamEvent of raw, or undefined for one this package does not know. */
export function streamEvent(raw: RawEvent): StreamEvent | undefined {
  if (raw.event === "reset") return { type: "reset", id: raw.id };
  if (raw.event !== "elicitation" && raw.event !== "credential") return undefined;
  let data: unknown;
  try {
    data = JSON.parse(raw.data);
  } catch {
    return undefined;
  }
  if (typeof data !== "object" || data === null) return undefined;
  return raw.event === "elicitation"
    ? { type: "elicitation", id: raw.id, data: data as ElicitationChange }
    : { type: "credential", id: raw.id, data: data as CredentialEvent };
}

/** Parses a text/event-stream into its events (the last id carries over, as the standard says). */
export async function* parseEventStream(body: ReadableStream<Uint8Array>): AsyncGenerator<RawEvent> {
  const decoder = new TextDecoder();
  let buffered = "";
  let id = "";
  let event = "";
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      buffered += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const lines = buffered.split(/\r\n|\r|\n/);
      // The last piece may be a line still arriving; at the end, an unterminated line is dropped.
      buffered = done ? "" : (lines.pop() ?? "");
      for (const line of lines) {
        if (line === "") {
          if (data.length > 0) yield { id, event: event || "message", data: data.join("\n") };
          event = "";
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
        else if (field === "id" && !value.includes("\0")) id = value;
      }
      if (done) return;
    }
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}
