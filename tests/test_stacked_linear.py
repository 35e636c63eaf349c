"""transformer_book.stacked_linear: linear layers that read one input, as one matrix."""

import pytest
import torch
from torch import nn

from transformer_book import stacked_linear

NAMES = ("a", "b", "c")


def three_layers(bias: bool = True) -> list[nn.Linear]:
    torch.manual_seed(0)
    return [nn.Linear(6, width, bias=bias) for width in (6, 3, 3)]


@pytest.mark.parametrize("bias", [True, False])
def test_stack_moves_the_weights_and_computes_what_the_parts_did(bias):
    parts = three_layers(bias)
    x = torch.randn(2, 5, 6)  # (B, T, in)
    one = stacked_linear.stack(parts, NAMES)
    assert one.weight.shape == (12, 6) and (one.bias is None) == (not bias)
    expected = torch.cat([p(x) for p in parts], dim=-1)  # (2, 5, 12)
    torch.testing.assert_close(one(x), expected)
    assert one.weight.data_ptr() != parts[0].weight.data_ptr()  # new tensors
    blocks = [
        stacked_linear.RowBlock(one, lo, hi) for lo, hi in ((0, 6), (6, 9), (9, 12))
    ]
    for block, part in zip(blocks, parts):
        torch.testing.assert_close(block(x), part(x))
        assert (block.in_features, block.out_features) == (6, part.out_features)
    assert repr(blocks[1]).startswith("RowBlock(rows 6:9 of Linear(")


def test_a_row_block_writes_into_the_stacked_matrix():
    one = stacked_linear.stack(three_layers(), NAMES)
    block = stacked_linear.RowBlock(one, 6, 9)
    with torch.no_grad():
        block.weight.zero_()
        block.bias.fill_(2.0)
    assert one.weight[6:9].abs().sum() == 0 and one.weight[:6].abs().sum() > 0
    assert torch.equal(one.bias[6:9], torch.full((3,), 2.0))


def test_stack_keeps_the_parts_trainable_or_frozen():
    parts = three_layers()
    assert all(p.requires_grad for p in stacked_linear.stack(parts, NAMES).parameters())
    for p in parts:
        p.requires_grad_(False)
    assert not any(
        p.requires_grad for p in stacked_linear.stack(parts, NAMES).parameters()
    )


def test_stack_names_a_mixed_freeze_and_a_layer_it_cannot_stack():
    parts = three_layers()
    parts[1].bias.requires_grad_(False)  # b's weight trains, its bias does not
    with pytest.raises(ValueError, match=r"a, b and c .* b=\[False, True\]"):
        stacked_linear.stack(parts, NAMES)
    wrapped = [nn.Sequential(p) for p in three_layers()]
    with pytest.raises(TypeError, match="plain nn.Linear projections; got Sequential"):
        stacked_linear.stack(wrapped, NAMES)


def test_stack_state_dict_stacks_the_old_keys_in_order_and_leaves_others():
    parts = three_layers()
    old = {
        f"att.{n}.{k}": getattr(p, k)
        for n, p in zip(NAMES, parts)
        for k in ("weight", "bias")
    }
    old["att.out.weight"] = torch.ones(1)
    stacked_linear.stack_state_dict(old, "att.", NAMES, "abc")
    assert sorted(old) == ["att.abc.bias", "att.abc.weight", "att.out.weight"]
    torch.testing.assert_close(
        old["att.abc.weight"], stacked_linear.stack(parts, NAMES).weight
    )
    new = {"att.abc.weight": torch.zeros(12, 6)}  # already stacked: nothing to do
    stacked_linear.stack_state_dict(new, "att.", NAMES, "abc")
    assert list(new) == ["att.abc.weight"]


def test_stacked_product_is_the_parts_side_by_side_with_their_gradients():
    parts = three_layers()
    x = torch.randn(4, 6, requires_grad=True)
    out = stacked_linear.stacked_product(x, parts)  # (4, 12)
    torch.testing.assert_close(out, torch.cat([p(x) for p in parts], dim=-1))
    out.square().sum().backward()
    grads = [p.weight.grad.clone() for p in parts]
    for p in parts:
        p.weight.grad = None
    torch.cat([p(x) for p in parts], dim=-1).square().sum().backward()
    for g, p in zip(grads, parts):
        torch.testing.assert_close(g, p.weight.grad)
