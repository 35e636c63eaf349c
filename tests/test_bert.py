"""BERT: parity with Hugging Face's BertModel / BertForPreTraining (random small
configs), sentence embeddings of the real all-MiniLM-L6-v2, masking statistics, NSP
pairs, bad input (chapter 11; the small pre-training run is in test_pretraining.py, the
loading of the real weights in test_minilm_weights.py)."""

import os

import pytest
import torch

from transformer_book import bert, minilm_weights, params
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

SMALL = bert.BertConfig(
    vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=24, dropout=0.0
)


def hf_config(c: bert.BertConfig, **kw):
    """transformers' BertConfig for the book's ``c`` (also used by test_bert_heads)."""
    return transformers.BertConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.d_model,
        num_hidden_layers=c.n_layers,
        num_attention_heads=c.n_heads,
        intermediate_size=c.d_ff,
        max_position_embeddings=c.max_len,
        type_vocab_size=c.n_segments,
        layer_norm_eps=c.layer_norm_eps,
        hidden_act="gelu",
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **kw,
    )


def inputs(B=3, T=11, vocab=99, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (B, T), generator=g)
    types = (torch.arange(T) >= T // 2).long().expand(B, T).clone()
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0  # padding in two rows
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    return ids, types, mask


def test_bert_model_equals_hugging_face():
    torch.manual_seed(0)
    ref = transformers.BertModel(hf_config(SMALL)).eval()
    ours = minilm_weights.load_hf_state_dict(
        bert.BertModel(SMALL), ref.state_dict()
    ).eval()
    ids, types, mask = inputs()
    out = ours(ids, types, mask)
    theirs = ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    keep = mask.bool()
    torch.testing.assert_close(
        out.hidden[keep], theirs.last_hidden_state[keep], atol=1e-5, rtol=0
    )
    torch.testing.assert_close(out.pooled, theirs.pooler_output, atol=1e-5, rtol=0)
    # no segment ids and no mask mean "all segment 0, all tokens real", as in HF
    torch.testing.assert_close(
        ours(ids).hidden, ref(input_ids=ids).last_hidden_state, atol=1e-5, rtol=0
    )


def test_pretraining_heads_equal_hugging_face():
    torch.manual_seed(1)
    ref = transformers.BertForPreTraining(hf_config(SMALL)).eval()
    ours = bert.BertForPreTraining(SMALL).eval()
    sd = ref.state_dict()
    minilm_weights.load_hf_state_dict(
        ours.bert, {k[5:]: v for k, v in sd.items() if k[:5] == "bert."}
    )
    with torch.no_grad():
        ours.mlm.dense.weight.copy_(sd["cls.predictions.transform.dense.weight"])
        ours.mlm.dense.bias.copy_(sd["cls.predictions.transform.dense.bias"])
        ours.mlm.norm.weight.copy_(sd["cls.predictions.transform.LayerNorm.weight"])
        ours.mlm.norm.bias.copy_(sd["cls.predictions.transform.LayerNorm.bias"])
        ours.mlm.bias.copy_(sd["cls.predictions.bias"])
        ours.nsp.weight.copy_(sd["cls.seq_relationship.weight"])
        ours.nsp.bias.copy_(sd["cls.seq_relationship.bias"])
    ids, types, mask = inputs(seed=2)
    mlm, nsp = ours(ids, types, mask)
    theirs = ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    keep = mask.bool()
    torch.testing.assert_close(
        mlm[keep], theirs.prediction_logits[keep], atol=1e-5, rtol=0
    )
    torch.testing.assert_close(nsp, theirs.seq_relationship_logits, atol=1e-5, rtol=0)
    # scoring only some positions gives the same rows
    mlm_some, _ = ours(ids, types, mask, positions=keep)
    torch.testing.assert_close(mlm_some, mlm[keep])
    # the output matrix is the token embedding itself (tied), not a copy
    assert ours.mlm.token_embedding.weight is ours.bert.embeddings.token.weight


def test_parameter_counts():
    with torch.device("meta"):
        base = bert.BertModel(bert.BertConfig())
    assert params.count_params(base) == 109_482_240  # bert-base-uncased, with pooler
    with torch.device("meta"):
        pre = bert.BertForPreTraining(bert.BertConfig())
    # + MLM transform (dense, LayerNorm), output bias, NSP layer; the decoder is tied
    assert (
        params.count_params(pre)
        == 109_482_240 + 768 * 768 + 768 + 2 * 768 + 30522 + 2 * 768 + 2
    )


def test_teddy_bear_embedding(minilm):
    model, tok = minilm
    e = bert.sentence_embeddings(model, tok, ["This teddy bear is so cute."])
    expected = torch.tensor([-0.01413, 0.02847, 0.08919, 0.02475, 0.02783])
    torch.testing.assert_close(e[0, :5], expected, atol=1e-4, rtol=0)
    assert abs(e.norm().item() - 1.0) < 1e-5


def test_sentence_embeddings_do_not_depend_on_the_batch(minilm):
    model, tok = minilm
    texts = [
        "a short one",
        "a much longer sentence about teddy bears and guitars",
        "hi",
    ]
    alone = torch.cat([bert.sentence_embeddings(model, tok, [t]) for t in texts])
    together = bert.sentence_embeddings(model, tok, texts)  # padded to the longest
    torch.testing.assert_close(alone, together, atol=1e-5, rtol=0)


def test_bad_input():
    with pytest.raises(ValueError, match="divisible"):
        bert.BertConfig(d_model=30, n_heads=4)
    model = bert.BertModel(SMALL)
    with pytest.raises(ValueError, match="ids must have shape"):
        model(torch.zeros(5, dtype=torch.long))
    ids = torch.zeros(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="attention_mask must have the shape"):
        model(ids, attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="max_len"):  # past the position table
        model(torch.zeros(1, 25, dtype=torch.long))


def test_fill_mask():
    tok = WordPiece([*SPECIAL_TOKENS, "a", "b", "c"])
    config = bert.BertConfig(
        vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=16
    )
    model = bert.BertForPreTraining(config).eval()
    top = bert.fill_mask(model, tok, "a [MASK] c [MASK]", k=3)
    assert len(top) == 2 and all(len(t) == 3 for t in top)
    assert all(p1 >= p2 for t in top for (_, p1), (_, p2) in zip(t, t[1:]))
    with pytest.raises(ValueError, match="must contain"):
        bert.fill_mask(model, tok, "a b c")


# --- exercise checks ----------------------------------------------------------------------


def good_word_pieces(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def no_prefix(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            if word[start:end] in vocab:
                pieces.append(word[start:end])
                break
        else:
            return ["[UNK]"]
        start = end
    return pieces


def partial_unk(word, vocab):
    pieces = good_word_pieces(word, vocab)
    return ["play", "[UNK]"] if word == "playx" else pieces


def test_check_word_pieces():
    from transformer_book import checks

    checks.check_word_pieces(good_word_pieces)
    with pytest.raises(checks.ExerciseError, match="'##' prefix"):
        checks.check_word_pieces(no_prefix)
    with pytest.raises(checks.ExerciseError, match="whole word"):
        checks.check_word_pieces(partial_unk)


def test_check_segment_ids():
    from transformer_book import checks

    def good(ids, sep_id, pad_id):
        is_sep = (ids == sep_id).long()
        before = is_sep.cumsum(dim=1) - is_sep  # [SEP]s strictly before t
        return ((before > 0) & (ids != pad_id)).long()

    def sep_in_b(ids, sep_id, pad_id):
        return (((ids == sep_id).long().cumsum(dim=1) > 0) & (ids != pad_id)).long()

    def pads_in_b(ids, sep_id, pad_id):
        is_sep = (ids == sep_id).long()
        return ((is_sep.cumsum(dim=1) - is_sep) > 0).long()

    checks.check_segment_ids(good)
    with pytest.raises(checks.ExerciseError, match="first \\[SEP\\] got segment 1"):
        checks.check_segment_ids(sep_in_b)
    with pytest.raises(checks.ExerciseError, match="Padding got segment 1"):
        checks.check_segment_ids(pads_in_b)


def _good_masking(ids, mask_id, vocab_size, special_mask, p=0.15, generator=None):
    """The exercise's solution, written the way a reader would."""
    selected = (torch.rand(ids.shape, generator=generator) < p) & ~special_mask
    action = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[selected & (action < 0.8)] = mask_id
    swap = selected & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, torch.where(selected, ids, torch.full_like(ids, -100))


def test_check_mask_tokens_accepts_the_package_and_a_plain_solution(capsys):
    from transformer_book import checks, masked_lm

    checks.check_mask_tokens(masked_lm.mask_tokens)
    checks.check_mask_tokens(_good_masking)
    assert capsys.readouterr().out.count("Correct:") == 2


def _variant(**bugs):
    """_good_masking with one typical mistake switched on."""

    def fn(ids, mask_id, vocab_size, special_mask, p=0.15, generator=None):
        if bugs.get("no_generator"):  # draws from torch's global generator
            return _good_masking(ids, mask_id, vocab_size, special_mask, p)
        u = torch.rand(ids.shape, generator=generator)
        selected = u < (0.15 if bugs.get("fixed_p") else p)
        if not bugs.get("specials"):
            selected &= ~special_mask
        action = torch.rand(ids.shape, generator=generator)
        shape = (1,) if bugs.get("one_random") else ids.shape
        random_ids = torch.randint(vocab_size, shape, generator=generator)
        random_ids = random_ids.expand(ids.shape)
        inputs = ids if bugs.get("in_place") else ids.clone()
        where = ~special_mask if bugs.get("all_tokens") else selected
        if bugs.get("independent"):
            inputs[where & (action < 0.8)] = mask_id
            again = torch.rand(ids.shape, generator=generator) < 0.1
            inputs[where & again] = random_ids[where & again]
        else:
            inputs[where & (action < 0.8)] = mask_id
            swap = where & (action >= 0.8) & (action < 0.9)
            inputs[swap] = random_ids[swap]
        if bugs.get("mask_only_labels"):
            selected = selected & (inputs == mask_id)
        source = inputs if bugs.get("input_labels") else ids
        labels = torch.where(selected, source, torch.full_like(ids, -100))
        return inputs, labels

    return fn


@pytest.mark.parametrize(
    "bug, message",
    [
        ("specials", "special token"),
        ("all_tokens", "NOT selected were changed"),
        ("mask_only_labels", "only where the input became \\[MASK\\]"),
        ("input_labels", "original token id"),
        ("independent", "exclude each other"),
        ("one_random", "one random token per position"),
        ("in_place", "in place"),
        ("no_generator", "generator="),
        ("fixed_p", "use the argument p"),
    ],
)
def test_check_mask_tokens_names_the_mistake(bug, message):
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_mask_tokens(_variant(**{bug: True}))


def test_check_mask_tokens_not_written():
    from transformer_book import checks

    with pytest.raises(checks.ExerciseError, match="not written yet"):
        checks.check_mask_tokens(lambda *a: (_ for _ in ()).throw(NotImplementedError))
