"""Block-hash chains: keys kept as a sequence grows match a fresh hash, and matching by keys
finds the exact common prefix (a forged collision is caught by the token check)."""

from __future__ import annotations

import random

from cllm_ollama.engine.blocks import (
    BLOCK,
    TokenChain,
    block_keys,
    common_prefix,
    keyed_prefix,
    shared_blocks,
    verified,
)


def test_a_chain_kept_as_tokens_come_and_go_has_the_keys_of_its_tokens() -> None:
    rng = random.Random(1)
    chain = TokenChain()
    for _ in range(300):
        match rng.randrange(4):
            case 0:
                chain.extend([rng.randrange(50) for _ in range(rng.randrange(70))])
            case 1:
                chain.append(rng.randrange(50))
            case 2:
                chain.truncate(rng.randrange(len(chain) + 1))
            case _:
                if rng.random() < 0.05:
                    chain.clear()
        assert chain.keys == block_keys(chain.tokens)
    started = TokenChain(chain.tokens[: 3 * BLOCK + 5], block_keys(chain.tokens))
    assert started.keys == block_keys(chain.tokens[: 3 * BLOCK + 5])


def test_matching_by_keys_finds_the_exact_common_prefix() -> None:
    rng = random.Random(2)
    base = [rng.randrange(1, 9) for _ in range(10 * BLOCK)]
    for cut in (0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 5 * BLOCK + 7, 10 * BLOCK):
        a = base[:cut] + [0] * rng.randrange(3 * BLOCK)
        b = (*base, 1)
        expected = common_prefix(a, b)
        assert keyed_prefix(a, block_keys(a), b, block_keys(b)) == expected
        assert verified(a, b, expected) == expected


def test_a_collision_in_the_keys_is_caught_when_a_length_is_acted_on() -> None:
    a = list(range(1, 3 * BLOCK + 1))
    b = list(a)
    b[5] = 999  # differs in the first block...
    forged = block_keys(a)  # ...but claims a's keys, as a hash collision would
    assert shared_blocks(block_keys(a), forged) == 3
    claimed = keyed_prefix(a, block_keys(a), b, forged)
    assert claimed == 3 * BLOCK
    assert verified(a, b, claimed) == 5
