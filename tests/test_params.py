"""Closed-form parameter counts (src/transformer_book/params.py) against the modules' own counts."""

import pytest
import torch
from torch import nn

from transformer_book import attention, blocks, norms, params

CONFIGS = [  # (n_layers, d_model, n_heads, d_ff, vocab_size)
    (1, 8, 1, 16, 11),
    (2, 16, 4, 64, 100),
    (3, 24, 3, 50, 7),
    (6, 64, 8, 256, 1000),
]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


class TokenEncoder(nn.Module):
    """Token embeddings (+ a learned position table when max_len is given) and an encoder stack."""

    def __init__(
        self,
        n_layers,
        d_model,
        n_heads,
        d_ff,
        vocab_size,
        max_len=None,
        norm_first=False,
    ):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model) if max_len else None
        self.encoder = blocks.Encoder(
            n_layers, d_model, n_heads, d_ff, norm_first=norm_first
        )

    def forward(self, ids):
        x = self.tok(ids)  # (B, T, d_model)
        if self.pos is not None:
            x = x + self.pos(
                torch.arange(ids.shape[1])
            )  # (T, d_model) broadcast over B
        return self.encoder(x)


@pytest.mark.parametrize("n_layers, d_model, n_heads, d_ff, vocab_size", CONFIGS)
def test_parts_equal_module_counts(n_layers, d_model, n_heads, d_ff, vocab_size):
    assert params.mha_params(d_model) == params.count_params(
        attention.MultiHeadAttention(d_model, n_heads)
    )
    assert params.feed_forward_params(d_model, d_ff) == params.count_params(
        blocks.FeedForward(d_model, d_ff)
    )
    assert params.layer_norm_params(d_model) == params.count_params(
        norms.LayerNorm(d_model)
    )
    assert params.layer_norm_params(d_model, bias=False) == params.count_params(
        norms.LayerNorm(d_model, bias=False)
    )
    block = blocks.EncoderBlock(d_model, n_heads, d_ff)
    assert params.encoder_block_params(d_model, d_ff) == params.count_params(block)
    assert (
        params.encoder_block_params(d_model, d_ff)
        == 4 * d_model**2 + 2 * d_model * d_ff + 9 * d_model + d_ff
    )


@pytest.mark.parametrize("n_layers, d_model, n_heads, d_ff, vocab_size", CONFIGS)
@pytest.mark.parametrize(
    "max_len, norm_first", [(None, False), (32, False), (None, True), (17, True)]
)
def test_encoder_equals_module_count(
    n_layers, d_model, n_heads, d_ff, vocab_size, max_len, norm_first
):
    model = TokenEncoder(
        n_layers, d_model, n_heads, d_ff, vocab_size, max_len, norm_first
    )
    expected = params.count_params(model)
    assert (
        params.encoder_params(
            n_layers, d_model, d_ff, vocab_size, max_len=max_len, final_norm=norm_first
        )
        == expected
    )


def test_matches_torch_encoder_layer_count():
    layer = nn.TransformerEncoderLayer(32, 4, 96, batch_first=True)
    assert params.encoder_block_params(32, 96) == params.count_params(layer)
    layer = nn.TransformerEncoderLayer(32, 4, 96, batch_first=True, bias=False)
    assert params.encoder_block_params(32, 96, bias=False) == params.count_params(layer)


def test_linear_and_embedding():
    assert params.linear_params(5, 3) == params.count_params(nn.Linear(5, 3)) == 18
    assert params.linear_params(5, 3, bias=False) == 15
    assert params.embedding_params(100, 8) == params.count_params(nn.Embedding(100, 8))


def test_heads_do_not_change_attention_count():
    counts = {
        params.count_params(attention.MultiHeadAttention(48, h))
        for h in (1, 2, 3, 4, 6, 8, 12, 16, 24, 48)
    }
    assert counts == {params.mha_params(48)}


def test_grouped_query_attention_count():
    d, h, kv = 64, 8, 2
    head_dim = d // h
    expected = 2 * (d * d + d) + 2 * (d * kv * head_dim + kv * head_dim)
    assert params.mha_params(d, n_heads=h, n_kv_heads=kv) == expected
    assert params.mha_params(d, n_heads=h, n_kv_heads=h) == params.mha_params(d)


def test_independent_of_sequence_length():
    model = TokenEncoder(2, 16, 2, 32, vocab_size=50).eval()
    before = params.count_params(model)
    for T in (1, 10, 1000):
        ids = torch.randint(0, 50, (1, T))
        with torch.no_grad():
            assert model(ids).shape == (1, T, 16)
        assert params.count_params(model) == before
    assert not any(T in p.shape for p in model.parameters() for T in (10, 1000))
    assert before == params.encoder_params(2, 16, 32, 50)


def test_learned_positions_cap_the_length_not_the_count():
    model = TokenEncoder(1, 16, 2, 32, vocab_size=50, max_len=8).eval()
    assert params.count_params(model) == params.encoder_params(1, 16, 32, 50, max_len=8)
    model(torch.randint(0, 50, (1, 8)))  # fine up to max_len
    with pytest.raises(IndexError):
        model(torch.randint(0, 50, (1, 9)))  # a learned table has no row for position 8


def test_tied_weights_count_once():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    assert params.count_params(nn.ModuleList([emb, head])) == 40


def test_trainable_only():
    model = blocks.FeedForward(4, 8)
    model.up_proj.requires_grad_(False)
    assert params.count_params(model, trainable_only=True) == params.linear_params(8, 4)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: params.mha_params(0), "d_model must be a positive integer, got 0"),
        (
            lambda: params.feed_forward_params(8, -1),
            "d_ff must be a positive integer, got -1",
        ),
        (
            lambda: params.encoder_params(0, 8, 16, 10),
            "n_layers must be a positive integer, got 0",
        ),
        (
            lambda: params.encoder_params(1, 8, 16, 10, max_len=0),
            "max_len must be a positive integer, got 0",
        ),
        (
            lambda: params.encoder_params(2, 8, 16, vocab_size=0),
            "vocab_size must be a positive integer, got 0",
        ),
        (lambda: params.mha_params(8, n_kv_heads=2), "n_kv_heads needs n_heads"),
        (lambda: params.mha_params(8, n_heads=4, n_kv_heads=3), "n_heads % n_kv_heads"),
    ],
)
def test_bad_arguments_raise(call, message):
    with pytest.raises(
        ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        call()
