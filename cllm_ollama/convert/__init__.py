"""GGUFs written by Ollama's own converter, rewritten into llama.cpp's layout (or refused).

Ollama's library models were converted for its Go engine, with architecture names, keys and
tensor names llama.cpp does not all accept, and often one GGUF with a tower inside. Ollama's
llama-server shim (``llama/compat/llama-ollama-compat.cpp``) remaps them in memory at every load;
cllm does it once, when the store takes a model in (``store/conversion.py``). ``framework`` holds
the machinery (headers, tensors, rewrites, the writer, the projector helpers), one module per
family or tower holds its map, and ``dispatch.plan`` picks one. Nothing here imports the store.
"""
