"""Trace-recording throughput: stateseer's batched recorder vs a per-step loop vs the matmul roof.

What is measured, in one run on the CPU:

1. ``stateseer_tok_s`` — tokens per second of
   :func:`stateseer.rnn_models.record.record_traces` recording
   the top layer (``layer=-1``) of a seeded, randomly initialised 2-layer GRU
   ``RNNClassifier('gru', vocab_size=20000, n_classes=2, embed=128, hidden=256, layers=2)``
   over synthetic inputs (lengths 5..60, mean ~20, ``--tokens`` in all), writing hidden
   states and probabilities into ``.npy`` memory maps in a temp dir, as ``record_run`` does.
   One warm-up call on a small subset comes first. The same run also splits the time into
   the model's forward pass (``model.trace``, summed over the recorder's worker threads,
   so it can exceed the wall time when batches run in parallel): ``forward_thread_s``.
2. ``stepwise_tok_s`` — tokens per second of the way stepping extractors (AALpy-style,
   DeepStellar-style) record: one input at a time, one token at a time, through two
   ``torch.nn.GRUCell`` s carrying the GRU layers' weights, with the head's softmax at every
   step and the hidden state collected per step. It runs on the first ``--stepwise-tokens``
   tokens (it is a rate). Each input is embedded once up front rather than per token, which
   favours the baseline. ``max_abs_diff`` checks on a few inputs that its hidden states equal
   the ones stateseer recorded.
3. ``matmul_gflops`` — the machine's dense float32 roof: best of a few 2048×2048 ``torch.matmul``.
4. ``sharded_tok_s`` — the same inputs recorded the way ``record_run`` writes shards
   (:func:`stateseer.rnn_models.record.record_shard` per ``--shard-size`` inputs: surface ids, the
   small arrays, fsync and the rename included); ``sharded_vs_unsharded`` is its ratio to
   ``stateseer_tok_s``, measured in the same run.
5. ``stateseer_gflops`` — GRU-forward FLOPs per token (see :func:`flops_per_token`) times
   ``stateseer_tok_s``; ``roof_fraction`` is that over ``matmul_gflops``.

Rates are best-of (``--repeats`` stateseer runs; the fastest of 4 parts of the per-step loop;
the fastest of 5 matmuls), with medians alongside, and ``loadavg_1m`` records how busy the
machine was: with 2 cores, other processes make PyTorch's 2-thread OpenMP kernels wait on
each other at every op: that slows the batched recorder several-fold while the per-step
loop barely changes (compare ``--threads 1``).

The last line of output is one JSON object (see ``/work/shared/DESIGN.md``).

Run: ``python benchmarks/record_throughput.py [--tokens 200000] [--stepwise-tokens 20000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from stateseer.core.traces import shard_layout
from stateseer.rnn_models.models import RNNClassifier
from stateseer.rnn_models.record import ShardInputs, record_shard, record_traces

VOCAB, CLASSES, EMBED, HIDDEN, LAYERS = 20000, 2, 128, 256, 2
MIN_LEN, MAX_LEN = 5, 60


def flops_per_token(embed: int = EMBED, hidden: int = HIDDEN, layers: int = LAYERS,
                    n_classes: int = CLASSES) -> int:
    """FLOPs of one GRU-classifier step (multiply and add each count as one FLOP).

    Per GRU layer with input size I and hidden size H the three gates (r, z, n) need an
    input matmul (3H×I) and a recurrent matmul (3H×H): ``2·3·H·(I+H)`` FLOPs. Layer 0 has
    I = embed, the others I = hidden. The head is one (C×H) matmul: ``2·H·C``. Biases,
    gate nonlinearities, the softmax and the embedding lookup are O(H) and left out.
    For the default model: 2·3·256·384 + 2·3·256·512 + 2·256·2 = 1,377,280 FLOPs/token.
    """
    total = 0
    for i in range(layers):
        inp = embed if i == 0 else hidden
        total += 2 * 3 * hidden * (inp + hidden)
    return total + 2 * hidden * n_classes


def make_inputs(n_tokens: int, seed: int) -> list[np.ndarray]:
    """Random token ids in inputs of 5..60 tokens (gamma-shaped, mean ~20), ≥ n_tokens total."""
    rng = np.random.default_rng(seed)
    seqs: list[np.ndarray] = []
    total = 0
    while total < n_tokens:
        lens = np.clip(np.rint(MIN_LEN + rng.gamma(2.0, 7.5, size=4096)), MIN_LEN, MAX_LEN)
        for n in lens.astype(np.int64):
            seqs.append(rng.integers(1, VOCAB, size=int(n), dtype=np.int64))
            total += int(n)
            if total >= n_tokens:
                break
    return seqs


class TimedTrace:
    """Delegates to a model and adds up the time spent in its ``trace`` (the forward pass)."""

    def __init__(self, model: RNNClassifier) -> None:
        self.model = model
        self.n_classes, self.n_layers = model.n_classes, model.n_layers
        self.forward_s = 0.0
        self.n_calls = 0

    def initial(self, layer: int = -1):
        return self.model.initial(layer)

    def trace(self, ids, lengths, layer: int = -1):
        t0 = time.perf_counter()
        out = self.model.trace(ids, lengths, layer)
        self.forward_s += time.perf_counter() - t0
        self.n_calls += 1
        return out


def record_kwargs(args: argparse.Namespace) -> dict[str, int]:
    kw = {}
    if args.batch_size is not None:
        kw["batch_size"] = args.batch_size
    if args.batch_tokens is not None:
        kw["batch_tokens"] = args.batch_tokens
    return kw


def bench_stateseer(model: RNNClassifier, seqs: list[np.ndarray], tmp: Path,
                    args: argparse.Namespace) -> dict:
    """Record all of ``seqs`` into memory maps; best of ``--repeats`` runs."""
    kw = record_kwargs(args)
    n_steps = int(sum(len(s) for s in seqs))
    warm = seqs[: min(len(seqs), 256)]
    n_warm = int(sum(len(s) for s in warm))
    record_traces(model, warm, np.zeros((n_warm, HIDDEN), np.float32),
                  np.zeros((n_warm, CLASSES), np.float32),
                  np.zeros((len(warm), CLASSES), np.float32), layer=-1, **kw)
    best = None
    totals = []
    for r in range(args.repeats):
        d = tmp / f"rec{r}"
        d.mkdir()
        hidden = np.lib.format.open_memmap(d / "hidden.npy", "w+", np.float32, (n_steps, HIDDEN))
        proba = np.lib.format.open_memmap(d / "proba.npy", "w+", np.float32, (n_steps, CLASSES))
        final = np.zeros((len(seqs), CLASSES), np.float32)
        timed = TimedTrace(model)
        t0 = time.perf_counter()
        record_traces(timed, seqs, hidden, proba, final, layer=-1, **kw)
        hidden.flush()
        proba.flush()
        total = time.perf_counter() - t0
        totals.append(total)
        res = {"total_s": total, "forward_s": timed.forward_s, "n_batches": timed.n_calls,
               "hidden": hidden}
        if best is None or total < best["total_s"]:
            best = res
    assert best is not None
    best["tok_s"] = n_steps / best["total_s"]
    best["tok_s_median"] = n_steps / statistics.median(totals)
    return best


def bench_sharded(model: RNNClassifier, seqs: list[np.ndarray], tmp: Path,
                  args: argparse.Namespace) -> dict:
    """The same inputs recorded as ``record_run`` writes shards: one
    :func:`stateseer.rnn_models.record.record_shard` per ``--shard-size`` inputs (surface ids, the
    small arrays, fsync and the rename included); best of ``--repeats`` runs."""
    tokens = [[str(t) for t in s] for s in seqs]
    surface = {t: i for i, t in enumerate(dict.fromkeys(t for toks in tokens for t in toks))}
    layout = shard_layout(len(seqs), args.shard_size)
    labels = np.zeros(len(seqs), np.int64)
    n_steps = int(sum(len(s) for s in seqs))
    totals = []
    for r in range(args.repeats):
        d = tmp / f"shards{r}"
        t0 = time.perf_counter()
        for k, (a, b) in enumerate(layout):
            inputs = ShardInputs(tokens=tokens[a:b], seqs=seqs[a:b], labels=labels[a:b],
                                 rows=np.arange(a, b), texts=[""] * (b - a))
            record_shard(model, inputs, surface, d, k, batch_size=args.batch_size or 256)
        totals.append(time.perf_counter() - t0)
    return {"tok_s": n_steps / min(totals), "tok_s_median": n_steps / statistics.median(totals),
            "n_shards": len(layout), "total_s": min(totals)}


def gru_cell(rnn: nn.GRU) -> nn.GRUCell:
    """A GRUCell with the weights of a single-layer GRU."""
    cell = nn.GRUCell(rnn.input_size, rnn.hidden_size)
    with torch.no_grad():
        cell.weight_ih.copy_(rnn.weight_ih_l0)
        cell.weight_hh.copy_(rnn.weight_hh_l0)
        cell.bias_ih.copy_(rnn.bias_ih_l0)
        cell.bias_hh.copy_(rnn.bias_hh_l0)
    return cell.eval()


@torch.no_grad()
def stepwise_record(model: RNNClassifier, seqs: list[np.ndarray]) -> list[np.ndarray]:
    """One input at a time, one token at a time; returns the top layer's states per input."""
    cells = [gru_cell(rnn) for rnn in model.rnns]
    head = model.head
    out = []
    for s in seqs:
        x_all = model.embedding(torch.from_numpy(s))  # (T, embed), looked up once per input
        hs = [torch.zeros(1, HIDDEN) for _ in cells]
        states, probs = [], []
        for t in range(len(s)):
            x = x_all[t : t + 1]
            for i, cell in enumerate(cells):
                hs[i] = cell(x, hs[i])
                x = hs[i]
            probs.append(torch.softmax(head(x), dim=-1))
            states.append(x)
        out.append(torch.cat(states).numpy())
        torch.cat(probs)
    return out


def bench_stepwise(model: RNNClassifier, seqs: list[np.ndarray], n_tokens: int,
                   n_chunks: int = 4):
    """Rate of the per-step loop on a prefix of ``seqs`` (≥ ``n_tokens`` tokens).

    The prefix is timed in ``n_chunks`` parts and the fastest part's rate counts, as for
    stateseer's best-of runs: on a shared machine this favours the baseline.
    """
    subset, total = [], 0
    for s in seqs:
        if total >= n_tokens:
            break
        subset.append(s)
        total += len(s)
    stepwise_record(model, subset[:5])  # warm-up
    states: list[np.ndarray] = []
    rates = []
    for part in np.array_split(np.arange(len(subset)), n_chunks):
        chunk = [subset[i] for i in part]
        t0 = time.perf_counter()
        states += stepwise_record(model, chunk)
        rates.append(sum(len(c) for c in chunk) / (time.perf_counter() - t0))
    return max(rates), statistics.median(rates), total, states


def bench_classifier_adapter(n_inputs: int, repeats: int) -> dict:
    """#50: ClassifierAdapter (every prefix read) against RecurrentAdapter (one pass) on
    the same LSTM (Embedding 64 -> LSTM 128 -> Linear on the last state) over the first
    ``n_inputs`` Rotten Tomatoes test snippets, recorded by the same ``record_traces``;
    the best of ``repeats`` each, and the largest difference of their predictions."""
    from stateseer.rnn_models.classifier import ClassifierAdapter
    from stateseer.rnn_models.datasets import load_dataset
    from stateseer.rnn_models.models import RecurrentAdapter
    from stateseer.rnn_models.tokenizers import Vocab

    ds = load_dataset("rotten_tomatoes")
    vocab = Vocab.build([ds.tokens[i] for i in ds.splits["train"]])
    seqs = [np.array(vocab.encode(ds.tokens[i]), np.int64)
            for i in ds.splits["test"][:n_inputs]]

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.lstm = nn.Embedding(len(vocab), 64), nn.LSTM(64, 128, batch_first=True)
            self.out = nn.Linear(128, 2)

        def forward(self, ids):
            h, _ = self.lstm(self.emb(ids))
            return self.out(h[:, -1])

    torch.manual_seed(0)
    net = Net().eval()
    fast = RecurrentAdapter(net.emb, net.lstm, net.out, classes=["rotten", "fresh"])
    exact = ClassifierAdapter(net, vocab=vocab.tokens, tokenize=str.split,
                              classes=["rotten", "fresh"])
    n = int(sum(map(len, seqs)))

    def timed(model) -> tuple[float, np.ndarray]:
        best, proba = np.inf, None
        for _ in range(repeats):
            h = np.zeros((n, 128), np.float32)
            proba = np.zeros((n, 2), np.float32)
            t0 = time.perf_counter()
            with torch.no_grad():
                record_traces(model, seqs, h, proba, np.zeros((len(seqs), 2), np.float32))
            best = min(best, time.perf_counter() - t0)
        return best, proba

    fast_s, p_fast = timed(fast)
    exact_s, p_exact = timed(exact)
    return {"inputs": len(seqs), "tokens": n, "recurrent_adapter_s": round(fast_s, 3),
            "classifier_adapter_s": round(exact_s, 3),
            "ratio": round(exact_s / fast_s, 2),
            "max_abs_diff": float(np.abs(p_fast - p_exact).max())}


def matmul_gflops(n: int = 2048, repeats: int = 5) -> tuple[float, float]:
    """Best and median GFLOP/s of an n×n float32 matmul."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.matmul(a, b)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        ts.append(time.perf_counter() - t0)
    flops = 2 * n**3
    return flops / min(ts) / 1e9, flops / statistics.median(ts) / 1e9


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=200_000, help="tokens to record (≥)")
    ap.add_argument("--stepwise-tokens", type=int, default=20_000,
                    help="tokens for the per-step baseline (a rate; a prefix of the inputs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3, help="stateseer runs; the best counts")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="record_traces batch_size (default: record_traces's own)")
    ap.add_argument("--batch-tokens", type=int, default=None,
                    help="record_traces batch_tokens (default: record_traces's own)")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--matmul-n", type=int, default=2048)
    ap.add_argument("--shard-size", type=int, default=2_000,
                    help="inputs per shard of the sharded recording (default: 2,000, so the "
                    "default inputs make several shards)")
    ap.add_argument("--adapter-inputs", type=int, default=2_000,
                    help="Rotten Tomatoes test inputs of the ClassifierAdapter comparison")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    load_at_start = os.getloadavg()[0]
    torch.manual_seed(args.seed)
    model = RNNClassifier("gru", vocab_size=VOCAB, n_classes=CLASSES, embed=EMBED,
                          hidden=HIDDEN, layers=LAYERS).eval()
    seqs = make_inputs(args.tokens, args.seed)
    lengths = np.array([len(s) for s in seqs])
    n_tokens = int(lengths.sum())
    print(f"{len(seqs):,} inputs, {n_tokens:,} tokens, length mean {lengths.mean():.1f} "
          f"(min {lengths.min()}, max {lengths.max()}); torch threads "
          f"{torch.get_num_threads()}")

    mm_best, mm_median = matmul_gflops(args.matmul_n)
    print(f"matmul {args.matmul_n}² float32: {mm_best:.1f} GFLOP/s (median {mm_median:.1f})")

    with tempfile.TemporaryDirectory(prefix="stateseer-bench-") as tmp:
        rec = bench_stateseer(model, seqs, Path(tmp), args)
        print(f"stateseer record_traces: {rec['tok_s']:,.0f} tok/s best of {args.repeats} "
              f"(median {rec['tok_s_median']:,.0f}) "
              f"({rec['total_s']:.2f} s wall; forward {rec['forward_s']:.2f} s summed over "
              f"worker threads; {rec['n_batches']} batches)")
        sh = bench_sharded(model, seqs, Path(tmp), args)
        print(f"sharded recording ({sh['n_shards']} shards of {args.shard_size:,} inputs, "
              f"record_shard each): {sh['tok_s']:,.0f} tok/s best of {args.repeats} "
              f"(median {sh['tok_s_median']:,.0f}); {sh['tok_s'] / rec['tok_s']:.2f}x the "
              "unsharded recorder")
        step_tok_s, step_median, step_tokens, step_states = bench_stepwise(
            model, seqs, args.stepwise_tokens)
        print(f"per-step GRUCell loop: {step_tok_s:,.0f} tok/s (median of 4 parts "
              f"{step_median:,.0f}) on {step_tokens:,} tokens")
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        n_check = min(8, len(step_states))
        max_diff = max(
            float(np.abs(np.asarray(rec["hidden"][offsets[i]:offsets[i + 1]])
                         - step_states[i]).max())
            for i in range(n_check)
        )
        del rec["hidden"]
    print(f"stepwise vs recorded hidden states, {n_check} inputs: max |diff| {max_diff:.2e}")
    ca = bench_classifier_adapter(args.adapter_inputs, args.repeats)
    print(f"ClassifierAdapter (every prefix) vs RecurrentAdapter (one pass), same LSTM, "
          f"{ca['inputs']:,} Rotten Tomatoes test inputs ({ca['tokens']:,} tokens): "
          f"{ca['classifier_adapter_s']:.2f} s against {ca['recurrent_adapter_s']:.2f} s = "
          f"{ca['ratio']:.1f}x (target at most 10x); predictions differ by at most "
          f"{ca['max_abs_diff']:.1e}")

    fpt = flops_per_token()
    gflops = fpt * rec["tok_s"] / 1e9
    result = {
        "stateseer_tok_s": round(rec["tok_s"], 1),
        "stateseer_tok_s_median": round(rec["tok_s_median"], 1),
        "stepwise_tok_s": round(step_tok_s, 1),
        "stepwise_tok_s_median": round(step_median, 1),
        "matmul_gflops": round(mm_best, 2),
        "matmul_gflops_median": round(mm_median, 2),
        "stateseer_gflops": round(gflops, 2),
        "speedup_vs_stepwise": round(rec["tok_s"] / step_tok_s, 2),
        "roof_fraction": round(gflops / mm_best, 4),
        "flops_per_token": fpt,
        "n_tokens": n_tokens,
        "n_inputs": len(seqs),
        "stepwise_tokens": step_tokens,
        "max_abs_diff": max_diff,
        "sharded_tok_s": round(sh["tok_s"], 1),
        "sharded_tok_s_median": round(sh["tok_s_median"], 1),
        "sharded_vs_unsharded": round(sh["tok_s"] / rec["tok_s"], 3),
        "n_shards": sh["n_shards"],
        "shard_size": args.shard_size,
        "stateseer_total_s": round(rec["total_s"], 3),
        "stateseer_forward_thread_s": round(rec["forward_s"], 3),
        "n_batches": rec["n_batches"],
        "batch_size": args.batch_size,
        "batch_tokens": args.batch_tokens,
        "torch_threads": torch.get_num_threads(),
        "loadavg_1m": load_at_start,
        "classifier_adapter": ca,
        "classifier_adapter_ratio": ca["ratio"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
