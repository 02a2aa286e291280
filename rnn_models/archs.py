"""The architecture registry: what ``stateseer train --arch NAME`` can build.

Torch-free to import (the builders import their model modules when called), so the
command line takes its ``--arch`` and ``--state`` choices from :data:`ARCHITECTURES`
without loading torch::

    >>> list(ARCHITECTURES)
    ['lstm', 'gru', 'rnn', 'mingru', 'minlstm', 'mamba']
    >>> list(ARCHITECTURES["mamba"].states), ARCHITECTURES["mamba"].default_state
    (['full', 'ssm', 'summary'], 'full')

A new architecture is one :class:`Architecture` entry whose ``build`` returns a model in
the protocol (:mod:`stateseer.rnn_models.protocol`) that also has ``step_logits(ids)``,
``initial_logits()`` and ``forward(ids, lengths)`` for training (see
:class:`stateseer.rnn_models.layered.LayeredClassifier`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ARCHITECTURES", "ArchOption", "Architecture", "build_model", "check_sizes"]


@dataclass(frozen=True)
class ArchOption:
    """A hyper-parameter of one architecture (a ``stateseer train`` flag).

    Attributes
    ----------
    default : int or str
    help : str
        One line for ``--help``.
    choices : tuple of str, optional
        The values a word-valued option takes (an integer option has none).
    """

    default: Any
    help: str
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Architecture:
    """One architecture that ``stateseer train --arch NAME`` builds.

    Attributes
    ----------
    name : str
    build : callable
        ``build(vocab_size, n_classes, *, embed, hidden, layers, dropout, state, **extra)``
        → a model in the protocol (all three parts, see :mod:`stateseer.rnn_models.protocol`).
    states : dict of str to str
        The ``--state`` choices (what is recorded), each with a one-line description; the
        first is the default.
    description : str
    options : dict of str to ArchOption
        Further hyper-parameters of the arch (e.g. Mamba's ``d_state``): each is a
        ``stateseer train`` flag (``--d-state``) and a key of ``config.json``'s model
        section; :class:`~stateseer.rnn_models.train.TrainConfig` takes them in
        ``arch_options``.
    """

    name: str
    build: Callable[..., Any]
    states: dict[str, str]
    description: str
    options: dict[str, ArchOption] = field(default_factory=dict)

    @property
    def default_state(self) -> str:
        return next(iter(self.states))

    @property
    def defaults(self) -> dict[str, Any]:
        """The options' defaults."""
        return {k: o.default for k, o in self.options.items()}

    def __call__(self, vocab_size: int, n_classes: int, **hp: Any) -> Any:
        return self.build(vocab_size, n_classes, **hp)


def _rnn_builder(arch: str) -> Callable[..., Any]:
    def build(vocab_size: int, n_classes: int, *, embed: int = 128, hidden: int = 128,
              layers: int = 1, dropout: float = 0.0, state: str = "h") -> Any:
        from stateseer.rnn_models.models import RNNClassifier

        return RNNClassifier(arch, vocab_size, n_classes, embed=embed, hidden=hidden,
                             layers=layers, dropout=dropout, state=state)
    return build


#: the sign of the transition values (Grazzi et al., ICLR 2025: a linear RNN or Mamba
#: with values in [−1, 1] can count modulo 2, which non-negative decays cannot)
_GATE = ArchOption("positive", "transition values: positive (decays in (0, 1), the "
                   "published models) or signed (in (−1, 1): parity becomes learnable)",
                   choices=("positive", "signed"))


def _minrnn_builder(kind: str) -> Callable[..., Any]:
    def build(vocab_size: int, n_classes: int, **hp: Any) -> Any:
        from stateseer.rnn_models.minrnn import MinRNNClassifier

        return MinRNNClassifier(kind, vocab_size, n_classes, **hp)
    return build


def _mamba(vocab_size: int, n_classes: int, **hp: Any) -> Any:
    from stateseer.rnn_models.mamba import MambaClassifier

    return MambaClassifier(vocab_size, n_classes, **hp)


_H = {"h": "the hidden state h_t"}
_MAMBA_STATES = {
    "full": "the traced layer's whole recurrent state: SSM state (hidden × d_state) then "
            "the causal-conv buffer (hidden × (d_conv − 1)), flattened",
    "ssm": "the SSM state alone (hidden × d_state), flattened",
    "summary": "the SSM state averaged over d_state (hidden floats; forcing shifts the SSM "
               "state so that its average is the centroid)",
}
ARCHITECTURES: dict[str, Architecture] = {
    "lstm": Architecture("lstm", _rnn_builder("lstm"), {
        "h": "the hidden state h_t", "c": "the cell state c_t", "hc": "h_t and c_t"},
        "LSTM (nn.LSTM)"),
    "gru": Architecture("gru", _rnn_builder("gru"), _H, "GRU (nn.GRU)"),
    "rnn": Architecture("rnn", _rnn_builder("rnn"), _H, "Elman RNN (nn.RNN, tanh)"),
    "mingru": Architecture("mingru", _minrnn_builder("mingru"), _H,
                           "minGRU (Feng et al. 2024), log-space parallel scan",
                           options={"gate": _GATE}),
    "minlstm": Architecture("minlstm", _minrnn_builder("minlstm"), _H,
                            "minLSTM (Feng et al. 2024), log-space parallel scan"),
    "mamba": Architecture("mamba", _mamba, _MAMBA_STATES,
                          "Mamba (selective state space, Gu & Dao 2023), residual blocks",
                          options={"d_state": ArchOption(16, "SSM state size per channel"),
                                   "d_conv": ArchOption(4, "causal convolution width"),
                                   "gate": _GATE}),
}


#: the range of each size a ``model`` section may give (a damaged or hostile
#: ``config.json`` would otherwise ask for terabytes before the checkpoint is compared)
SIZE_LIMITS = {"vocab_size": 10_000_000, "n_classes": 100_000, "embed": 65_536,
               "hidden": 65_536, "layers": 64}
#: the most parameters the sizes may imply together (the embedding alone: vocab x embed)
MAX_PARAMETERS = 4_000_000_000


def check_sizes(section: dict[str, Any]) -> None:
    """Refuse sizes out of range before anything is allocated.

    Raises
    ------
    ValueError
        A size that is not an integer in ``1 .. SIZE_LIMITS[name]``, or an embedding and
        recurrent layers of more than :data:`MAX_PARAMETERS` together.

    Examples
    --------
    >>> check_sizes({"vocab_size": 100, "n_classes": 2, "embed": 8, "hidden": 8, "layers": 1})
    >>> check_sizes({"vocab_size": 100, "n_classes": 2, "embed": 8, "hidden": 10**9,
    ...              "layers": 1})
    Traceback (most recent call last):
    ...
    ValueError: hidden is 1000000000, outside 1 .. 65536
    """
    for name, top in SIZE_LIMITS.items():
        v = section[name]
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= top:
            raise ValueError(f"{name} is {str(v)[:20]}, outside 1 .. {top}")
    e, h, n = section["embed"], section["hidden"], section["layers"]
    params = section["vocab_size"] * e + 4 * (e * h + (n - 1) * h * h + n * h * h)
    if params > MAX_PARAMETERS:
        raise ValueError(f"the sizes imply {params:,} parameters, more than "
                         f"{MAX_PARAMETERS:,}")


def build_model(section: dict[str, Any], run_dir: Any = None) -> Any:
    """Build the (untrained) model a run's ``config.json`` ``model`` section describes.

    Parameters
    ----------
    section : dict
        ``arch``, ``vocab_size``, ``n_classes``, ``embed``, ``hidden``, ``layers`` and
        optionally ``state`` and the arch's :attr:`Architecture.options`; or ``arch``
        ``hf-mamba`` with the checkpoint's ``hf_config`` (``train --init hf:PATH``,
        :mod:`stateseer.rnn_models.hf_mamba`).
    run_dir : str or Path, optional
        The run directory, where an ``hf-mamba`` run keeps its tokenizer.

    Returns
    -------
    torch.nn.Module
        In eval mode, dropout 0.

    Raises
    ------
    KeyError, ValueError, TypeError
        An unknown arch or a missing or invalid entry (loading turns them into one line).
    """
    if section["arch"] == "hf-mamba":
        from stateseer.rnn_models.hf_mamba import build_hf_mamba

        return build_hf_mamba(section, run_dir).eval()
    arch = ARCHITECTURES.get(section["arch"])
    if arch is None:
        raise ValueError(f"unknown arch {section['arch']!r}; choose one of "
                         f"{', '.join(ARCHITECTURES)}")
    check_sizes(section)
    extra = {k: section[k] for k in arch.options if k in section}
    model = arch(section["vocab_size"], section["n_classes"], embed=section["embed"],
                 hidden=section["hidden"], layers=section["layers"], dropout=0.0,
                 state=section.get("state", arch.default_state), **extra)
    return model.eval()
