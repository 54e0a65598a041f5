#!/usr/bin/env node
// An MCP client on the TypeScript SDK v1 (@modelcontextprotocol/sdk), protocol 2025-11-25
// over streamable HTTP, driven by urlflow's Go e2e tests through a line protocol (README.md).
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
    ElicitationCompleteNotificationSchema,
    ElicitRequestSchema,
    UrlElicitationRequiredError
} from '@modelcontextprotocol/sdk/types.js';

import { Completions, emit, fail, parseFlags, toolCaller, waitForExit } from './common.mjs';
import { connectClient } from './oauth.mjs';

async function main() {
    const flags = parseFlags(
        {
            // Declare elicitation {form:{}} only: a client that has elicitation but no URL mode.
            'form-only': { type: 'boolean', default: false },
            // Send no progress token with tools/call (push style then answers "waiting" after 50 s).
            'no-progress-token': { type: 'boolean', default: false },
            // Send DELETE for the session when closing.
            'terminate-session': { type: 'boolean', default: false }
        },
        'urlflow-e2e-ts-v1'
    );
    if (flags.urlMode && flags['form-only']) throw new Error('--url-mode and --form-only exclude each other');

    const capabilities = {};
    if (flags.urlMode) capabilities.elicitation = { url: {} };
    else if (flags['form-only']) capabilities.elicitation = { form: {} };

    const client = new Client({ name: flags.name, version: '1.0.0' }, { capabilities });
    const completions = new Completions();

    if (capabilities.elicitation) {
        // The SDK validates the request (ElicitRequestSchema) and refuses a mode the client
        // did not declare before this handler runs.
        client.setRequestHandler(ElicitRequestSchema, async request => {
            const p = request.params;
            if (p.mode === 'url') {
                emit({ event: 'elicitation', via: 'elicitation/create', mode: 'url', url: p.url, elicitationId: p.elicitationId, message: p.message });
                return { action: 'accept' };
            }
            // urlflow must never ask for a secret in form mode; report it and decline.
            emit({ event: 'elicitation', via: 'elicitation/create', mode: p.mode ?? 'form', message: p.message, requestedSchema: p.requestedSchema });
            return { action: 'decline' };
        });
    }
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, notification => {
        const id = notification.params.elicitationId;
        emit({ event: 'complete', elicitationId: id });
        completions.add(id);
    });
    const { transport, provider } = await connectClient({
        client,
        flags,
        Transport: StreamableHTTPClientTransport,
        UnauthorizedError,
        // v1's finishAuth takes only the code (the state and `iss` were checked as the
        // callback arrived, by provider.checkCallback; v1 itself checks neither).
        finish: (t, _params, code) => t.finishAuth(code)
    });
    emit({
        event: 'connected',
        protocolVersion: transport.protocolVersion,
        sessionId: transport.sessionId ?? null,
        serverInfo: client.getServerVersion() ?? null,
        capabilities,
        // --oauth: the granted access token's audience and scope (read, not verified) and the
        // registered client_id.
        ...(provider ? provider.connectedInfo() : {})
    });

    const requestOptions = () => ({
        timeout: flags.timeoutMs,
        // A progress token makes urlflow's push wait send progress every 15 s; each one
        // restarts the SDK's timeout.
        resetTimeoutOnProgress: true,
        ...(flags['no-progress-token'] ? {} : { onprogress: p => emit({ event: 'progress', ...p }) })
    });

    const callTool = toolCaller({
        callOnce: (name, args) => client.callTool({ name, arguments: args }, undefined, requestOptions()),
        UrlRequired: UrlElicitationRequiredError,
        completions,
        awaitRetryOn: flags.awaitRetryOn
    });

    await callTool(flags.tool, flags.toolArgs);
    if (flags.then) await callTool(flags.then, flags.thenArgs);
    emit({ event: 'done' });
    if (flags.hold) await waitForExit();
    if (flags['terminate-session']) await transport.terminateSession().catch(err => emit({ event: 'transport_error', message: err.message }));
    await client.close();
}

main().then(
    () => process.exit(0),
    err => fail(err)
);
