"""``caveman-engine proxy``: a local HTTP proxy in front of the Anthropic and OpenAI APIs.

Every Messages, Chat Completions and Responses request has its ``tools`` array rewritten by one
of the engine's tool-schema compressors (the original catalog goes into the recovery store
first); every other byte of the request, and every byte of the response, is passed through. A
per-session tripwire turns the rewrite off for a session whose prompt-cache writes blow up
after it. Contract: ``proxy_spec.md``; user guide: ``docs/proxy.md``.

Modules: :mod:`.config` (levels, YAML/env, listen address), :mod:`.catalog` (locate and splice
the ``tools`` span), :mod:`.rewrite` (engine call, store, cache), :mod:`.usage` (cache-token
accounting from responses), :mod:`.ledger` (the tripwire), :mod:`.server` (the aiohttp app),
:mod:`.cli` (the click command).
"""
