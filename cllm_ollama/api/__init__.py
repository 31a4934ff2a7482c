"""HTTP edge: Starlette routes, JSON in, engine requests and store calls, NDJSON/JSON out.

One folder per dialect, each with its endpoints: ``ollama/`` (``/api/*``), ``openai/`` (``/v1/*``),
``anthropic/`` (``/v1/messages``); ``middleware/`` wraps them all. Beside them, what the dialects
share: the route table (``routes``), one endpoint's shape (``endpoint``), a generation's lifecycle
and streaming, the typed request bodies and Go's decode errors (``schemas``), the rules read after
the decode (``request_fields``, ``options``, ``resolve``), output shapes (``output_shapes``,
``tool_calls``), encoders and the error boundary (``errors``). Prompts and output parsing are
``chatformat``'s.

May import ``engine``, ``store`` and ``chatformat``; none of them imports this package.
"""
