"""Token-level engine: requests, slots, the batching scheduler, the llama.cpp thread, the model pool.

Imports neither ``api`` nor ``store``: it sees prompts as token ids and models as file paths.
"""
