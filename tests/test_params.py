"""Closed-form parameter counts (src/transformer_book/params.py) against the modules' own counts."""

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

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


# --- Whole models and what they cost (chapter 10) ---------------------------------------
# Each calculator equals the book's own model for small configurations, and the
# Hugging Face reference built from the published configuration (on the meta device:
# shapes without memory, no download) for the real ones.


class BookBert(nn.Module):
    """BERT's shape from the book's pieces: three embedding tables and a LayerNorm, a
    post-norm GELU encoder, a pooler."""

    def __init__(self, vocab, d_model, n_layers, n_heads, d_ff, max_len, types):
        super().__init__()
        self.tok, self.pos = (
            nn.Embedding(vocab, d_model),
            nn.Embedding(max_len, d_model),
        )
        self.seg = nn.Embedding(types, d_model)
        self.norm = norms.LayerNorm(d_model, eps=1e-12)
        act = nn.functional.gelu
        self.encoder = blocks.Encoder(n_layers, d_model, n_heads, d_ff, activation=act)
        self.pooler = nn.Linear(d_model, d_model)


@pytest.mark.parametrize("vocab, d_model, n_layers, n_heads, d_ff, max_len, types", [
    (100, 16, 1, 2, 32, 20, 2), (999, 48, 3, 4, 100, 64, 3), (30, 8, 2, 1, 8, 8, 1),
])  # fmt: skip
def test_bert_params_equal_the_books_pieces(
    vocab, d_model, n_layers, n_heads, d_ff, max_len, types
):
    model = BookBert(vocab, d_model, n_layers, n_heads, d_ff, max_len, types)
    expected = params.count_params(model)
    assert (
        params.bert_params(vocab, d_model, n_layers, d_ff, max_len, types) == expected
    )
    no_pooler = expected - params.linear_params(d_model, d_model)
    got = params.bert_params(vocab, d_model, n_layers, d_ff, max_len, types, False)
    assert got == no_pooler


def test_bert_params_equal_transformers_bert():
    from transformers import BertConfig, BertModel

    small = BertConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=40,
        type_vocab_size=3,
    )
    assert params.count_params(BertModel(small)) == params.bert_params(
        99, 32, 2, 37, 40, 3
    )
    assert params.count_params(BertModel(small, add_pooling_layer=False)) == (
        params.bert_params(99, 32, 2, 37, 40, 3, pooler=False)
    )
    with torch.device("meta"):
        base = BertModel(BertConfig())
        large = BertModel(
            BertConfig(
                hidden_size=1024,
                num_hidden_layers=24,
                num_attention_heads=16,
                intermediate_size=4096,
            )
        )
    assert params.count_params(base) == params.bert_params() == 109_482_240
    large_count = params.bert_params(d_model=1024, n_layers=24, d_ff=4096)
    assert params.count_params(large) == large_count == 335_141_888


def test_t5_params_equal_transformers_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    with torch.device("meta"):
        configs = {  # name: (ours, theirs)
            "small": (dict(), T5Config()),
            "base": (
                dict(d_model=768, n_layers=12, d_ff=3072, n_heads=12),
                T5Config(d_model=768, num_layers=12, d_ff=3072, num_heads=12),
            ),
            "3B": (  # attention wider than d_model: 32 heads of 128 on d_model 1024
                dict(d_model=1024, n_layers=24, d_ff=16384, n_heads=32, head_dim=128),
                T5Config(
                    d_model=1024, d_kv=128, d_ff=16384, num_layers=24, num_heads=32
                ),
            ),
        }
        for ours, theirs in configs.values():
            model = T5ForConditionalGeneration(theirs)
            assert params.count_params(model) == params.t5_params(**ours)
    assert params.t5_params() == 60_506_624
    assert params.t5_params(d_model=768, n_layers=12, d_ff=3072, n_heads=12) == (
        222_903_552
    )


@pytest.mark.parametrize("vocab, d_model, n_layers, n_heads, d_ff, buckets", [
    (100, 32, 2, 4, 64, 32), (57, 48, 3, 3, 40, 8), (10, 8, 1, 1, 8, 4),
])  # fmt: skip
def test_t5_params_equal_the_books_t5(vocab, d_model, n_layers, n_heads, d_ff, buckets):
    from transformer_book import t5

    config = t5.T5Config(vocab, d_model, n_layers, n_heads, d_ff, num_buckets=buckets)
    expected = params.count_params(t5.T5(config))
    head_dim = d_model // n_heads
    got = params.t5_params(vocab, d_model, n_layers, d_ff, n_heads, head_dim, buckets)
    assert got == expected


@pytest.mark.parametrize("vocab, max_len, d_model, n_layers, n_heads, d_ff", [
    (65, 64, 32, 2, 4, None), (100, 10, 48, 3, 3, 50), (7, 3, 8, 1, 1, 8),
])  # fmt: skip
def test_gpt_params_equal_the_books_gpt(
    vocab, max_len, d_model, n_layers, n_heads, d_ff
):
    from transformer_book import gpt

    config = gpt.GPTConfig(vocab, max_len, d_model, n_layers, n_heads, d_ff=d_ff)
    expected = params.count_params(gpt.GPT(config))
    assert params.gpt_params(vocab, max_len, d_model, n_layers, d_ff) == expected


def test_gpt2_and_gpt3_counts():
    from transformers import GPT2Config, GPT2LMHeadModel

    from transformer_book import gpt

    with torch.device("meta"):
        reference = GPT2LMHeadModel(GPT2Config())
        book = gpt.GPT(gpt.GPTConfig(50257, 1024, 768, 12, 12))
    assert params.count_params(reference) == params.count_params(book)
    assert params.gpt_params() == params.count_params(book) == 124_439_808
    gpt3 = params.gpt_params(max_len=2048, d_model=96 * 128, n_layers=96)
    assert gpt3 == 174_604_259_328  # Brown et al. (2020) report 175.0 B


def test_training_flops_equal_torchs_count_of_a_training_step():
    """6·N·D with N the weights of matrix products: torch's FLOP counter, one step."""
    from torch.utils.flop_counter import FlopCounterMode

    from transformer_book import gpt

    model = gpt.GPT(
        gpt.GPTConfig(vocab_size=50, max_len=16, d_model=32, n_layers=2, n_heads=4)
    )
    ids = torch.randint(0, 50, (3, 16))
    with FlopCounterMode(display=False) as counter:
        model(ids).logsumexp(-1).mean().backward()
    n_matmul = sum(
        m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear)
    )
    six_nd = params.training_flops(n_matmul, ids.numel())
    attn = 12 * 2 * 16 * 16 * 32 * 3  # 12·L·T²·d·B: scores and weighted sum, if counted
    assert counter.get_total_flops() in (six_nd, six_nd + attn)
    assert params.training_flops(175e9, 300e9) == pytest.approx(3.15e23)


def test_adam_memory_equals_real_tensors():
    model = blocks.FeedForward(16, 40)
    n = params.count_params(model)
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 16)).sum().backward()
    opt.step()
    state = sum(t.nbytes for s in opt.state.values() for t in s.values() if t.dim() > 0)
    fp32 = params.adam_memory_bytes(n, mixed_precision=False)
    assert fp32["weights"] == sum(p.nbytes for p in model.parameters())
    assert fp32["gradients"] == sum(p.grad.nbytes for p in model.parameters())
    assert fp32["Adam moments"] == state
    assert sum(fp32.values()) == sum(params.adam_memory_bytes(n).values()) == 16 * n


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: params.bert_params(type_vocab_size=0),
            "type_vocab_size must be a positive",
        ),
        (
            lambda: params.t5_params(head_dim=0),
            "head_dim must be a positive integer, got 0",
        ),
        (
            lambda: params.gpt_params(n_layers=0),
            "n_layers must be a positive integer, got 0",
        ),
        (
            lambda: params.training_flops(0, 10),
            "n_params and n_tokens must be positive",
        ),
        (lambda: params.adam_memory_bytes(1.5), "n_params must be a positive integer"),
    ],
)
def test_model_calculators_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_layer_flops_match_torchs_flop_counter():
    B, T, d = 2, 16, 32
    gru, mha = torch.nn.GRU(d, d, batch_first=True), attention.MultiHeadAttention(d, 4)
    x = torch.randn(B, T, d)
    with FlopCounterMode(display=False) as count_gru, torch.no_grad():
        gru(x)
    with FlopCounterMode(display=False) as count_mha, torch.no_grad():
        mha(x, need_weights=True)
    assert count_gru.get_total_flops() == params.gru_flops(B, T, d)
    assert count_mha.get_total_flops() == params.attention_flops(B, T, d)
    with pytest.raises(ValueError, match="seq_len must be a positive integer"):
        params.attention_flops(1, 0, 8)
