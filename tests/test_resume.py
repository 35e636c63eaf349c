"""transformer_book.resume: a crashed run resumes from its last checkpoint and takes the
same steps as one never stopped; a folder without a checkpoint is named (several
processes: tests/test_train_cli.py runs torchrun)."""

import pytest
import torch

from test_training import (  # the same problems, model and recipe
    RECIPE,
    STREAM,
    mse,
    regression_problem,
    tiny_gpt,
)
from transformer_book import lm_data, resume, training


def test_a_crash_resumes_from_the_last_periodic_checkpoint(tmp_path):
    batches = lm_data.WindowBatches(STREAM, 4, 16, seed=2)
    full = training.train(tiny_gpt(), batches, lm_data.next_token_loss, 10, **RECIPE)

    def crash(step, loss):
        if step == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        training.train(tiny_gpt(), batches, lm_data.next_token_loss, 10, on_step=crash,
                       checkpoint=tmp_path, checkpoint_every=3, **RECIPE)  # fmt: skip
    assert resume.load_checkpoint(tmp_path, tiny_gpt())[0] == 6  # steps 3 and 6
    torch.manual_seed(123)  # another random state, as in a new process
    resumed = training.train(tiny_gpt(seed=5), batches, lm_data.next_token_loss, 10,
                             checkpoint=tmp_path, resume=True, **RECIPE)  # fmt: skip
    torch.testing.assert_close(torch.tensor(resumed), torch.tensor(full), atol=1e-6,
                               rtol=0)  # fmt: skip
    step, history = resume.load_checkpoint(tmp_path, tiny_gpt())
    assert step == 10 and history == resumed


def test_a_folder_without_a_checkpoint_is_named(tmp_path):
    model, _ = regression_problem()
    with pytest.raises(ValueError, match="holds no model.safetensors"):
        resume.load_checkpoint(tmp_path, model)
    training.train(model, [(torch.ones(1, 3), torch.ones(1, 1))], mse, steps=1,
                   checkpoint=tmp_path, progress=False)  # fmt: skip
    assert resume.load_checkpoint(tmp_path, model)[0] == 1
