"""One build pipeline: text in, an estimated n-gram model out (what ``ngramlm train`` and
:meth:`NgramLM.fit_files <ngramlm.model.NgramLM.fit_files>` both run).

A :class:`BuildConfig` holds every choice of a build (the model's parameters, how the text is read,
the vocabulary, the memory budget, count merging, where an out-of-core model is written), and
:func:`build` runs it once -- as KenLM's ``lmplz`` fills a ``PipelineConfig`` and calls ``Pipeline()``.
It takes one of four routes (:func:`route`):

* **memory**: one text encoded whole, counted and smoothed in memory;
* **weighted**: count merging, several texts each counted and discounted on its own, their statistics
  weighted (:mod:`ngramlm.builder.count_merge`);
* **streamed**: the text streamed twice, counted in blocks within ``memory`` or on Dask workers
  (:mod:`ngramlm.builder.text_counts`), then smoothed in memory ...
* ... or **out of core**, a streamed build whose merged counts would not fit ``memory`` (or
  ``estimation="disk"``): Kneser-Ney estimated on disk (:mod:`ngramlm.builder.outofcore`) and written
  to ``output`` -- a model never held -- or, without ``output``, read back into the estimator.

Four stages, reported through ``progress`` as lmplz's ``=== k/4 ===`` lines: 1 reading, 2 counting,
3 smoothing, 4 writing (the caller writes an in-memory model; the pipeline only the out-of-core one).
The estimator (an :class:`~ngramlm.model.NgramLM`, unfitted, with the config's parameters) is the
caller's: this module is below the estimator and never imports it.  Errors are library errors
(:class:`~corpora.errors.InputError` with a fix, or ``ValueError``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from corpora.errors import InputError
from corpora.vocab import EncodedText, Vocab

from ..counts import NgramCounts, check_order
from ..io.native import INIT_PARAMS
from ..smoothing import ESTIMATOR_PARAMS, canonical_name
from .text_counts import ESTIMATIONS

STAGES = 4  # reading, counting, smoothing, writing
ROUTES = ("memory", "weighted", "streamed")

# progress(message, stage=None, depth=0): ``stage`` k starts stage k of STAGES; otherwise a line, ``depth``
# levels in (1: a text's or a weight search's line, 2: a step of counting or estimation).
Progress = Callable[..., None]


COMPAT_TOOL = {"kenlm": "lmplz", "srilm": "SRILM's ngram-count"}


@dataclass
class BuildConfig:
    """Every choice of an n-gram build; :func:`build` runs it.  Checked when made (``InputError``)."""

    # The model: NgramLM's parameters (the estimator passed to build must have the same).
    order: int = 3
    smoothing: str = "mkn"  # a registered name or an alias (resolved here)
    smoother_params: dict = field(default_factory=dict)  # k, discount, discount_fallback, alpha, lambdas
    prune: Optional[Sequence[int]] = None
    prune_entropy: Optional[float] = None
    interpolate: Optional[bool] = None  # SRILM's -interpolate, -gtNmin, -gtNmax (compat="srilm")
    gtmin: Optional[Sequence[int]] = None
    gtmax: Optional[Sequence[int]] = None
    compat: Optional[str] = None  # "kenlm": lmplz's conventions, "srilm": ngram-count's (one text, in memory)
    # The text: corpus names, files or '-' (stdin); with ``files``, files only, always streamed.
    files: bool = False
    split: str = "train"  # the split of a named corpus
    data_dir: Optional[str] = None
    tokenizer: Optional[object] = None  # a corpora.tokenize.TokenizerSpec; None: the corpus's, or whitespace
    keep_empty: bool = True  # a blank line of a file is an empty sentence (a corpus says its own)
    # The vocabulary: given, or fitted on the text with these options.
    vocab: Optional[Vocab] = None
    min_count: int = 1
    max_size: Optional[int] = None
    unk_token: Optional[str] = None  # None: the corpus's own, else <unk>
    limit_vocab: Optional[Sequence[str]] = None  # keep only the n-grams of these words (a recogniser's list)
    limit_vocab_source: Optional[str] = None  # the list's file, for messages
    # Jelinek-Mercer without lambdas: held-out text to tune them on, encoded, or a split / file to read.
    heldout: Optional[EncodedText] = None
    tune_on: Optional[str] = None
    # The streamed build.
    memory: Optional[object] = None  # "1G", "30%" or bytes; None: the default budget
    temp_dir: Optional[str] = None
    dask: Optional[object] = None  # a scheduler address, "local:N", or a distributed.Client
    parts: Optional[int] = None  # the Dask build's partitions of the n-grams (None: from the sizes and workers)
    estimation: str = "auto"  # auto: out of core when the counts would not fit memory; disk; memory
    # Count merging: one weight per text, or a dev text (file or corpus) to tune them on.
    weights: Optional[Sequence[float]] = None
    tune_weights_on: Optional[str] = None
    # Where the out-of-core estimation writes the model (ARPA when ``arpa``, a KenLM probing binary when
    # ``kenlm_binary``, else native); None: read back in.
    output: Optional[str] = None
    arpa: bool = False
    kenlm_binary: bool = False

    def __post_init__(self) -> None:
        from ..tools.pruning import check_prune_args

        self.smoothing = canonical_name(self.smoothing)
        check_order(self.order)
        foreign = sorted(set(self.smoother_params) - {p.name for p in ESTIMATOR_PARAMS})
        if foreign:
            raise ValueError(f"smoother_params takes {', '.join(p.name for p in ESTIMATOR_PARAMS)}, not "
                             f"{', '.join(foreign)}")
        if self.estimation not in ESTIMATIONS:
            raise InputError(f"unknown estimation {self.estimation!r}", fix=f"use one of {', '.join(ESTIMATIONS)}")
        check_prune_args(self.order, self.prune, self.prune_entropy)
        self._check_combinations()

    def _check_combinations(self) -> None:
        streaming = [n for n, on in (("files", self.files), ("memory", self.memory is not None),
                                     ("temp_dir", self.temp_dir is not None), ("dask", self.dask is not None),
                                     ('estimation="disk"', self.estimation == "disk")) if on]
        if self.weights is not None and self.tune_weights_on is not None:
            raise InputError("weights gives the weights and tune_weights_on searches them",
                             fix="give one of them")
        if self.weighted and streaming:
            raise InputError("count merging keeps each text's counts in memory", fix=f"drop {', '.join(streaming)}")
        if self.weighted and self.compat is not None:
            tool = COMPAT_TOOL[self.compat]
            raise InputError(f"compat={self.compat!r} reproduces {tool} on one text, and {tool} has no weights",
                             fix="drop the weights or compat")
        if self.compat == "srilm" and streaming:
            raise InputError(f"compat={self.compat!r} is estimated in memory, from the whole text's counts",
                             fix=f"train one text in memory: drop {', '.join(streaming)}")
        if self.limit_vocab is not None and self.estimation == "disk":
            raise InputError("limit_vocab limits the estimated model in memory, and estimation='disk' writes it "
                             "without holding it", fix="drop one of them")

    @property
    def weighted(self) -> bool:
        """Count merging: several texts, their statistics weighted."""
        return self.weights is not None or self.tune_weights_on is not None

    def estimator_params(self) -> dict:
        """The estimator's keyword arguments (``NgramLM(**config.estimator_params())``)."""
        fixed = {"order": self.order, "smoothing": self.smoothing, "prune": self.prune,
                 "prune_entropy": self.prune_entropy, "compat": self.compat,
                 "interpolate": self.interpolate, "gtmin": self.gtmin, "gtmax": self.gtmax}
        return {p: fixed[p] if p in fixed else self.smoother_params.get(p) for p in INIT_PARAMS}

    @classmethod
    def for_estimator(cls, estimator, **options) -> "BuildConfig":
        """A config with ``estimator``'s parameters (an :class:`~ngramlm.model.NgramLM`) and ``options``."""
        params = {p: getattr(estimator, p) for p in INIT_PARAMS}
        smoother = {p.name: params.pop(p.name) for p in ESTIMATOR_PARAMS}
        return cls(**params, smoother_params={p: v for p, v in smoother.items() if v is not None}, **options)


@dataclass
class Built:
    """What :func:`build` made: the estimator, fitted -- unless its model went to ``config.output`` out of
    core (``on_disk``, the :class:`~ngramlm.builder.outofcore.DiskModel`) -- and what the text was."""

    estimator: object
    vocab: Vocab
    text: str  # the training text's description: a file, "ptb:train", "a.txt + b.txt"
    sentences: int
    words: int
    smoother: str  # the smoother's name (add-k's k may make it laplace or mle)
    route: str  # one of ROUTES
    on_disk: object = None
    vocab_limit: object = None  # the VocabLimit of limit_vocab (ngramlm.tools.vocab_filter)
    count_merging: Optional[dict] = None  # the texts, their weights (and how they were tuned)


@dataclass
class _Text:
    """The training text as read: encoded in memory (``encoded``, or per text ``sources``), or counted by
    the streamed build (``counts``, or ``on_disk``)."""

    vocab: Vocab
    spec: object
    where: str
    sentences: int
    words: int
    encoded: Optional[EncodedText] = None
    sources: Optional[list] = None
    counts: Optional[NgramCounts] = None
    on_disk: object = None
    first_seen: Optional[object] = None  # the ids in the order they first appear (a streamed compat="kenlm")


def route(texts: Sequence, config: BuildConfig) -> str:
    """Which of :data:`ROUTES` ``config`` takes on ``texts`` (out of core is the streamed route's choice,
    made when the counts are merged)."""
    if config.weighted:
        return "weighted"
    if config.files or len(texts) > 1 or config.memory is not None or config.temp_dir is not None \
            or config.dask is not None or config.estimation == "disk":
        return "streamed"
    return "memory"


def out_of_core_refusal(config: BuildConfig, estimator, smoother=None) -> Optional[str]:
    """Why this model cannot be estimated out of core, or None (``smoother``: the estimator's, made here
    when not given)."""
    from . import outofcore

    smoother = smoother or estimator._make_smoother()
    return outofcore.unsupported_reason(estimator, smoother) or (
        "the Dask build estimates on its workers, or in memory" if config.dask is not None else None) or (
        "the vocabulary is limited on the model in memory" if config.limit_vocab is not None else None)


def cluster_refusal(config: BuildConfig, smoother) -> Optional[str]:
    """Why this model is not estimated on the Dask workers (it is then counted there and estimated on the
    client, in memory), or None.  ``estimation="memory"`` asks for the client."""
    from .cluster_estimate import supported_reason

    if config.estimation == "memory":
        return "estimation='memory' estimates on the client"
    pruned = (config.prune is not None and any(config.prune)) or bool(config.prune_entropy)
    return supported_reason(smoother, config.order, prune=pruned, limit_vocab=config.limit_vocab is not None)


def build(texts: Sequence, config: BuildConfig, progress: Optional[Progress] = None, *, estimator) -> Built:
    """Build the model ``config`` describes on ``texts`` (corpus names, files, '-') into ``estimator``, an
    unfitted :class:`~ngramlm.model.NgramLM` made with ``config.estimator_params()``."""
    say = progress or (lambda message, stage=None, depth=0: None)
    texts = list(texts)
    _check_estimator(config, estimator)
    smoother = estimator._make_smoother()  # a bad name or parameter fails now, before any work
    if config.limit_vocab is not None:
        from ..tools.vocab_filter import check_limitable_smoother

        check_limitable_smoother(smoother)
    way = route(texts, config)
    _check_texts(texts, config, way)
    if way == "streamed":
        text = _streamed(texts, config, estimator, smoother, say)
    elif way == "weighted":
        say(f"reading and encoding {len(texts)} texts", stage=1)
        text = _read_weighted(texts, config)
    else:
        say("reading and encoding the training text", stage=1)
        text = _read_in_memory(texts[0], config)
    _describe(text, config, smoother, say)
    built = Built(estimator, text.vocab, text.where, text.sentences, text.words, smoother.name, way)
    if text.on_disk is not None:
        if config.output is None:  # read back: the estimator holds the model
            estimator._set_tables(text.on_disk[1])
        built.on_disk = text.on_disk[0]
        return built
    _estimate(texts, text, config, estimator, smoother, built, say)
    return built


def _check_estimator(config: BuildConfig, estimator) -> None:
    want = config.estimator_params()
    differ = [p for p in INIT_PARAMS if getattr(estimator, p, None) is not want[p]
              and not _equal(getattr(estimator, p, None), want[p])]
    if differ:
        raise ValueError(f"the estimator's {', '.join(differ)} differ from the config's: make it with "
                         "config.estimator_params() (or the config with BuildConfig.for_estimator)")


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except ValueError:  # numpy arrays compare element by element
        return list(a) == list(b)


def _check_texts(texts: list, config: BuildConfig, way: str) -> None:
    if not texts:
        raise InputError("no training text", fix="give a file, '-' for stdin, or a corpus name")
    if way != "weighted":
        return
    from .count_merge import check_weights

    if len(texts) < 2:
        raise InputError("count merging weights several texts", fix="give two or more")
    if "-" in texts:
        raise InputError("a weighted text must be a file or a corpus name, not '-' (stdin)",
                         fix="write the text to a file")
    if config.weights is not None:
        check_weights(config.weights, len(texts))


# ----------------------------------------------------------------------------- stage 1: reading
def _read_in_memory(text: str, config: BuildConfig) -> _Text:
    """One text encoded whole: straight from its lines when it is one plain file, else its sentences."""
    from corpora.registry import REGISTRY
    from corpora.sources import plain_text_file, read_text_source

    unk = config.unk_token or (REGISTRY[text].unk_token if text in REGISTRY else None) or "<unk>"
    vocab = config.vocab
    fast = plain_text_file(text, split=config.split, data_dir=config.data_dir) if vocab is None else None
    if fast is not None and not (config.tokenizer or fast.tokenizer).fitted:
        fast = None  # a tokenizer that learns is fitted by the pipeline on the training lines
    if fast is not None:
        # Fast path: count and encode straight from the lines (no list of sentences).
        from corpora.corpus import read_lines
        from corpora.tokenize import make_tokenizer

        spec = config.tokenizer or fast.tokenizer
        lines = read_lines(fast.path, line_filter=fast.line_filter)
        vocab = Vocab(min_count=config.min_count, max_size=config.max_size, unk_token=unk, tokenizer=spec)
        # The line policy: a user's file keeps its blank lines as empty sentences, as lmplz does.
        enc = vocab.fit_encode_lines(lines, make_tokenizer(spec), keep_empty=fast.keep_empty)
        del lines
        where = fast.description
    else:
        src = read_text_source(text, split=config.split, data_dir=config.data_dir, tokenizer=config.tokenizer)
        spec, where = src.tokenizer, src.description
        if vocab is None:
            vocab = Vocab(min_count=config.min_count, max_size=config.max_size, unk_token=unk,
                          tokenizer=spec).fit(src.sentences)
        enc = vocab.encode_sentences(src.sentences)
        del src
    if enc.n_sentences == 0 or enc.n_words == 0:
        raise InputError("the training text has no tokens", path=where, fix="pass a non-empty text")
    return _Text(vocab, spec, where, enc.n_sentences, enc.n_words, encoded=enc)


def _read_weighted(texts: list, config: BuildConfig) -> _Text:
    """Each text's sentences encoded with one vocabulary fitted on all of them (unless given)."""
    from corpora.registry import REGISTRY
    from corpora.sources import read_text_source

    loaded, spec = [], config.tokenizer
    for t in texts:
        src = read_text_source(t, split=config.split, data_dir=config.data_dir, tokenizer=spec)
        if not src.sentences or not any(src.sentences):
            raise InputError("the training text has no tokens", path=src.description, fix="pass a non-empty text")
        spec = spec or src.tokenizer  # the first text's tokenizer is every text's
        loaded.append((src.sentences, src.description))
    vocab = config.vocab
    if vocab is None:
        unk = config.unk_token or next((REGISTRY[t].unk_token for t in texts if t in REGISTRY), None) or "<unk>"
        vocab = Vocab(min_count=config.min_count, max_size=config.max_size, unk_token=unk, tokenizer=spec)
        vocab.fit(s for sents, _ in loaded for s in sents)
    encoded = [(vocab.encode_sentences(sents), where) for sents, where in loaded]
    return _Text(vocab, spec, " + ".join(w for _, w in encoded), sum(e.n_sentences for e, _ in encoded),
                 sum(e.n_words for e, _ in encoded), sources=encoded)


def _streamed(texts: list, config: BuildConfig, estimator, smoother, say: Progress) -> _Text:
    """Stages 1-2 of the streaming build (and 3-4 when it goes out of core): never holds the text whole."""
    from .text_counts import build_counts

    inp, where = _stream_input(texts, config)
    if config.dask is not None:
        why = cluster_refusal(config, smoother)
        if why is None:
            return _on_cluster(inp, where, config, estimator, smoother, say)
        if config.estimation == "disk":
            raise InputError(f"cannot estimate this model on the Dask workers: {why}", fix='use estimation="memory"')
        if config.compat == "kenlm":
            raise InputError(f"compat='kenlm' with Dask is estimated on the workers, and {why}",
                             fix="drop what keeps the estimation on the client, or train without --dask")
        say(f"note: counting on the Dask workers; {why}")
    # compat="kenlm" numbers words as lmplz does, by first appearance: recorded as the blocks are counted.
    seen = None
    if config.compat == "kenlm":
        from ..kenlm_compat import FirstSeen

        seen = FirstSeen()
    on_disk = _on_disk_step(config, estimator, smoother, say, seen)
    say("streaming build: vocabulary and counts" + (f" on the Dask cluster {config.dask}"
                                                    if isinstance(config.dask, str) else ""), stage=1)
    res = build_counts(inp, order=config.order, vocab=config.vocab, memory=config.memory, temp_dir=config.temp_dir,
                       client=config.dask, progress=lambda m: say(m, depth=2),
                       estimation=config.estimation if on_disk else "memory", on_disk=on_disk, first_seen=seen)
    if res.on_disk is None:
        say("counted and merged", stage=2)
    return _Text(res.vocab, inp.tokenizer, where, res.sentences, res.words, counts=res.counts, on_disk=res.on_disk,
                 first_seen=None if seen is None else seen.order)


def _on_cluster(inp, where: str, config: BuildConfig, estimator, smoother, say: Progress) -> _Text:
    """Stages 1-4 on the Dask workers (:mod:`ngramlm.builder.cluster_estimate`): the model written to
    ``config.output`` by the workers, or read back from the shared folder."""
    from . import cluster_estimate

    say("streaming build: counting, estimation and writing on the Dask cluster"
        + (f" {config.dask}" if isinstance(config.dask, str) else ""), stage=1)
    res, tables = cluster_estimate.build_files(
        inp, order=config.order, vocab=config.vocab, memory=config.memory, temp_dir=config.temp_dir,
        client=config.dask, output=config.output, arpa=config.arpa, smoother=smoother, model=estimator,
        progress=lambda m: say(m, depth=2), parts=config.parts, kenlm_binary=config.kenlm_binary)
    return _Text(res.vocab, inp.tokenizer, where, res.sentences, res.words, on_disk=(res, tables))


def _stream_input(texts: list, config: BuildConfig) -> tuple:
    """The streamed build's input and the text's description: a named corpus's split file, or files."""
    from corpora.registry import REGISTRY
    from corpora.sources import plain_text_file
    from corpora.tokenize import TokenizerSpec

    from .text_counts import BuildInput

    keep_empty, unk, line_filter, spec = config.keep_empty, config.unk_token, None, config.tokenizer
    if not config.files and len(texts) == 1 and texts[0] in REGISTRY:
        plain = plain_text_file(texts[0], split=config.split, data_dir=config.data_dir)
        if plain is None:
            raise InputError(f"corpus {texts[0]!r} is not one plain text file per split, which the streaming "
                             "build reads", fix="train it without --memory/--dask")
        sources, keep_empty, line_filter, where = [plain.path], plain.keep_empty, plain.line_filter, plain.description
        unk, spec = unk or plain.unk_token, spec or plain.tokenizer
    else:
        for t in texts:
            if str(t) != "-" and not Path(t).is_file():
                raise InputError("no such file" if not Path(t).exists() else "not a file", path=t,
                                 fix="give text files (plain or .gz) or '-' for stdin; a named corpus alone")
        sources, where = list(texts), ", ".join(map(str, texts))
    inp = BuildInput(sources, tokenizer=spec or TokenizerSpec(), keep_empty=keep_empty, line_filter=line_filter,
                     vocab_params={"min_count": config.min_count, "max_size": config.max_size,
                                   "unk_token": unk or "<unk>"})
    return inp, where


def _on_disk_step(config: BuildConfig, estimator, smoother, say: Progress, seen=None) -> Optional[Callable]:
    """The streamed build's out-of-core step (estimate on disk, write ``config.output`` or read the model
    back), or None when this model is estimated in memory.  ``seen``: the counting's record of the order
    words first appear in (``compat="kenlm"``)."""
    from . import outofcore

    if config.estimation == "memory":
        return None
    why = out_of_core_refusal(config, estimator, smoother)
    if why is not None:
        if config.estimation == "disk":
            raise InputError(f"cannot estimate this model out of core: {why}", fix='use estimation="memory"')
        return None

    def on_disk(dc, vocab, folder, mem) -> tuple:
        say("counted and merged into the temp folder", stage=2)
        say(f"smoothing ({smoother.name}) out of core", stage=3)
        dm = outofcore.estimate(dc, smoother, vocab.n_types, folder, mem, progress=lambda m: say(m, depth=2),
                                first_seen=None if seen is None else seen.order)
        if config.output is not None:
            say(f"writing {config.output}", stage=4)
            outofcore.write_model(dm, estimator, smoother, vocab, config.output, arpa=config.arpa, memory=mem,
                                  folder=folder, kenlm_binary=config.kenlm_binary, progress=say)
            return dm, None
        from ..io.native import load_native_tables

        path = folder.path / "model.npz"
        outofcore.write_model(dm, estimator, smoother, vocab, path, arpa=False, memory=mem, folder=folder)
        # As estimate_tables makes them (the file's JSON has lists where the parameters had tuples).
        tables = load_native_tables(path, mmap=False)[0].replace(vocab=vocab, smoother_params=smoother.get_params())
        return dm, tables

    return on_disk


def _describe(text: _Text, config: BuildConfig, smoother, say: Progress) -> None:
    """The line that says what is trained on what; a closed vocabulary's note; a word list that shares
    no word with the text fails here, before counting."""
    say(f"training {config.order}-gram {smoother.name} on {text.where}: {text.sentences} sentences, "
        f"{text.words} words, {text.vocab.n_types} types")
    if config.min_count > 1 and config.vocab is None:
        say(_closed_vocabulary_note(text.vocab, config.min_count))
    if config.limit_vocab is not None:
        from ..tools.vocab_filter import kept_ids

        kept_ids(text.vocab, config.limit_vocab, source=config.limit_vocab_source)


def _closed_vocabulary_note(vocab: Vocab, min_count: int) -> str:
    """One line: how many training words min_count made <unk>, which is then trained on them."""
    cut = [(w, c) for w, c in vocab.counts_.items() if c < min_count and w != vocab.unk_token]
    tokens = sum(c for _, c in cut)
    return (f"closed vocabulary: {len(cut)} word types seen fewer than {min_count} times ({tokens} tokens) are "
            f"{vocab.unk_token} before counting, so {vocab.unk_token} is estimated from them")


# ----------------------------------------------------------------------------- stages 2-3: counting, smoothing
def _estimate(texts: list, text: _Text, config: BuildConfig, estimator, smoother, built: Built,
              say: Progress) -> None:
    """Count (unless streamed) and smooth into ``estimator``; limit its vocabulary when asked."""
    heldout = _heldout(texts, text, config, smoother)
    merged = None
    counts = text.counts
    if text.sources is not None:
        say(f"counting {config.order} orders of {len(texts)} texts", stage=2)
        counts, merged, built.count_merging = _merged_counts(texts, text, config, estimator, smoother, say)
        text.sources = None
    elif counts is None:
        say(f"counting {config.order} orders", stage=2)
        counts = NgramCounts.from_encoded(text.encoded, order=config.order, vocab_size=len(text.vocab))
    limit = config.limit_vocab
    say(f"smoothing ({smoother.name})" + (", pruning" if config.prune or config.prune_entropy else "")
        + (", limiting the vocabulary" if limit is not None else ""), stage=3)
    # compat='kenlm' prunes the unlisted words' n-grams inside the estimation, as lmplz does; otherwise
    # the estimated model is limited after (the closed-vocabulary renormalisation).
    in_estimation = limit is not None and config.compat == "kenlm"
    if merged is not None:
        estimator.fit_counts(counts, vocab=text.vocab, smoother=merged)
    else:
        estimator.fit(text.encoded, vocab=text.vocab, counts=counts, heldout=heldout,
                      limit_vocab=limit if in_estimation else None, limit_vocab_source=config.limit_vocab_source,
                      first_seen=text.first_seen)
    text.encoded = text.counts = counts = None  # the model keeps what it needs
    if built.count_merging is not None:
        estimator.info_["count_merging"] = built.count_merging  # saved in .npz models (ARPA has no place for it)
    if in_estimation:
        built.vocab_limit = estimator.vocab_limit_
    elif limit is not None:
        from ..tools.vocab_filter import limit_vocabulary

        built.vocab_limit = limit_vocabulary(estimator, words=limit, source=config.limit_vocab_source)
        estimator._set_tables(built.vocab_limit.tables)
    if built.vocab_limit is not None:
        _report_limit(built.vocab_limit, config.limit_vocab_source, say)


def _heldout(texts: list, text: _Text, config: BuildConfig, smoother) -> Optional[EncodedText]:
    """Jelinek-Mercer's held-out text when its lambdas are to be tuned: given, or ``tune_on`` read (a split
    of the training corpus, or a file)."""
    if config.heldout is not None or smoother.name != "jm" or config.smoother_params.get("lambdas") is not None \
            or config.tune_on is None:
        return config.heldout
    from corpora.registry import REGISTRY
    from corpora.sources import read_text_source

    one = texts[0] if len(texts) == 1 else None
    named = one in REGISTRY
    src = read_text_source(config.tune_on if not named or Path(config.tune_on).exists() else one,
                           split=config.tune_on if named else "valid", data_dir=config.data_dir,
                           tokenizer=text.spec)
    return text.vocab.encode_sentences(src.sentences)


def _merged_counts(texts: list, text: _Text, config: BuildConfig, estimator, smoother, say: Progress) -> tuple:
    """The union of the texts' counts, the merged smoother with the weights given or tuned on
    ``tune_weights_on``, and a record of them for the model's info."""
    from .count_merge import MergedSmoother, align

    order, vocab = config.order, text.vocab
    src = align([NgramCounts.from_encoded(e, order=order, vocab_size=len(vocab)) for e, _ in text.sources])
    for e, where in text.sources:
        say(f"{where}: {e.n_sentences} sentences, {e.n_words} words", depth=1)
    record = {"texts": [w for _, w in text.sources]}
    if config.tune_weights_on is None:
        weights = [float(w) for w in config.weights]
        record["weights"] = weights
    else:
        res, tuned_on = _tune_weights(texts, text, config, estimator, smoother, src, say)
        weights = res.weights
        record.update(weights=weights, tuned_on=tuned_on, dev_ppl=res.dev_ppl, tries=len(res.trials))
    return src.weighted(weights), MergedSmoother(smoother, src, weights), record


def _tune_weights(texts: list, text: _Text, config: BuildConfig, estimator, smoother, src, say: Progress):
    """The weights that minimise the perplexity of the dev text (the first text keeping weight 1): the
    search's result and the dev text's description."""
    from corpora.registry import REGISTRY
    from corpora.sources import read_text_source

    from .count_merge import MergedSmoother, tune_weights

    dev_name, vocab = config.tune_weights_on, text.vocab
    dev_split = "valid" if dev_name in REGISTRY and not Path(dev_name).exists() else config.split
    d = read_text_source(dev_name, split=dev_split, data_dir=config.data_dir, tokenizer=text.spec)
    dev = vocab.encode_sentences(d.sentences)
    if dev.n_words == 0:
        raise InputError("the dev text has no tokens", path=d.description, fix="pass in-domain held-out text")

    def dev_ppl(weights):
        trial = type(estimator)(**config.estimator_params())
        return trial.fit_counts(src.weighted(weights), vocab=vocab,
                                smoother=MergedSmoother(smoother, src, weights)).perplexity(dev)

    say(f"tuning the weights on {d.description} ({dev.n_words} words)")
    res = tune_weights(len(texts), dev_ppl, say=lambda m: say(m, depth=1))
    say(f"weights {','.join(f'{w:.4g}' for w in res.weights)}: dev ppl {res.dev_ppl:.4f} ({len(res.trials)} tries)")
    if res.at_edge:
        say("note: a weight is at the end of the search range (2^-10 .. 2^10): the dev text may be too small or "
            "unlike every text but one; give --weights to set it")
    return res, d.description


def _report_limit(res, path: Optional[str], say: Progress) -> None:
    sizes = ["/".join(str(n) for n in x) for x in (res.ngrams_before, res.ngrams_after)]
    how = ("pruned inside the estimation, as lmplz does (--compat kenlm)" if res.method == "lmplz"
           else f"p(<unk>) {res.unk_prob_before:.6g} -> {res.unk_prob_after:.6g}")
    say(f"limit-vocab {path}: {res.kept_words} words kept, {res.removed_words} removed; n-grams "
        f"{sizes[0]} -> {sizes[1]}; {how}")
    if res.missing:
        say(f"note: {len(res.missing)} words of {path} are not in the trained vocabulary (not in the text, or cut "
            f"by --min-count), e.g. {', '.join(res.missing[:5])}: a recogniser would score them as <unk>")
