"""Hugging Face sequence classifiers as stateseer models (``stateseer create --model hf:PATH``).

A local checkpoint directory (``save_pretrained``; nothing is downloaded) holding a
``*ForSequenceClassification`` built on transformers' ``GenericForSequenceClassification``
— the recurrent hybrids Jamba, Zamba and Zamba2, and the causal language models Llama,
Qwen, Mistral … — and its tokenizer. Those heads compute logits at *every* position
(``score`` on the last hidden states) and pool the last real token, so a per-token
intermediate prediction is the model's own computation, not an approximation:

``trace(ids, lengths, layer)``
    the chosen layer's output after every token (``output_hidden_states``; ``layer=-1``
    the last block, normalised as the head reads it) and ``softmax(score(h))`` at every
    position;
``predict``
    the model's own pooled logits (``create`` checks the last traced step against them);
``embed`` / ``forward_from_embeddings``
    for integrated gradients through the input embeddings.

Right padding is used and every model here is causal, so padded positions never change a
real one. Forcing (replacing a state between steps) does not exist for these models: a
block's output at one position is not the state that the next position reads (attention
reads every earlier position, and transformers keeps only the last recurrent state), so
``stateseer force`` says so in one line.

A classifier that pools *before* its head (BERT, RoBERTa and DistilBERT read their first
token) has no prediction at each position; it is read by the prefix definition instead
(:func:`encoder_adapter`, a :class:`~stateseer.rnn_models.classifier.ClassifierAdapter`):
the prediction after token t is the model on ``[CLS] x[:t] [SEP]`` with the tokenizer's
own special tokens, the state the input of its last linear layer.

The vocabulary is the tokenizer's, by id; its unknown token is written ``<unk>`` (a byte
level tokenizer without one gets ``<unk>`` as an extra, never produced, entry). Class names
come from ``config.id2label`` unless they are transformers' placeholders ``LABEL_0`` ….
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from stateseer.core.errors import CheckpointError
from stateseer.rnn_models.protocol import TraceAdapter

__all__ = ["HFClassifier", "checkpoint_dir", "encoder_adapter", "load_hf", "tokenize_with",
           "tokenizer_vocab"]

#: a Hugging Face checkpoint\'s own config (not the run layout\'s)
HF_CONFIG = "config.json"

UNK = "<unk>"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def _require_transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise CheckpointError("hf: models need the transformers package; install it with "
                              "`pip install 'stateseer[hf]'`") from None
    return transformers


def tokenizer_vocab(tokenizer: Any) -> list[str]:
    """A Hugging Face tokenizer's token strings by id, as a stateseer vocabulary: its
    unknown token written ``<unk>`` (appended, never produced, when it has none) and
    repeated strings made distinct (``tok<id>``)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    unk = tokenizer.unk_token
    vocab = [UNK if t == unk else str(t) for t in tokens]
    if UNK not in vocab:
        vocab.append(UNK)
    seen: set[str] = set()
    for i, t in enumerate(vocab):  # distinct strings (added tokens may repeat)
        if t in seen:
            vocab[i] = f"{t}<{i}>"
        seen.add(vocab[i])
    return vocab


def tokenize_with(tokenizer: Any, text: str) -> list[str]:
    """``tokenizer``'s pieces of ``text``, its unknown token written ``<unk>``."""
    unk = tokenizer.unk_token
    return [UNK if t == unk else t for t in tokenizer.tokenize(text)]


@contextmanager
def _quiet(tf: Any) -> Iterator[None]:
    """No "Loading weights" bar on every command."""
    bars = tf.utils.logging.is_progress_bar_enabled()
    tf.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if bars:
            tf.utils.logging.enable_progress_bar()


def checkpoint_dir(path: str | Path) -> tuple[Path, Any]:
    """``path`` as a checkpoint directory, and the transformers module.

    Raises
    ------
    CheckpointError
        No ``config.json`` in it, or transformers is not installed (one line each).
    """
    path = Path(path)
    if not (path / HF_CONFIG).is_file():
        raise CheckpointError(f"{path} holds no Hugging Face checkpoint (config.json); give "
                              "the directory that save_pretrained wrote")
    return path, _require_transformers()


def load_hf(path: str | Path) -> HFClassifier:
    """The classifier in ``path`` (a ``save_pretrained`` directory) with its tokenizer.

    Raises
    ------
    CheckpointError
        No such directory, no checkpoint or tokenizer in it, or a model whose head does
        not give logits at every position (one line each, naming the fix).
    """
    path, tf = checkpoint_dir(path)
    from transformers.modeling_layers import GenericForSequenceClassification

    try:
        with _quiet(tf):
            model = tf.AutoModelForSequenceClassification.from_pretrained(
                str(path), local_files_only=True)
            tokenizer = tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"{path} cannot be loaded as a sequence classifier with its "
                              f"tokenizer ({_first_line(exc)}); save both with "
                              "save_pretrained") from None
    if not isinstance(model, GenericForSequenceClassification):
        return encoder_adapter(model, tokenizer)
    return HFClassifier(model, tokenizer)


def _mask(ids: Tensor, lengths: Tensor) -> Tensor:
    """The attention mask of right-padded ``ids`` (1 up to each length)."""
    return (torch.arange(ids.shape[1], device=ids.device)[None, :]
            < lengths.to(ids.device)[:, None]).long()


class _Encoder(torch.nn.Module):
    """A transformers classifier called as ``model(ids, lengths)`` (right padding, an
    attention mask), returning its logits."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model.eval()

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.model(input_ids=ids, attention_mask=_mask(ids, lengths)).logits.float()


def encoder_adapter(model: Any, tokenizer: Any) -> Any:
    """A classifier that pools before its head (BERT and RoBERTa read their first token,
    DistilBERT too, others the mean) read by the prefix definition
    (:class:`~stateseer.rnn_models.classifier.ClassifierAdapter`): the prediction after
    token t is the model on ``[CLS] x[:t] [SEP]`` (the tokenizer's own start and end
    tokens), the state the input of its last linear layer there.

    Raises
    ------
    CheckpointError
        The tokenizer has no padding token (one line).
    """
    from stateseer.rnn_models.classifier import ClassifierAdapter

    vocab = tokenizer_vocab(tokenizer)
    n = int(model.config.num_labels)
    names = [model.config.id2label.get(k, f"LABEL_{k}") for k in range(n)]
    by_id = dict(enumerate(vocab))

    def token(tid: Any) -> str | None:
        return None if tid is None else by_id.get(int(tid))

    start = token(tokenizer.cls_token_id if tokenizer.cls_token_id is not None
                  else tokenizer.bos_token_id)
    end = token(tokenizer.sep_token_id if tokenizer.sep_token_id is not None
                else tokenizer.eos_token_id)
    pad = token(tokenizer.pad_token_id)
    if pad is None:
        raise CheckpointError(f"{type(model).__name__}'s tokenizer has no padding token; "
                              "set tokenizer.pad_token and save it again")
    adapter = ClassifierAdapter(_Encoder(model), vocab=vocab,
                                tokenize=lambda text: tokenize_with(tokenizer, text),
                                classes=[str(x) for x in names], pad=pad, bos=start, eos=end)
    adapter.arch = f"hf:{type(model).__name__}"
    if names == [f"LABEL_{k}" for k in range(n)]:  # transformers' placeholders: the data's
        adapter.classes = None
    return adapter


class HFClassifier(TraceAdapter):
    """A transformers ``GenericForSequenceClassification`` model in stateseer's protocol.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase

    Attributes
    ----------
    vocab : list of str
        Token strings by id (the unknown token as ``<unk>``).
    classes : list of str or None
        From ``config.id2label``, None for transformers' placeholders.
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        super().__init__()
        self.model, self.tokenizer = model.eval(), tokenizer
        cfg = model.config.get_text_config()
        self.n_classes = int(model.config.num_labels)
        self.n_layers = int(cfg.num_hidden_layers)
        self.state_size = int(cfg.hidden_size)
        self.arch = f"hf:{type(model).__name__}"
        self.vocab = tokenizer_vocab(tokenizer)
        names = [model.config.id2label.get(k, f"LABEL_{k}") for k in range(self.n_classes)]
        placeholder = names == [f"LABEL_{k}" for k in range(self.n_classes)]
        self.classes = None if placeholder else [str(n) for n in names]

    #: protocol methods that cannot exist for these models, and why (``require`` says it)
    cannot: ClassVar[dict[str, str]] = dict.fromkeys(
        ("initial_state", "step", "get_state", "set_state", "state_proba"),
        "a transformers block's output at one position is not the state the next position "
        "reads (attention reads every earlier position, and transformers keeps only the "
        "last recurrent state in its cache), so no state can be replaced between steps")

    def tokenize(self, text: str) -> list[str]:
        """The tokenizer's pieces of ``text`` (its unknown token written ``<unk>``)."""
        return tokenize_with(self.tokenizer, text)


    def _layer(self, layer: int) -> int:
        if not -self.n_layers <= layer < self.n_layers:
            raise ValueError(f"layer {layer} does not exist; the model has {self.n_layers} "
                             f"(0 … {self.n_layers - 1}, or -1 for the last)")
        return layer % self.n_layers + 1  # hidden_states[0] is the embeddings

    def _run(self, ids: Tensor | None, lengths: Tensor, emb: Tensor | None = None) -> Any:
        base = getattr(self.model, self.model.base_model_prefix)
        ref = ids if ids is not None else emb[..., 0]
        return base(input_ids=ids, inputs_embeds=emb, attention_mask=_mask(ref, lengths),
                    output_hidden_states=True, use_cache=False)

    @torch.no_grad()
    def trace(self, ids: Tensor, lengths: Tensor, layer: int = -1) -> tuple[Tensor, Tensor]:
        """The layer's output after every token (batch, time, hidden_size) and the head's
        probabilities there (batch, time, n_classes)."""
        out = self._run(ids, lengths)
        proba = torch.softmax(self.model.score(out.last_hidden_state).float(), -1)
        return out.hidden_states[self._layer(layer)].float(), proba

    def initial(self, layer: int = -1) -> tuple[Tensor, Tensor]:
        """Before any token there is no output: a zero state and the head on it."""
        self._layer(layer)
        h0 = torch.zeros(self.state_size)
        with torch.no_grad():
            p0 = torch.softmax(self.model.score(h0.to(self.model.score.weight)).float(), -1)
        return h0, p0

    @torch.no_grad()
    def predict(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """The model's own pooled logits (batch, n_classes), as it classifies."""
        pad = self.model.config.get_text_config().pad_token_id
        mask = _mask(ids, lengths)
        ids = ids.clone()
        if pad is not None:
            ids[mask == 0] = pad
        return self.model(input_ids=ids, attention_mask=mask).logits

    def embed(self, ids: Tensor) -> Tensor:
        return self.model.get_input_embeddings()(ids)

    def forward_from_embeddings(self, emb: Tensor, lengths: Tensor | None = None) -> Tensor:
        """Class logits (batch, n_classes) at ``lengths - 1`` (the last step without)."""
        if lengths is None:
            lengths = torch.full((emb.shape[0],), emb.shape[1], dtype=torch.long)
        out = self._run(None, lengths, emb)
        logits = self.model.score(out.last_hidden_state)
        return logits[torch.arange(emb.shape[0]), (lengths - 1).clamp(min=0)]
