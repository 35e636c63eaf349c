"""Fine-tuning heads: parity with Hugging Face's BertForSequenceClassification,
BertForTokenClassification and BertForQuestionAnswering (random small configs), and
bad input (chapter 12)."""

import os

import pytest
import torch

from transformer_book import bert, bert_heads, minilm_weights

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from test_bert import SMALL, hf_config  # noqa: E402  (the same model, its HF twin)


def inputs(B=3, T=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, SMALL.vocab_size, (B, T), generator=g)
    types = (torch.arange(T) >= T // 2).long().expand(B, T).clone()
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    ids[mask == 0] = 0
    return ids, types, mask


def ours_from(ref, head: torch.nn.Module, names: dict[str, str]):
    sd = ref.state_dict()
    enc = {k[5:]: v for k, v in sd.items() if k[:5] == "bert."}
    # token classification and QA models have no pooler: keep ours (unused there)
    enc.setdefault("pooler.dense.weight", head.encoder.pooler.weight.detach())
    enc.setdefault("pooler.dense.bias", head.encoder.pooler.bias.detach())
    minilm_weights.load_hf_state_dict(head.encoder, enc)
    own = dict(head.named_parameters())
    with torch.no_grad():
        for ours, theirs in names.items():
            own[ours].copy_(sd[theirs])
    return head.eval()


def test_sequence_classifier_equals_hugging_face():
    torch.manual_seed(0)
    ref = transformers.BertForSequenceClassification(hf_config(SMALL, num_labels=3))
    ours = ours_from(
        ref.eval(),
        bert_heads.SequenceClassifier(bert.BertModel(SMALL), 3),
        {
            "classifier.weight": "classifier.weight",
            "classifier.bias": "classifier.bias",
        },
    )
    ids, types, mask = inputs()
    theirs = ref(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    torch.testing.assert_close(ours(ids, types, mask), theirs, atol=1e-5, rtol=0)


def test_token_classifier_equals_hugging_face():
    torch.manual_seed(1)
    ref = transformers.BertForTokenClassification(hf_config(SMALL, num_labels=5))
    ours = ours_from(
        ref.eval(),
        bert_heads.TokenClassifier(bert.BertModel(SMALL), 5),
        {
            "classifier.weight": "classifier.weight",
            "classifier.bias": "classifier.bias",
        },
    )
    ids, types, mask = inputs(seed=1)
    theirs = ref(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    keep = mask.bool()
    torch.testing.assert_close(
        ours(ids, types, mask)[keep], theirs[keep], atol=1e-5, rtol=0
    )


def test_span_extractor_equals_hugging_face():
    torch.manual_seed(2)
    ref = transformers.BertForQuestionAnswering(hf_config(SMALL))
    ours = ours_from(
        ref.eval(),
        bert_heads.SpanExtractor(bert.BertModel(SMALL)),
        {
            "qa_outputs.weight": "qa_outputs.weight",
            "qa_outputs.bias": "qa_outputs.bias",
        },
    )
    ids, types, mask = inputs(seed=2)
    theirs = ref(input_ids=ids, token_type_ids=types, attention_mask=mask)
    start, end = ours(ids, types, mask)
    keep = mask.bool()
    torch.testing.assert_close(
        start[keep], theirs.start_logits[keep], atol=1e-5, rtol=0
    )
    torch.testing.assert_close(end[keep], theirs.end_logits[keep], atol=1e-5, rtol=0)


def test_heads_train_the_encoder_and_check_input():
    model = bert_heads.SequenceClassifier(bert.BertModel(SMALL), 2)
    ids, types, mask = inputs()
    model(ids, types, mask).sum().backward()
    assert model.encoder.embeddings.token.weight.grad is not None  # not frozen
    with pytest.raises(ValueError, match="n_classes must be >= 2, got 1"):
        bert_heads.SequenceClassifier(bert.BertModel(SMALL), 1)
    with pytest.raises(ValueError, match="n_labels must be >= 2, got 0"):
        bert_heads.TokenClassifier(bert.BertModel(SMALL), 0)
    with pytest.raises(ValueError, match="integer d_model.*Linear"):
        bert_heads.SpanExtractor(torch.nn.Linear(3, 3))


def test_sequence_classifier_mean_pooling_reads_the_real_tokens():
    torch.manual_seed(2)
    model = bert_heads.SequenceClassifier(bert.BertModel(SMALL), 2, pooling="mean")
    model.eval()
    ids, types, mask = inputs()
    hidden, _ = model.encoder(ids, types, mask)
    m = mask.float()[..., None]
    want = model.classifier((hidden * m).sum(1) / m.sum(1))
    torch.testing.assert_close(model(ids, types, mask), want, atol=1e-6, rtol=0)
    cls = bert_heads.SequenceClassifier(model.encoder, 2)  # the default reads [CLS]
    cls.classifier.load_state_dict(model.classifier.state_dict())
    assert not torch.allclose(cls.eval()(ids, types, mask), want, atol=1e-3)
    with pytest.raises(ValueError, match="pooling must be 'cls' or 'mean', got 'max'"):
        bert_heads.SequenceClassifier(bert.BertModel(SMALL), 2, pooling="max")
    mask[0] = 0  # a row that is all padding: zeros pooled, a finite score (no NaN)
    assert torch.isfinite(model(ids, types, mask)).all()


def test_mean_pooling_ignores_padding_and_pools_zeros_from_an_empty_row():
    torch.manual_seed(3)
    model = bert_heads.SequenceClassifier(bert.BertModel(SMALL), 2, pooling="mean")
    model.eval()
    ids = torch.tensor([[2, 5, 6, 3]])
    longer = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)  # + [PAD]s
    mask = torch.cat([torch.ones(1, 4), torch.zeros(1, 3)], dim=1).long()
    torch.testing.assert_close(
        model(longer, attention_mask=mask), model(ids), atol=1e-5, rtol=0
    )
    empty = torch.zeros_like(mask)  # nothing to pool: the head sees zeros
    torch.testing.assert_close(
        model(longer, attention_mask=empty)[0], model.classifier.bias, atol=0, rtol=0
    )
