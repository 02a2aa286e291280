"""A Hugging Face Mamba checkpoint as the backbone of a classifier stateseer trains
(``stateseer train --init hf:PATH``).

``PATH`` is a local ``save_pretrained`` directory of a ``MambaModel`` or
``MambaForCausalLM`` (model type ``mamba``) with its tokenizer; nothing is downloaded and no
code from the checkpoint runs. The classifier is the checkpoint's embeddings and residual
blocks (RMSNorm → mixer → residual), its final norm, and a linear head that stateseer adds
and trains on every position's output, so each step has a prediction of its own. Training
fine-tunes the whole model (``--lr`` and the other ``train`` options apply; the sizes are
the checkpoint's).

What is recorded is the *true recurrent state* of the traced block after every token, as
``--state`` says (the options of stateseer's own Mamba, :mod:`stateseer.rnn_models.mamba`):
the SSM state ``S_t`` (``ssm``), with the convolution buffer (``full``), or its average
(``summary``). transformers keeps only the last state in its cache, so the mixer's
computation is redone here from the checkpoint's own weights with stateseer's parallel scan
(:func:`~stateseer.rnn_models.mamba.linear_scan`), every step's state kept; the tests check
it against stepping transformers' model with its cache, and the last step's prediction
against transformers' forward pass (:meth:`HFMambaClassifier.predict`). Stepping and state
forcing are stateseer's Mamba's, on the same weights.

The run directory keeps everything: the checkpoint's config in ``config.json``'s model
section (``hf_config``), the fine-tuned weights in ``model.pt``, the tokenizer in
``RUN/tokenizer/``, so later commands never read ``PATH`` again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from stateseer.core.errors import CheckpointError
from stateseer.rnn_models.hf import (
    _first_line,
    _quiet,
    _require_transformers,
    checkpoint_dir,
    tokenize_with,
    tokenizer_vocab,
)
from stateseer.rnn_models.layered import LayeredClassifier
from stateseer.rnn_models.mamba import STATES, MambaClassifier, MambaLayer, MambaState

__all__ = ["HF_MAMBA", "TOKENIZER_DIR", "HFMambaClassifier", "build_hf_mamba",
           "load_backbone"]

#: the ``arch`` of such a run in ``config.json``
HF_MAMBA = "hf-mamba"
#: where the run keeps the checkpoint's tokenizer
TOKENIZER_DIR = "tokenizer"


def load_backbone(path: str | Path) -> tuple[Any, Any]:
    """The ``MambaModel`` (weights from ``path``) and its tokenizer.

    Raises
    ------
    CheckpointError
        No checkpoint, another model type (named, with what ``hf:`` takes instead), an
        activation other than SiLU, or files that cannot be loaded (one line each).
    """
    path, tf = checkpoint_dir(path)
    try:
        config = tf.AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path}/config.json cannot be read ({_first_line(exc)}); "
                              "save the model with save_pretrained") from None
    kind = getattr(config, "model_type", None)
    if kind != "mamba":
        raise CheckpointError(
            f"{path} holds a {kind!r} model; train --init hf: takes a Mamba backbone "
            "(MambaModel or MambaForCausalLM); a *ForSequenceClassification model with a "
            "head at every position goes to `stateseer create --model hf:PATH`")
    _check_config(config, path)
    try:
        with _quiet(tf):
            backbone = tf.MambaModel.from_pretrained(str(path), local_files_only=True)
            tokenizer = tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path} cannot be loaded as a Mamba model with its tokenizer "
                              f"({_first_line(exc)}); save both with save_pretrained"
                              ) from None
    return backbone.float(), tokenizer


def _check_config(config: Any, where: Any) -> None:
    if config.hidden_act != "silu":
        raise CheckpointError(f"{where}: hidden_act is {config.hidden_act!r}; the recorded "
                              "recurrent state is computed for Mamba's SiLU only")


def build_hf_mamba(section: dict[str, Any], run_dir: str | Path | None = None
                   ) -> HFMambaClassifier:
    """The untrained classifier a run's ``config.json`` model section describes (its
    ``hf_config``), with the tokenizer kept in ``run_dir``; ``model.pt`` is loaded by the
    caller."""
    tf = _require_transformers()
    config = tf.MambaConfig(**section["hf_config"])
    _check_config(config, "config.json's hf_config")
    tokenizer = None
    if run_dir is not None and (Path(run_dir) / TOKENIZER_DIR).is_dir():
        try:
            with _quiet(tf):
                tokenizer = tf.AutoTokenizer.from_pretrained(
                    str(Path(run_dir) / TOKENIZER_DIR), local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise CheckpointError(f"{Path(run_dir) / TOKENIZER_DIR} cannot be loaded "
                                  f"({_first_line(exc)}); retrain the run") from None
    with _quiet(tf):
        backbone = tf.MambaModel(config)
    return HFMambaClassifier(backbone, int(section["n_classes"]),
                             state=section.get("state", "full"), tokenizer=tokenizer)


class HFMambaLayer(MambaLayer):
    """One transformers ``MambaBlock`` as a :class:`~stateseer.rnn_models.mamba.MambaLayer`:
    the block's RMSNorm before the mixer's input projection, its mixer's weights for the
    rest (the residual is the block's input, as in transformers)."""

    def __init__(self, block: nn.Module) -> None:
        nn.Module.__init__(self)
        mixer = block.mixer
        self.block = block
        self.d_inner, self.d_state = mixer.intermediate_size, mixer.ssm_state_size
        self.d_conv, self.dt_rank = mixer.conv_kernel_size, mixer.time_step_rank
        self.signed = False

    # the mixer's weights under stateseer's Mamba names
    in_proj = property(lambda self: self.block.mixer.in_proj)
    conv = property(lambda self: self.block.mixer.conv1d)
    x_proj = property(lambda self: self.block.mixer.x_proj)
    dt_proj = property(lambda self: self.block.mixer.dt_proj)
    out_proj = property(lambda self: self.block.mixer.out_proj)
    A_log = property(lambda self: self.block.mixer.A_log)
    D = property(lambda self: self.block.mixer.D)

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return self.in_proj(self.block.norm(x)).chunk(2, dim=-1)


class HFMambaClassifier(MambaClassifier):
    """A transformers ``MambaModel`` with a linear head at every step.

    Parameters
    ----------
    backbone : transformers.MambaModel
        Its modules become this classifier's (no copy): ``embedding``, ``layers[i].block``,
        ``norm_f``.
    n_classes : int
    state : {'full', 'ssm', 'summary'}
        What :meth:`trace` records (as for :class:`~stateseer.rnn_models.mamba.MambaClassifier`).
    dropout : float
        On the embeddings and before the head (training only).
    tokenizer : transformers tokenizer, optional
        The checkpoint's; :meth:`tokenize` needs it.

    Attributes
    ----------
    hf_config : transformers.MambaConfig
    vocab : list of str
        The tokenizer's tokens by id (``<unk>`` for its unknown token); None without one.
    """

    def __init__(self, backbone: Any, n_classes: int, *, state: str = "full",
                 dropout: float = 0.0, tokenizer: Any = None) -> None:
        LayeredClassifier.__init__(self)
        if state not in STATES:
            raise ValueError(f"state {state!r} does not exist for mamba; choose one of "
                             f"{', '.join(STATES)}")
        cfg = backbone.config
        self.hf_config = cfg
        self.arch, self.state = HF_MAMBA, state
        self.n_classes, self.n_layers = n_classes, int(cfg.num_hidden_layers)
        self.hidden_size, self.head_size = int(cfg.intermediate_size), int(cfg.hidden_size)
        self.d_state, self.d_conv = int(cfg.state_size), int(cfg.conv_kernel)
        ssm, conv = self.hidden_size * self.d_state, self.hidden_size * (self.d_conv - 1)
        self.state_size = {"full": ssm + conv, "ssm": ssm, "summary": self.hidden_size}[state]
        self.embedding = backbone.get_input_embeddings()
        self.layers = nn.ModuleList([HFMambaLayer(b) for b in backbone.layers])
        self.norm_f = backbone.norm_f
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(self.head_size, n_classes)
        object.__setattr__(self, "_backbone", backbone)  # the same modules, not registered
        self.tokenizer = tokenizer
        self.vocab = None if tokenizer is None else tokenizer_vocab(tokenizer)

    def scan(self, x: Tensor, keep: int | None = None) -> tuple[Tensor, Tensor | None]:
        top, kept = super().scan(x, keep)
        return self.norm_f(top), kept

    def top_of(self, state: MambaState) -> Tensor:
        return self.norm_f(state.layers[-1].out)

    def tokenize(self, text: str) -> list[str]:
        """The checkpoint tokenizer's pieces of ``text`` (its unknown token ``<unk>``)."""
        if self.tokenizer is None:
            raise CheckpointError("this model was built without its tokenizer; load it from "
                                  "its run directory (which keeps it in tokenizer/)")
        return tokenize_with(self.tokenizer, text)

    @torch.no_grad()
    def predict(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Class logits (batch, n_classes) from transformers' own forward pass of the
        backbone (not stateseer's scan) and the head on the last real position."""
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
        out = self._backbone(input_ids=ids, attention_mask=mask, use_cache=False)
        last = out.last_hidden_state[torch.arange(len(ids)), (lengths - 1).clamp(min=0)]
        logits = self.head(last)
        return torch.where((lengths == 0)[:, None], self.initial_logits(), logits)
