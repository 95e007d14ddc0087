"""Batches of distinct documents whose permissive bands meet an earlier batch's, and planted copies of the first.

Document ``j`` of batch ``t`` is the window of :data:`WORDS` words of one random word stream starting at
``j·SPACING + t·SHIFT``: it shares 45 % of its words with document ``j`` of batch ``t - 1`` (exact Jaccard of the
defaults' shingles ≈ 0.29, below every verification threshold, yet a band candidate with probability ~0.35 at
the defaults' 64 x 4 bands) and nothing with any other document. The last batch also holds near-copies of some
of the first batch's documents (a few words replaced: Jaccard ≈ 0.8).
"""

from __future__ import annotations

import random

WORDS = 150
SHIFT = 83  # 55 % of WORDS: consecutive batches' windows overlap by 45 %
SPACING = 4 * WORDS  # no two windows of different j ever overlap (batches < SPACING / SHIFT)


def stream(length: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocab = [f"{rng.choice('abcdefgh')}{i}x{rng.randint(0, 99)}" for i in range(6000)]
    return [rng.choice(vocab) for _ in range(length)]


def batches(n_batches: int, per_batch: int, planted: int, seed: int = 5) -> list[list[tuple[str, str, str]]]:
    """``n_batches`` lists of (id, text, kind): kind "distinct", or "copy:<id of the first batch's source>"."""
    words = stream(per_batch * SPACING + n_batches * SHIFT + WORDS, seed)
    rng = random.Random(seed + 1)
    out = []
    for t in range(n_batches):
        batch = [(f"b{t}-d{j}", " ".join(words[j * SPACING + t * SHIFT:j * SPACING + t * SHIFT + WORDS]), "distinct")
                 for j in range(per_batch)]
        out.append(batch)
    last = out[-1]
    for j in rng.sample(range(per_batch), planted):
        source = out[0][j]
        copy = source[1].split()
        for pos in rng.sample(range(len(copy)), 3):
            copy[pos] = f"zz{rng.randint(0, 10**6)}"
        last.insert(rng.randint(0, len(last)), (f"copy-of-{source[0]}", " ".join(copy), f"copy:{source[0]}"))
    return out
