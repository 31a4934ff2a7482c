"""The KV cache's element types (``OLLAMA_KV_CACHE_TYPE``) and what one value of each costs.

Written once here for the three places that need it: the configuration that checks a type's name,
the binding that maps it to ggml's type, and the memory fitting that sizes a cache before a load.
"""

from __future__ import annotations

# Bytes a K or V value takes in the cache: f16's two; ggml's q8_0 block packs 32 values with an
# f16 scale in 34 bytes, q4_0's in 18 (Ollama's SupportsKVCacheType: about half and a quarter of
# f16's bytes per token).
KV_VALUE_BYTES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
KV_CACHE_TYPES = tuple(KV_VALUE_BYTES)
