"""Token counting for the scratchpad's budget.

Until recall brings a real tokenizer, the default is a documented estimate: one token per
four characters, rounded up (the usual rule of thumb for English text with BPE/WordPiece
vocabularies). Any object with ``count(text) -> int`` can be plugged in.
"""

from __future__ import annotations

from typing import Protocol


class TokenCounter(Protocol):
    """Counts the tokens of a text."""

    def count(self, text: str) -> int: ...


class EstimatedTokenCounter:
    """``ceil(len(text) / 4)``, and at least 1 for non-empty text."""

    chars_per_token = 4

    def count(self, text: str) -> int:
        return -(-len(text) // self.chars_per_token)
