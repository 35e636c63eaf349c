"""transformer_book.checkpoints: a saved model comes back as it was, from its card alone,
and a weights file that changed after training is refused."""

import json

import pytest
import torch

from transformer_book import checkpoints, data_files, gpt


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    config = gpt.GPTConfig(vocab_size=20, max_len=8, d_model=16, n_layers=2, n_heads=2)
    return gpt.GPT(config).eval(), config


def test_round_trip_from_the_card_alone(tiny, tmp_path, monkeypatch):
    model, config = tiny
    card = checkpoints.save(
        model,
        config,
        tmp_path / "tiny",
        {"recipe": "test", "held_out": {"loss": 2.9}},
        dtype=torch.float32,
    )
    assert card["parameters"] == sum(p.numel() for p in model.parameters())
    assert card["model"]["class"] == "GPT" and card["model"]["config"]["d_model"] == 16
    monkeypatch.setenv(checkpoints.CHECKPOINTS_ENV, str(tmp_path))
    loaded, read = checkpoints.load("tiny")
    assert read == card and not loaded.training
    ids = torch.randint(0, 20, (2, 8))
    torch.testing.assert_close(loaded(ids), model(ids), rtol=0, atol=0)


def test_fp16_storage_halves_the_file_and_keeps_the_logits_close(tiny, tmp_path):
    model, config = tiny
    checkpoints.save(model, config, tmp_path / "a", dtype=torch.float32)
    checkpoints.save(model, config, tmp_path / "b")  # fp16
    sizes = [(tmp_path / f / checkpoints.WEIGHTS).stat().st_size for f in "ab"]
    assert sizes[1] < 0.6 * sizes[0]  # half the bytes, plus the same header
    loaded, card = checkpoints.load(tmp_path / "b")
    assert card["dtype"] == "float16" and loaded.lm_head.weight.dtype == torch.float32
    ids = torch.randint(0, 20, (2, 8))
    torch.testing.assert_close(loaded(ids), model(ids), rtol=0, atol=2e-2)


def test_a_changed_weights_file_is_refused_naming_both_digests(tiny, tmp_path):
    model, config = tiny
    card = checkpoints.save(model, config, tmp_path / "t")
    weights = tmp_path / "t" / checkpoints.WEIGHTS
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0xFF  # one bit pattern of one weight
    weights.write_bytes(bytes(raw))
    with pytest.raises(checkpoints.CheckpointError) as err:
        checkpoints.load(tmp_path / "t")
    msg = str(err.value)
    assert str(weights) in msg and card["sha256"] in msg
    assert data_files.sha256_of(weights) in msg


def test_missing_checkpoint_and_bad_config_are_named(tiny, tmp_path, monkeypatch):
    model, config = tiny
    monkeypatch.setenv(checkpoints.CHECKPOINTS_ENV, str(tmp_path))
    checkpoints.save(model, config, tmp_path / "there")
    with pytest.raises(
        checkpoints.CheckpointError, match=r"no checkpoint 'nope'.*\['there'\]"
    ):
        checkpoints.load("nope")
    with pytest.raises(
        ValueError, match="config must be a dataclass instance, got dict"
    ):
        checkpoints.save(model, {"d_model": 16}, tmp_path / "x")
    card = json.loads((tmp_path / "there" / checkpoints.CARD).read_text())
    card["model"]["module"] = "os"
    (tmp_path / "there" / checkpoints.CARD).write_text(json.dumps(card))
    with pytest.raises(checkpoints.CheckpointError, match="outside the book: os"):
        checkpoints.load("there")


def test_files_beside_the_weights_are_verified_too(tiny, tmp_path):
    model, config = tiny
    card = checkpoints.save(
        model, config, tmp_path / "v", files={"vocab.txt": "[PAD]\nthe\n"}
    )
    assert set(card["files"]) == {"vocab.txt"}
    _, read = checkpoints.load(tmp_path / "v")
    assert (
        checkpoints.path(tmp_path / "v") / "vocab.txt"
    ).read_text() == "[PAD]\nthe\n"
    (tmp_path / "v" / "vocab.txt").write_text("[PAD]\nthe\nextra\n")
    with pytest.raises(checkpoints.CheckpointError, match="vocab.txt has sha256"):
        checkpoints.load(tmp_path / "v")
    (tmp_path / "v" / "vocab.txt").unlink()
    with pytest.raises(checkpoints.CheckpointError, match="sha256 missing"):
        checkpoints.load(tmp_path / "v")
    with pytest.raises(ValueError, match="plain file names"):
        checkpoints.save(model, config, tmp_path / "w", files={"../x.txt": ""})


def test_a_model_on_a_base_stores_only_what_it_trained(tiny, tmp_path):
    """``stored``: only the trained part is written; load rebuilds the base with the
    constructor (here GPT's seeded initialisation) and puts the part back."""
    _, config = tiny
    torch.manual_seed(0)
    model = gpt.GPT(config).eval()
    with torch.no_grad():
        for p in model.blocks.layers[1].parameters():
            p.add_(0.5)  # "fine-tuned": the top block only
    torch.manual_seed(0)  # the constructor's base is GPT(config) under this seed
    card = checkpoints.save(
        model,
        config,
        tmp_path / "top",
        dtype=torch.float32,
        stored=["blocks.layers.1."],
    )
    from safetensors.torch import load_file

    written = load_file(str(tmp_path / "top" / checkpoints.WEIGHTS))
    assert written and all(k.startswith("blocks.layers.1.") for k in written)
    assert card["stored"] == ["blocks.layers.1."]
    torch.manual_seed(0)
    loaded, _ = checkpoints.load(tmp_path / "top")
    ids = torch.randint(0, 20, (2, 8))
    torch.testing.assert_close(loaded(ids), model(ids), rtol=0, atol=0)
    with torch.no_grad():
        model.blocks.layers[0].attn.q_proj.weight.add_(1.0)  # changed outside `stored`
    torch.manual_seed(0)
    with pytest.raises(ValueError, match=r"blocks\.layers\.0\.attn\.qkv_proj\.weight"):
        checkpoints.save(model, config, tmp_path / "bad", stored=["blocks.layers.1."])
    with pytest.raises(ValueError, match="matches none"):
        checkpoints.save(model, config, tmp_path / "bad", stored=["nothing."])
