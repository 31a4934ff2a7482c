"""The chat format: how a conversation becomes a prompt and how the model's output becomes a reply.

Between the wire dialects (``api``) and the engine sits a layer of its own, as Ollama keeps
``template/``, ``model/renderers/`` and ``model/parsers/`` beside ``server/``, and llama.cpp keeps
``common/chat.cpp`` apart from its server: rendering a conversation with the model's template (Go
templates, Jinja in bounded worker processes, built-in family formats), fitting it to the context,
and parsing the output back into content, thinking and tool calls by model family. Every new model
family lands here. It knows no HTTP and no llama.cpp (``tests/test_layers.py``): the API layer calls
it with the model it resolved and the tokenizer it leased; the engine never calls it.
"""
