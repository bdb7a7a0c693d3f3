"""Recurrent memory (`mjrl.rl.recurrent`, issue 63): windows of a rollout, padded and masked,
replay the step-by-step rollout exactly; the state is zeroed where an episode begins and no
gradient crosses an episode's end."""

from __future__ import annotations

import pytest
import torch

from mjrl.rl.recurrent import Memory, cut_windows, reset_state, window_starts


def rollout(memory: Memory, x: torch.Tensor, dones: torch.Tensor, state: torch.Tensor):
    """Step by step, as a rollout runs: the state stored before each step, the outputs, and the
    state zeroed after a step that ended an episode."""
    stored, outputs = [], []
    for t in range(x.shape[0]):
        stored.append(state)
        out, state = memory.step(x[t], state)
        outputs.append(out)
        state = reset_state(state, dones[t])
    return torch.stack(stored), torch.stack(outputs)


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_the_written_out_cells_are_torchs_network(rnn_type):
    """`Memory` steps its LSTM or GRU itself; over a window without episode ends, and one step at
    a time, it gives what torch's `nn.LSTM`/`nn.GRU` of the same parameters gives (what export
    runs), two layers deep."""
    torch.manual_seed(0)
    memory = Memory(5, rnn_type, 8, num_layers=2)
    x, state = torch.randn(6, 3, 5), torch.randn(memory.state_layers, 3, 8)
    torch_state = tuple(state.chunk(2)) if rnn_type == "lstm" else state
    whole, whole_final = memory.rnn(x, torch_state)
    whole_final = torch.cat(whole_final) if rnn_type == "lstm" else whole_final
    out, final = memory(x, state, torch.zeros(6, 3, dtype=torch.bool))
    torch.testing.assert_close(out, whole)
    torch.testing.assert_close(final, whole_final)
    first, after_first = memory.step(x[0], state)
    torch.testing.assert_close(first, whole[0])
    torch.testing.assert_close(memory.step(x[1], after_first)[0], whole[1])


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
@pytest.mark.parametrize(("length", "burn_in"), [(4, 0), (3, 2), (7, 7), (10, 3), (7, 0)])
def test_windows_padded_and_masked_replay_the_step_by_step_rollout(rnn_type, length, burn_in):
    """A rollout of 7 steps of 5 envs with episodes ending at random steps: every window (its
    stored first state, its burn-in, the state zeroed where an episode begins, padding before
    the rollout and after it) gives at each of its loss positions the rollout's own output, and
    each step of each env is a loss position exactly once. Windows without padding (7 steps in
    one window of 7) run without a mask, as the update runs them."""
    torch.manual_seed(1)
    steps, envs = 7, 5
    memory = Memory(4, rnn_type, 6)
    x = torch.randn(steps, envs, 4)
    dones = torch.rand(steps, envs) < 0.3
    stored, expected = rollout(memory, x, dones, torch.randn(memory.state_layers, envs, 6))
    episode_start = torch.cat([torch.zeros(1, envs, dtype=torch.bool), dones[:-1]])

    windows = cut_windows(steps, envs, length, burn_in)
    first_step, first_env = windows.first
    state = stored[first_step, :, first_env].transpose(0, 1)  # (S, B, H)
    assert windows.padded == bool((~windows.valid).any())
    valid = windows.valid if windows.padded else None
    with torch.no_grad():
        out, _ = memory(x[windows.step, windows.env], state, window_starts(windows, episode_start), valid)
    got = out[windows.loss]
    want = expected[windows.step, windows.env][windows.loss]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    read = torch.zeros(steps, envs, dtype=torch.long)
    read.index_put_((windows.step[windows.loss], windows.env[windows.loss]), torch.tensor(1), accumulate=True)
    assert bool((read == 1).all())


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_no_gradient_crosses_an_episodes_end(rnn_type):
    torch.manual_seed(2)
    memory = Memory(3, rnn_type, 4)
    x = torch.randn(5, 2, 3, requires_grad=True)
    starts = torch.zeros(5, 2, dtype=torch.bool)
    starts[3, 0] = True  # env 0's second episode begins at step 3
    out, _ = memory(x, torch.zeros(memory.state_layers, 2, 4), starts)
    out[3:, 0].sum().backward()
    assert bool((x.grad[:3, 0] == 0).all()) and bool((x.grad[3:, 0] != 0).any())
    assert bool((x.grad[:, 1] == 0).all())  # env 1's outputs were not in the loss


def test_the_windows_shapes_are_fixed_and_bad_lengths_refused():
    windows = cut_windows(24, 3, 8, 4)
    assert windows.step.shape == (12, 9) and int(windows.loss.sum()) == 24 * 3
    assert int(windows.valid.sum()) == 24 * 3 + 3 * 2 * 4  # each env's second and third chunks burn in
    with pytest.raises(ValueError, match="sequence length 0"):
        cut_windows(24, 3, 0)
