"""An independent NumPy implementation of the BERT encoder with mean pooling.

Written from the Hugging Face BertModel definition (not from our C++), it reads
the same config.json and model.safetensors (parsed here with NumPy alone) and
computes the sentence-transformers embedding: mean of the last hidden states
over real tokens, L2-normalised. Float64 throughout, so it is a reference for
both the FP32 CPU and the FP16 GPU encoders.
"""

import json
import math
import os
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] == "BF16":
            begin, end = info["data_offsets"]
            raw = np.frombuffer(data[begin:end], dtype=np.uint16).astype(np.uint32) << 16
            tensors[name] = raw.view(np.float32).reshape(info["shape"])
            continue
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[info["dtype"]])
        tensors[name] = arr.reshape(info["shape"])
    return {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in tensors.items()}


class NumpyBert:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        self.w = {k: v.astype(np.float64) for k, v in
                  read_safetensors(os.path.join(folder, "model.safetensors")).items()
                  if v.dtype.kind == "f"}
        self.eps = self.config.get("layer_norm_eps", 1e-12)

    def _ln(self, x, prefix):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[prefix + ".weight"] + \
            self.w[prefix + ".bias"]

    def _linear(self, x, prefix):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def embed(self, ids, mask, normalize=True):
        """ids, mask: int arrays [batch, seq]. Returns [batch, hidden] float64."""
        c, w = self.config, self.w
        heads = c["num_attention_heads"]
        batch, seq = ids.shape
        dh = c["hidden_size"] // heads
        x = w["embeddings.word_embeddings.weight"][ids] + \
            w["embeddings.position_embeddings.weight"][:seq][None] + \
            w["embeddings.token_type_embeddings.weight"][0]
        x = self._ln(x, "embeddings.LayerNorm")
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -np.inf)  # [b, 1, 1, seq]
        erf = np.vectorize(math.erf)
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def split(t):
                return t.reshape(batch, seq, heads, dh).transpose(0, 2, 1, 3)

            q = split(self._linear(x, p + "attention.self.query"))
            k = split(self._linear(x, p + "attention.self.key"))
            v = split(self._linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
            x = self._ln(x + self._linear(ctx, p + "attention.output.dense"),
                         p + "attention.output.LayerNorm")
            h = self._linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = self._ln(x + self._linear(h, p + "output.dense"), p + "output.LayerNorm")
        m = mask[..., None].astype(np.float64)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1.0)
        if normalize:
            pooled /= np.linalg.norm(pooled, axis=-1, keepdims=True)
        return pooled
