"""torch_threads: the count inside the block, and the one restored after it."""

from __future__ import annotations

import torch

from stateseer.rnn_models.threads import torch_threads


def test_the_block_runs_on_n_threads_and_the_count_comes_back():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            with torch_threads(1):  # nested: nothing to change
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        try:
            with torch_threads(1):
                raise ValueError("boom")
        except ValueError:
            pass
        assert torch.get_num_threads() == 2  # restored after an error too
    finally:
        torch.set_num_threads(before)
