#!/usr/bin/env node
// An MCP client on the TypeScript SDK v2 (@modelcontextprotocol/client), which negotiates
// protocol 2026-07-28 (stateless: server/discover, no initialize, no session) and fulfils
// multi round-trip `input_required` results automatically through its elicitation handler.
// Driven by urlflow's Go e2e tests through a line protocol (README.md).
import { Client, StreamableHTTPClientTransport, UnauthorizedError, UrlElicitationRequiredError } from '@modelcontextprotocol/client';

import { Completions, emit, fail, parseFlags, toolCaller, waitForExit } from './common.mjs';
import { connectClient } from './oauth.mjs';

async function main() {
    const flags = parseFlags(
        {
            // versionNegotiation mode: "auto" probes with server/discover and falls back to the
            // 2025 initialize handshake; "pin" insists on 2026-07-28 (connect fails otherwise);
            // "legacy" is the SDK's default (2025 initialize only).
            negotiation: { type: 'string', default: 'auto' },
            // inputRequired.maxRounds (SDK default 10).
            'max-rounds': { type: 'string' },
            'form-only': { type: 'boolean', default: false },
            'no-progress-token': { type: 'boolean', default: false },
            'terminate-session': { type: 'boolean', default: false }
        },
        'urlflow-e2e-ts-v2'
    );
    if (flags.urlMode && flags['form-only']) throw new Error('--url-mode and --form-only exclude each other');

    let versionNegotiation;
    switch (flags.negotiation) {
        case 'auto':
            versionNegotiation = { mode: 'auto' };
            break;
        case 'pin':
            versionNegotiation = { mode: { pin: '2026-07-28' } };
            break;
        case 'legacy':
            versionNegotiation = { mode: 'legacy' };
            break;
        default:
            throw new Error('--negotiation must be auto, pin or legacy');
    }
    const inputRequired = {};
    if (flags['max-rounds'] !== undefined) inputRequired.maxRounds = Number(flags['max-rounds']);

    const capabilities = {};
    if (flags.urlMode) capabilities.elicitation = { url: {} };
    else if (flags['form-only']) capabilities.elicitation = { form: {} };

    const client = new Client({ name: flags.name, version: '1.0.0' }, { capabilities, versionNegotiation, inputRequired });
    const completions = new Completions();

    if (capabilities.elicitation) {
        // One handler serves both eras: a 2025 `elicitation/create` request (push style) and,
        // on 2026-07-28, each `elicitation/create` embedded in an input_required result, which
        // the SDK's multi round-trip driver dispatches here before it retries the call with
        // inputResponses {key: <this result>} and the echoed requestState. The SDK validates the
        // request and refuses a mode the client did not declare before this handler runs.
        client.setRequestHandler('elicitation/create', async (request, ctx) => {
            const p = request.params;
            const via = client.getProtocolEra() === 'modern' ? 'input_required' : 'elicitation/create';
            const key = via === 'input_required' ? ctx?.mcpReq?.id : undefined;
            if (p.mode === 'url') {
                emit({ event: 'elicitation', via, key, mode: 'url', url: p.url, elicitationId: p.elicitationId ?? null, message: p.message });
                return { action: 'accept' };
            }
            emit({ event: 'elicitation', via, key, mode: p.mode ?? 'form', message: p.message, requestedSchema: p.requestedSchema });
            return { action: 'decline' };
        });
    }
    // Only a 2025-era connection can receive it (2026-07-28 has no completion notification).
    client.setNotificationHandler('notifications/elicitation/complete', notification => {
        const id = notification.params.elicitationId;
        emit({ event: 'complete', elicitationId: id });
        completions.add(id);
    });
    const { transport, provider } = await connectClient({
        client,
        flags,
        Transport: StreamableHTTPClientTransport,
        UnauthorizedError,
        // v2's finishAuth takes the callback's query and checks `iss` again itself (RFC 9207:
        // against the discovered metadata's issuer, required since that metadata says it
        // is always sent) before it redeems the code; it never checks the state.
        finish: (t, params) => t.finishAuth(params)
    });
    const discover = client.getDiscoverResult();
    emit({
        event: 'connected',
        protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
        era: client.getProtocolEra() ?? null,
        sessionId: transport.sessionId ?? null,
        serverSupportedVersions: discover?.supportedVersions ?? null,
        serverInfo: client.getServerVersion() ?? null,
        negotiation: flags.negotiation,
        capabilities,
        // --oauth: the granted access token's audience and scope (read, not verified) and the
        // registered client_id.
        ...(provider ? provider.connectedInfo() : {})
    });

    const requestOptions = () => ({
        timeout: flags.timeoutMs,
        resetTimeoutOnProgress: true,
        // The SDK's MRTR driver also reports each round through onprogress.
        ...(flags['no-progress-token'] ? {} : { onprogress: p => emit({ event: 'progress', ...p }) })
    });

    const callTool = toolCaller({
        // On 2026-07-28 the input_required rounds happen inside this one call; −32042 is the
        // 2025 fallback, error style.
        callOnce: (name, args) => client.callTool({ name, arguments: args }, requestOptions()),
        UrlRequired: UrlElicitationRequiredError,
        completions,
        awaitRetryOn: flags.awaitRetryOn
    });

    await callTool(flags.tool, flags.toolArgs);
    if (flags.then) await callTool(flags.then, flags.thenArgs);
    emit({ event: 'done' });
    if (flags.hold) await waitForExit();
    if (flags['terminate-session'] && transport.sessionId) {
        await transport.terminateSession().catch(err => emit({ event: 'transport_error', message: err.message }));
    }
    await client.close();
}

main().then(
    () => process.exit(0),
    err => fail(err)
);
