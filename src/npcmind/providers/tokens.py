"""Offline token counting for budgets, with the provider's own tokenizer where one is published."""

from __future__ import annotations

import codecs
from functools import lru_cache

import quicktok


def encoding_for(model: str, fallback: str) -> str:
    """The encoding of a model name (gpt-4o, llama-3.1, qwen3...), else the provider's usual one."""
    try:
        enc = quicktok.encoding_for_model(model.replace(":", "-"))  # Ollama tags: qwen3:4b
    except KeyError:
        return fallback
    return str(enc.name) if hasattr(enc, "name") else fallback


@lru_cache(maxsize=8)
def _tokenizer(encoding: str) -> quicktok.Tokenizer:
    return quicktok.get_encoding(encoding)


@lru_cache(maxsize=16384)
def count(encoding: str, text: str) -> int:
    """Number of tokens of ``text``; bundled tables, nothing is downloaded. Entities repeat: memoized
    (about 10 MB at entity texts' size)."""
    return count_once(encoding, text)


def count_once(encoding: str, text: str) -> int:
    """Number of tokens of a text that will not come again (a whole prompt): not kept in the memo."""
    return int(_tokenizer(encoding).count(text))


def split(encoding: str, text: str) -> list[str]:
    """The text cut where the tokenizer cuts it, one string per token, so a streaming test server sends what a
    model writes token by token (``"".join`` gives the text back; a character whose bytes span tokens goes with
    its last one, leaving "" before it, so the list is exactly as long as the token count)."""
    tok = _tokenizer(encoding)
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out = [utf8.decode(tok.decode_single_token_bytes(t)) for t in tok.encode_ordinary(text)]
    rest = utf8.decode(b"", final=True)
    if rest and out:
        out[-1] += rest
    return out
