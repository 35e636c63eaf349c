"""The encoder-decoder model (src/transformer_book/seq2seq.py): masks, teacher forcing,
greedy decoding."""

import pytest
import torch
import torch.nn.functional as F

from transformer_book import checks, decoder, kv_cache, seq2seq, training
from transformer_book.seq2seq import Seq2Seq, Seq2SeqConfig

PAD, BOS, EOS, V = 0, 1, 2, 13


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _options() -> dict:
    return dict(d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=16)


def _model(**kwargs) -> Seq2Seq:
    return Seq2Seq(Seq2SeqConfig(V, **{**_options(), **kwargs})).eval()


def _batch():
    src = torch.tensor([[5, 6, 7, 8, 9], [4, 11, 12, PAD, PAD]])  # (2, 5), 2nd padded
    tgt = torch.tensor([[7, 8, 3, EOS], [10, EOS, PAD, PAD]])  # (2, 4)
    return src, tgt


def test_config_rejects_bad_special_ids():
    with pytest.raises(ValueError, match="eos_id must lie in"):
        Seq2SeqConfig(V, eos_id=V)
    with pytest.raises(ValueError, match="must differ"):
        Seq2SeqConfig(V, bos_id=0)
    with pytest.raises(ValueError, match="max_len must be at least 2"):
        Seq2SeqConfig(V, max_len=1)


def test_shift_right():
    _, tgt = _batch()
    expected = torch.tensor([[BOS, 7, 8, 3], [BOS, 10, EOS, PAD]])
    assert torch.equal(decoder.shift_right(tgt, BOS), expected)
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        decoder.shift_right(tgt[0], BOS)


@pytest.mark.parametrize("norm_first", [False, True])
def test_future_target_tokens_never_change_earlier_logits(norm_first):
    model = _model(norm_first=norm_first)
    src, tgt = _batch()
    tgt_in = decoder.shift_right(tgt, BOS)
    logits = model(src, tgt_in)
    assert logits.shape == (2, 4, V)
    for t in range(3):
        changed = tgt_in.clone()
        changed[:, t + 1 :] = torch.randint(3, V, (2, 3 - t))
        again = model(src, changed)
        torch.testing.assert_close(again[:, : t + 1], logits[:, : t + 1])
        assert not torch.allclose(again[:, t + 1 :], logits[:, t + 1 :])


def test_padding_changes_nothing():
    model = _model()
    src, tgt = _batch()
    tgt_in = decoder.shift_right(tgt, BOS)
    batch = model(src, tgt_in)
    alone = model(src[1:, :3], tgt_in[1:, :2])  # the 2nd pair without its padding
    torch.testing.assert_close(batch[1:, :2], alone)
    wider = torch.cat([src, torch.full((2, 3), PAD)], dim=1)  # more source padding
    torch.testing.assert_close(model(wider, tgt_in), batch)


def test_teacher_forced_loss():
    model = _model()
    src, tgt = _batch()
    logits = model(src, decoder.shift_right(tgt, BOS))
    keep = tgt != PAD
    expected = F.cross_entropy(logits[keep], tgt[keep])  # the 6 real target tokens
    torch.testing.assert_close(model.loss(src, tgt), expected)
    model.loss(src, tgt).backward()
    enc = model.encoder.layers[0].attn.q_proj.weight.grad
    assert enc is not None and enc.abs().sum() > 0  # the loss reaches the encoder


def test_tied_embeddings():
    tied, untied = _model(), _model(tie_embeddings=False)
    assert tied.head.weight is tied.embed.weight
    assert untied.head.weight is not untied.embed.weight
    n = sum(p.numel() for p in untied.parameters()) - sum(
        p.numel() for p in tied.parameters()
    )
    assert n == V * 16


def test_greedy_decode_takes_the_argmax_at_every_step():
    model = _model()
    src, _ = _batch()
    out = model.greedy_decode(src, max_new_tokens=6)
    assert out.shape[0] == 2 and out.shape[1] <= 6
    for b in range(2):
        prefix = [BOS]
        for tok in out[b].tolist():
            if prefix[-1] == EOS or (prefix[-1] == PAD and len(prefix) > 1):
                assert tok == PAD  # after <eos>: padding only
                prefix.append(tok)
                continue
            logits = model(src[b : b + 1], torch.tensor([prefix]))[0, -1]
            assert tok == int(logits.argmax())
            prefix.append(tok)


def test_greedy_decode_stops_at_eos():
    model = _model(tie_embeddings=False)
    with torch.no_grad():  # the decoder's output is always v, and only <eos> likes v
        v = torch.randn(16)
        model.decoder.final_norm.weight.zero_()
        model.decoder.final_norm.bias.copy_(v)
        model.head.weight.zero_()
        model.head.weight[EOS] = v
    src, _ = _batch()
    out = model.greedy_decode(src, max_new_tokens=10)
    assert out.tolist() == [[EOS], [EOS]]  # one step, not ten
    assert model.cut_at_eos(out) == [[], []]


def test_cut_at_eos():
    model = _model()
    ids = torch.tensor([[5, 6, EOS, PAD], [7, 8, 9, 10], [EOS, PAD, PAD, PAD]])
    assert model.cut_at_eos(ids) == [[5, 6], [7, 8, 9, 10], []]


@pytest.fixture
def one_thread():
    # a tiny model: two threads bring no speed, and on a busy machine they wait on each
    # other (this test took minutes instead of seconds)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_learns_to_copy_with_teacher_forcing(one_thread):
    # the whole loop, on a task a working model learns in a few hundred steps
    model = _model(d_model=32, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)
    gen = torch.Generator().manual_seed(0)

    def batches():
        while True:
            src = torch.randint(3, V, (32, 5), generator=gen)
            yield src, torch.cat([src, torch.full((32, 1), EOS)], dim=1)

    class Batches:
        def __iter__(self):
            return batches()

    loss_fn = lambda m, b: m.loss(*b)
    history = training.train(
        model, Batches(), loss_fn, 300, lr=3e-3, warmup=30, progress=False
    )
    assert history[-1] < history[0] / 5
    src = torch.randint(3, V, (64, 5), generator=gen)
    out = model.cut_at_eos(model.greedy_decode(src, max_new_tokens=8))
    assert sum(o == s for o, s in zip(out, src.tolist())) >= 0.9 * 64


def test_cross_attention_weights_skip_source_padding():
    model = _model()
    src, tgt = _batch()
    weights = model.cross_attention_weights(src, decoder.shift_right(tgt, BOS))
    assert len(weights) == 2 and weights[0].shape == (2, 2, 4, 5)  # (B, H, T, S)
    assert (weights[-1][1, :, :, 3:] == 0).all()
    torch.testing.assert_close(weights[-1].sum(-1), torch.ones(2, 2, 4))


def test_bad_input_raises():
    model = _model()
    src, tgt = _batch()
    with pytest.raises(ValueError, match=r"src must be an integer tensor of shape"):
        model(src.float(), tgt)
    with pytest.raises(ValueError, match="more than max_len=16"):
        model(torch.ones(1, 17, dtype=torch.long), tgt[:1])
    with pytest.raises(ValueError, match=r"max_new_tokens must lie in \[1, "):
        model.greedy_decode(src, max_new_tokens=16)
    with pytest.raises(ValueError, match="tgt must be an integer tensor"):
        model.loss(src, tgt[0])


# --- the exercise checks of chapter 07 (checks/seq2seq.py) ----------------------------


def _bos(tgt, b):
    return torch.full_like(tgt[:, :1], b)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda t, b: torch.cat([_bos(t, b), t[:, 1:]], 1), "replaced the \\*first\\*"),
        (lambda t, b: t.clone(), "input equals the target"),
        (lambda t, b: torch.cat([t[:, 1:], _bos(t, b)], 1), "shifted left"),
        (lambda t, b: t.roll(1, dims=1), "wraps around"),
        (lambda t, b: torch.cat([_bos(t, b), t], 1), "one position too many"),
        (lambda t, b: torch.cat([torch.full_like(t[:1], b), t[:-1]], 0), "batch axis"),
        (lambda t, b: t.copy_(decoder.shift_right(t, b)), "in place"),
        (lambda t, b: torch.tensor([[b, 5, 6, 7], [b, 8, 9, EOS]]), r"\(4, 9\) batch"),
    ],
)
def test_check_shift_right(wrong, message):
    checks.check_shift_right(decoder.shift_right)
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_shift_right(wrong)


def _decode(model, src, tgt_in, mask=lambda m: m):
    memory, memory_mask = model.encode(src)
    return model.decode(tgt_in, memory, mask(memory_mask))


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda m, s, t: _decode(m, s, t, lambda _: None), "changed the logits"),
        (lambda m, s, t: _decode(m, s, t, lambda k: ~k), "inverted the mask"),
        (lambda m, s, t: _decode(m, s, t, lambda k: k.transpose(-1, -2)), "raised"),
        (lambda m, s, t: m(s[:, :2], t), "differ from model"),
        (lambda m, s, t: m(s, t)[:, -1], "shape"),
    ],
)
def test_check_source_mask(wrong, message):
    checks.check_source_mask(_decode)
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_source_mask(wrong)


def _changed(logits_fn, ids, t, compare="logits", skip_own=False, in_place=False):
    changed = ids if in_place else ids.clone()
    before = logits_fn(ids.clone())
    changed[0, t] = 3 if changed[0, t] != 3 else 4
    after = logits_fn(changed)
    if compare == "argmax":
        moved = (after.argmax(-1) != before.argmax(-1))[0]  # (T,)
    else:
        moved = (after - before).abs().amax(-1)[0] > 1e-5  # (T,)
    out = moved.nonzero().flatten().tolist()
    return [p for p in out if p != t] if skip_own else out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (dict(compare="argmax"), "not the argmax"),
        (dict(skip_own=True), "itself changes too"),
        (dict(in_place=True), "in place"),
    ],
)
def test_check_changed_positions(wrong, message):
    checks.check_changed_positions(_changed)
    with pytest.raises(checks.ExerciseError, match=message):
        checks.check_changed_positions(lambda f, i, t: _changed(f, i, t, **wrong))


def test_check_changed_positions_names_the_direction_and_the_axis():
    with pytest.raises(checks.ExerciseError, match="hides the \\*future\\*"):
        checks.check_changed_positions(lambda f, ids, t: list(range(t)))

    def source_positions(f, ids, t):  # right for targets, source positions for sources
        out = _changed(f, ids, t)
        return list(range(ids.shape[1])) if ids.shape[1] == 5 else out

    with pytest.raises(checks.ExerciseError, match="one row per \\*target\\*"):
        checks.check_changed_positions(source_positions)


def test_unwritten_exercises_say_so():
    def todo(*args):
        raise NotImplementedError

    for check in (
        checks.check_shift_right,
        checks.check_source_mask,
        checks.check_changed_positions,
    ):
        with pytest.raises(checks.ExerciseError, match="not written yet"):
            check(todo)


# --- without the causal mask (chapter 07's "why a mask") ------------------------------


def test_without_the_causal_mask_future_tokens_change_earlier_logits():
    model = _model(causal=False)
    src, tgt = _batch()
    tgt_in = decoder.shift_right(tgt, BOS)
    changed = tgt_in.clone()
    changed[0, 3] = 4
    assert not torch.allclose(model(src, changed)[0, :3], model(src, tgt_in)[0, :3])
    weights = model.cross_attention_weights(src, tgt_in)  # runs without the mask too
    assert weights[0].shape == (2, 2, 4, 5)
    masked = Seq2Seq(Seq2SeqConfig(V, **{**_options(), "causal": True})).eval()
    masked.load_state_dict(model.state_dict())  # the same weights: the mask adds none
    torch.testing.assert_close(masked(src, changed)[0, :3], masked(src, tgt_in)[0, :3])


def test_without_the_causal_mask_greedy_decoding_needs_no_cache():
    model = _model(causal=False)
    src, _ = _batch()
    with pytest.raises(ValueError, match="use_cache=True needs the causal mask"):
        model.greedy_decode(src, max_new_tokens=4)
    assert model.greedy_decode(src, max_new_tokens=4, use_cache=False).shape[0] == 2


# --- the decoder's cache: cached decoding = uncached decoding -------------------------


def _count_calls(modules) -> list[int]:
    """One counter that every forward call of every module in ``modules`` increments."""
    calls = [0]
    for m in modules:
        m.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_steps_equal_the_full_decoder(norm_first):
    model = _model(norm_first=norm_first, n_decoder_layers=3)
    src, tgt = _batch()  # the second source is padded
    tgt_in = decoder.shift_right(tgt, BOS)  # (2, 4)
    memory, memory_mask = model.encode(src)
    full = model.decode(tgt_in, memory, memory_mask)  # (2, 4, V)
    cache = kv_cache.new_decoder_cache(3)
    steps = [
        model.decode(tgt_in[:, t : t + 1], memory, memory_mask, cache)  # (2, 1, V)
        for t in range(tgt_in.shape[1])
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert cache[0].seq_len == 4 and cache[0].cross_attn.seq_len == src.shape[1]


def test_cached_greedy_decode_writes_the_same_tokens():
    model = _model(max_len=24)
    src = torch.randint(3, V, (4, 9))
    src[1, 5:], src[3, 2:] = PAD, PAD  # padded sources
    cached = model.greedy_decode(src, max_new_tokens=20)
    plain = model.greedy_decode(src, max_new_tokens=20, use_cache=False)
    assert cached.shape[1] > 5  # long enough to exercise the cache
    assert torch.equal(cached, plain)


def test_cross_attention_keys_and_values_are_computed_once_per_source():
    model = _model(max_len=24)
    src = torch.randint(3, V, (2, 7))
    src[1, 4:] = PAD
    projections = [
        proj
        for layer in model.decoder.layers
        for proj in (layer.cross_attn.k_proj, layer.cross_attn.v_proj)
    ]
    calls = _count_calls(projections)
    out = model.greedy_decode(src, max_new_tokens=12)
    assert out.shape[1] > 1
    assert calls[0] == len(projections)  # once per layer and projection, not per step
    calls[0] = 0
    out = model.greedy_decode(src, max_new_tokens=12, use_cache=False)
    assert calls[0] == len(projections) * out.shape[1]  # without: at every step


# --- the pair producer and batched decoding -------------------------------------------


def test_pair_batches_group_by_source_length_and_cut_to_the_longest():
    sources = [[5] * n for n in (3, 9, 4, 8, 2, 7)]
    targets = [[6] * (n % 4 + 1) + [EOS] for n in range(6)]
    batches = seq2seq.PairBatches(sources, targets, batch_size=2, pad_id=PAD, seed=1)
    assert len(batches) == 3
    seen = []
    for src, tgt in batches:
        assert src.device.type == "cpu" and src.dtype == torch.long
        assert (src != PAD).sum(1).max() == src.shape[1]  # cut to the longest source
        assert (tgt != PAD).sum(1).max() == tgt.shape[1]  # and to the longest target
        seen += sorted((src != PAD).sum(1).tolist())
    assert sorted(seen) == [2, 3, 4, 7, 8, 9]  # every pair once per epoch
    pairs = {tuple(sorted((s != PAD).sum(1).tolist())) for s, _ in batches}
    assert pairs == {(2, 3), (4, 7), (8, 9)}  # neighbours in length share a batch
    with pytest.raises(ValueError, match="2 sources and 1 targets"):
        seq2seq.PairBatches(sources[:2], targets[:1], batch_size=2, pad_id=PAD)


def test_greedy_decode_all_equals_one_by_one_in_the_sources_order():
    model = _model(max_len=24)
    sources = [torch.randint(3, V, (n,)).tolist() for n in (4, 9, 2, 7, 5)]
    out = seq2seq.greedy_decode_all(model, sources, batch_size=2, limit=lambda S: 6)
    for src, toks in zip(sources, out):  # padded in a batch or alone: the same
        alone = model.greedy_decode(torch.tensor([src]), max_new_tokens=6)
        assert toks == model.cut_at_eos(alone)[0]
    uncached = seq2seq.greedy_decode_all(model, sources, 2, lambda S: 6, False)
    assert uncached == out
    with pytest.raises(ValueError, match="sources is empty"):
        seq2seq.greedy_decode_all(model, [])


def test_greedy_write_goes_from_words_to_tokens():
    from transformer_book.vocab import Vocab

    vocab = Vocab(["<bos>", "<eos>", *(f"w{i}" for i in range(V - 4))])
    model = _model(max_len=24)
    sentences = [["w1", "w2", "w3"], ["w4", "never-seen"]]
    got = seq2seq.greedy_write(model, vocab, sentences, limit=lambda S: 5)
    ids = [vocab.encode(s) for s in sentences]  # the unknown word becomes <unk>
    expected = seq2seq.greedy_decode_all(model, ids, limit=lambda S: 5)
    assert got == [vocab.decode(x) for x in expected]
    no_mask = _model(max_len=24, causal=False)  # decodes without a cache by default
    assert len(seq2seq.greedy_write(no_mask, vocab, sentences, lambda S: 3)) == 2


def test_teacher_forced_scores():
    model = _model()
    src, tgt = _batch()
    sources = [[i for i in row if i != PAD] for row in src.tolist()]
    targets = [[i for i in row if i != PAD] for row in tgt.tolist()]
    model.train()
    nats, all_right = seq2seq.teacher_forced_scores(model, sources, targets, 1)
    assert model.training  # the mode is restored
    model.eval()
    assert nats == pytest.approx(model.loss(src, tgt).item(), rel=1e-5)
    logits = model(src, decoder.shift_right(tgt, BOS))  # (B, T, V)
    right = [
        all(logits[b, t].argmax() == tgt[b, t] for t in range(len(targets[b])))
        for b in range(2)
    ]
    assert all_right == sum(right) / 2
    # with every weight zero the logits are uniform: log V nats per token
    uniform = _model()
    with torch.no_grad():
        for p in uniform.parameters():
            p.zero_()
    assert seq2seq.teacher_forced_scores(uniform, sources, targets)[0] == pytest.approx(
        torch.log(torch.tensor(float(V))).item(), rel=1e-5
    )
    with pytest.raises(ValueError, match="sources is empty"):
        seq2seq.teacher_forced_scores(model, [], [])
