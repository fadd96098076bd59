"""Tool catalogs: envelopes, validation-preserving rewrites, measurement and checks.

* :mod:`.envelope` finds the tools of any catalog shape (OpenAI ``type: function``, Anthropic
  ``input_schema``, MCP ``inputSchema``, ``{"tools": ...}``, bare arrays) and writes the
  catalog back in the same envelope and key order;
* :mod:`.schema` is the JSON Schema vocabulary the rules and the verifier share;
* :mod:`.rules` holds one small module per safe rule, :mod:`.safe` runs them;
* :mod:`.verify` checks that two catalogs accept the same tool calls;
* :mod:`.measure`, :mod:`.check`, :mod:`.diff` and :mod:`.cli` are the commands.

Nothing here is imported by ``caveman_engine`` at start-up: the CLI loads the commands lazily.
"""
