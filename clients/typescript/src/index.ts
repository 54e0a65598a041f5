// @urlflow/delegate: an MCP server's client of urlflow's delegation API (docs/delegation.md).
export { Client, ProxyAnswer, retryAfter } from "./client.js";
export type { ClientOptions, CreateOptions, ListOptions, Released, User } from "./client.js";
export { UrlflowError } from "./errors.js";
export { parseEventStream, readEvents } from "./events.js";
export { WebhookError, WebhookVerifier, defaultTolerance, parseSecret, secretPrefix, sign, webhookHandler } from "./webhook.js";
export type { Webhook } from "./webhook.js";
export { Credential, Delegation, callOf } from "./mcp.js";
export type { DelegationOptions, InputRequiredResult, Requirement, RequirementV2, SessionServer, ToolExtra, ToolNeed, ToolResult, V2Context, V2Server } from "./mcp.js";
export * from "./types.js";
