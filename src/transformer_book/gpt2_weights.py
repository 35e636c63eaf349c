"""GPT-2's architecture, and a Hugging Face GPT-2's weights copied into the book's
:class:`transformer_book.gpt.GPT` (chapter 14).

GPT-2 is :class:`~transformer_book.gpt.GPT` with one choice per option: learned
positions, pre-norm LayerNorm, GELU in its tanh approximation, biases everywhere and
the output head tied to the token embedding (:func:`gpt2_config`; Radford et al.,
2019). :func:`load_hf_gpt2` copies a ``GPT2LMHeadModel``'s weights into a model built
that way, undoing the layout of its ``Conv1D`` layers; chapter 14 checks on a
:func:`random_hf_gpt2` (no download) that the two give the same logits, and
``tests/test_gpt2_weights.py`` does so with and without the KV cache.
"""

from __future__ import annotations

import torch
from torch import nn

from .gpt import GPT, GPTConfig

__all__ = ["gpt2_config", "load_hf_gpt2", "random_hf_gpt2"]


def gpt2_config(
    vocab_size: int = 50257,
    max_len: int = 1024,
    d_model: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
) -> GPTConfig:
    """GPT-2's architecture: learned positions, pre-norm LayerNorm (ε = 1e-5), GELU
    (tanh approximation), biases everywhere, the head tied to the token embedding.

    The defaults are GPT-2 small, 124 M parameters (Radford et al., 2019, table 2).
    """
    return GPTConfig(
        vocab_size=vocab_size,
        max_len=max_len,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        positions="learned",
        norm="layer",
        activation="gelu_tanh",
        bias=True,
        tie_embeddings=True,
        layer_norm_eps=1e-5,
    )


@torch.no_grad()
def load_hf_gpt2(model: GPT, hf_model: nn.Module) -> GPT:
    """Copy the weights of a Hugging Face ``GPT2LMHeadModel`` into ``model`` (in place)
    and return it; ``model`` must be built as GPT-2 (:func:`gpt2_config`) with the
    same sizes.

    GPT-2 stores its linear layers as ``Conv1D`` with weights (in, out), the transpose
    of ``nn.Linear``'s, and the query, key and value projections side by side in one
    ``c_attn`` of width 3·d_model: here each third is transposed into its row block of
    the model's stacked ``qkv_proj``.
    """
    hf = hf_model.config
    theirs = dict(
        vocab_size=hf.vocab_size,
        max_len=hf.n_positions,
        d_model=hf.n_embd,
        n_layers=hf.n_layer,
        n_heads=hf.n_head,
        d_ff=hf.n_inner or 4 * hf.n_embd,
        layer_norm_eps=hf.layer_norm_epsilon,
    )
    c = model.config
    ours = dict(
        vocab_size=c.vocab_size,
        max_len=c.max_len,
        d_model=c.d_model,
        n_layers=c.n_layers,
        n_heads=c.n_heads,
        d_ff=c.ff_width,
        layer_norm_eps=c.layer_norm_eps,
    )
    if theirs != ours:
        raise ValueError(
            f"model and hf_model differ in size: GPT {ours}, GPT2LMHeadModel {theirs}"
        )
    if hf.activation_function not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(
            "hf_model must use GPT-2's GELU (tanh approximation, 'gelu_new'), got "
            f"activation_function={hf.activation_function!r}"
        )
    gpt2 = gpt2_config(c.vocab_size, c.max_len, c.d_model, c.n_layers, c.n_heads)
    layout = ("positions", "norm", "activation", "bias", "tie_embeddings", "n_kv_heads")
    wrong = {k: getattr(c, k) for k in layout if getattr(c, k) != getattr(gpt2, k)}
    if wrong:
        raise ValueError(
            f"model is not built as GPT-2: {wrong}; build it from gpt2_weights.gpt2_config(...)"
        )
    sd, D = hf_model.state_dict(), c.d_model
    model.tok_emb.weight.copy_(sd["transformer.wte.weight"])  # also the tied head
    model.pos_emb.embedding.weight.copy_(sd["transformer.wpe.weight"])
    for i, block in enumerate(model.blocks.layers):
        p = f"transformer.h.{i}."
        w, b = (
            sd[p + "attn.c_attn.weight"],
            sd[p + "attn.c_attn.bias"],
        )  # (D, 3D), (3D,)
        projections = (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj)
        for j, proj in enumerate(projections):
            proj.weight.copy_(
                w[:, j * D : (j + 1) * D].T
            )  # (D, D) of (D, 3D), transposed
            proj.bias.copy_(b[j * D : (j + 1) * D])
        pairs = [
            (block.attn.o_proj, "attn.c_proj"),
            (block.ff.up_proj, "mlp.c_fc"),
            (block.ff.down_proj, "mlp.c_proj"),
        ]
        for mine, name in pairs:
            mine.weight.copy_(
                sd[p + name + ".weight"].T
            )  # Conv1D (in, out) -> (out, in)
            mine.bias.copy_(sd[p + name + ".bias"])
        for mine, name in ((block.norm1, "ln_1"), (block.norm2, "ln_2")):
            mine.weight.copy_(sd[p + name + ".weight"])
            mine.bias.copy_(sd[p + name + ".bias"])
    model.blocks.final_norm.weight.copy_(sd["transformer.ln_f.weight"])
    model.blocks.final_norm.bias.copy_(sd["transformer.ln_f.bias"])
    return model


def random_hf_gpt2(
    vocab_size: int, max_len: int, d_model: int, n_layers: int, n_heads: int,
    seed: int = 0,
) -> nn.Module:  # fmt: skip
    """A Hugging Face ``GPT2LMHeadModel`` of these sizes with random weights drawn
    after ``torch.manual_seed(seed)``: built from a ``GPT2Config`` (nothing is
    downloaded), in eval mode, its token 0 as the start and end of text. Pair it with
    ``GPT(gpt2_config(...))`` of the same sizes and :func:`load_hf_gpt2`."""
    import transformers  # only this check needs it

    if min(vocab_size, max_len, d_model, n_layers, n_heads) < 1:
        raise ValueError(
            "sizes must be positive, got "
            f"{(vocab_size, max_len, d_model, n_layers, n_heads)}"
        )
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=max_len,
                                     n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                                     bos_token_id=0, eos_token_id=0)  # fmt: skip
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(config).eval()
