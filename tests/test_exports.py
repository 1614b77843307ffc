"""Exports and adapters for speech decoders: Kaldi's grammar FST, NeMo's token-level ARPA, torchaudio's
``CTCDecoderLM`` interface and a pyctcdecode language model over BPE pieces.

References: ``kaldilm`` (Kaldi's arpa2fst, from PyPI) for the FST, line for line; the ``kenlm`` module
(kenlm-ex) loading the NeMo file; pyctcdecode's own decoder running the piece model.  Where a reference
is not installed its test is skipped with the reason; the checks that need none (the FST's paths carry
the model's probabilities, the adapters' scores are the model's) always run.
"""
from __future__ import annotations

import math
import random
import sys
import types

import numpy as np
import pytest

from conftest import invoke_cli, needs
from corpora import load_corpus, prepare
from corpora.errors import InputError
from corpora.toy import ToyConfig
from ngramlm import Model, NgramLM
from ngramlm.io.arpa import write_arpa
from ngramlm.loading import load_any
from ngramlm.scorer import Scorer
from ngramlm.tools.export_fst import grammar_fst, read_symbol_table

# The commands until cli.py lists them (the same entries as its _COMMANDS would hold).
COMMANDS = {"export-fst": ("ngramlm.commands.export_decoders:export_fst_cmd", "Write a model as a grammar FST."),
            "export-nemo": ("ngramlm.commands.export_decoders:export_nemo_cmd", "Write NeMo's token-level ARPA.")}


@pytest.fixture
def cli_run(monkeypatch):
    import cli

    for name, entry in COMMANDS.items():
        monkeypatch.setitem(cli._COMMANDS, name, entry)
    return lambda *args: invoke_cli(list(args))


@pytest.fixture(scope="module")
def toy():
    return prepare(load_corpus("toy", toy_config=ToyConfig(n_train_tokens=20_000, n_valid_tokens=1_000,
                                                             n_test_tokens=1_000, vocab_size=500)))


@pytest.fixture(scope="module")
def arpas(toy, tmp_path_factory):
    """Toy models of orders 1-4, a pruned 4-gram that is not suffix-closed, as ARPA files."""
    from ngramlm.tools.pruning import prune_entropy

    d = tmp_path_factory.mktemp("fst")
    out = {}
    for order in (1, 2, 3, 4):
        lm = NgramLM(order=order, smoothing="mkn").fit(toy["train"], vocab=toy.vocab)
        write_arpa(lm, d / f"o{order}.arpa")
        out[order] = d / f"o{order}.arpa"
        if order == 4:
            pruned = prune_entropy(lm, 1e-4)
            assert not pruned.is_suffix_closed()  # top-order n-grams whose suffix was pruned
            write_arpa(Scorer(pruned), d / "pruned.arpa")
            out["pruned"] = d / "pruned.arpa"
    return out


# ----------------------------------------------------------------------------------- grammar FST
def fst_paths(text: str, symbols: dict, sentences, backoff: str = "#0"):
    """-ln p of each sentence along the FST (an interpreter of the text form): from the start state,
    each word's arc, taking back-off arcs while the state has none for it; then the final weight."""
    arcs, final, start = {}, {}, None
    for line in text.strip().split("\n"):
        f = line.split("\t")
        s = int(f[0])
        start = s if start is None else start
        if len(f) <= 2:
            final[s] = float(f[1]) if len(f) == 2 else 0.0
        else:
            arcs.setdefault(s, {})[int(f[2])] = (int(f[1]), float(f[4]) if len(f) == 5 else 0.0)
    bo = symbols[backoff]
    out = []
    for sent in sentences:
        s, cost = start, 0.0
        for w in [symbols[x] for x in sent] + [None]:
            while (w is None and s not in final) or (w is not None and w not in arcs.get(s, {})):
                s, c = arcs[s][bo]
                cost += c
            if w is None:
                cost += final[s]
            else:
                s, c = arcs[s][w]
                cost += c
        out.append(cost)
    return np.array(out)


@pytest.mark.parametrize("model", [1, 2, 3, 4, "pruned"])
def test_fst_paths_carry_the_models_probabilities(arpas, toy, model):
    lm = load_any(arpas[model])
    g = grammar_fst(lm.tables_)
    sentences = [[w if w in lm.vocab_.stoi_ else "<unk>" for w in s] for s in toy.corpus.sentences("test")][:60]
    enc, oov = lm.encode(sentences)
    want = -np.add.reduceat(lm.token_scores(enc, oov=oov).log10_prob, enc.starts[:-1]) * math.log(10)
    got = fst_paths(g.text, g.symbols, sentences)
    # Weights are printed with 6 significant digits, as OpenFst prints them: 1e-5 per arc at most.
    lengths = np.array([len(s) + 1 for s in sentences])
    assert np.all(np.abs(got - want) <= 1e-5 * np.maximum(1, np.abs(want)) + 2e-5 * lengths)
    assert g.symbols["<eps>"] == 0 and g.symbols["#0"] == 1 and g.skipped == 0


@pytest.mark.parametrize("model", [1, 2, 3, 4, "pruned"])
@pytest.mark.parametrize("disambig", ["#0", None])
def test_fst_is_kaldilms_line_for_line(arpas, model, disambig, tmp_path):
    kaldilm = pytest.importorskip("kaldilm", reason="kaldilm (pip install kaldilm: Kaldi's arpa2fst) is the reference")
    words = tmp_path / "words.txt"
    ref = kaldilm.arpa2fst(str(arpas[model]), disambig_symbol=disambig or "", write_symbol_table=str(words))
    g = grammar_fst(load_any(arpas[model]).tables_, disambig=disambig)
    assert ref.strip("\n") == g.text.strip("\n")  # kaldilm's text has a blank line either side
    assert words.read_text() == g.symbols_text()


def test_fst_with_a_symbol_table_skips_what_kaldilm_skips(arpas, toy, tmp_path):
    kaldilm = pytest.importorskip("kaldilm", reason="kaldilm (pip install kaldilm: Kaldi's arpa2fst) is the reference")
    words = ["<eps>", "#0", "<s>", "</s>", "<unk>"] + [w for i, w in enumerate(toy.vocab.itos_[4:]) if i % 5]
    table = tmp_path / "words.txt"
    table.write_text("".join(f"{w} {i}\n" for i, w in enumerate(words)))
    ref = kaldilm.arpa2fst(str(arpas[4]), disambig_symbol="#0", read_symbol_table=str(table), max_arpa_warnings=0)
    g = grammar_fst(load_any(arpas[4]).tables_, symbols=read_symbol_table(table))
    assert ref.strip("\n") == g.text.strip("\n")
    assert g.skipped > 1000  # every n-gram with one of the fifth of the words left out


def test_export_fst_command(arpas, tmp_path, cli_run, toy):
    out, words = tmp_path / "G.txt", tmp_path / "words.txt"
    code, _, err = cli_run("export-fst", arpas[3], out, "--write-symbol-table", words)
    assert code == 0, err
    g = grammar_fst(load_any(arpas[3]).tables_)
    assert out.read_text() == g.text and words.read_text() == g.symbols_text()
    assert f"{g.n_states} states, {g.n_arcs} arcs" in err
    # read back: the same table gives the same FST; a table without #0 is refused, nothing written
    code, _, err = cli_run("export-fst", arpas[3], tmp_path / "G2.txt", "--read-symbol-table", words)
    assert code == 0 and (tmp_path / "G2.txt").read_text() == g.text
    bad = tmp_path / "bad.txt"
    bad.write_text("<eps> 0\n<s> 1\n</s> 2\n")
    code, _, err = cli_run("export-fst", arpas[3], tmp_path / "G3.txt", "--read-symbol-table", bad)
    assert code == 2 and "no '#0'" in err and "fix:" in err and not (tmp_path / "G3.txt").exists()
    addk = NgramLM(order=2, smoothing="addk").fit(toy["train"], vocab=toy.vocab)
    addk.save(tmp_path / "addk.npz")
    code, _, err = cli_run("export-fst", tmp_path / "addk.npz", tmp_path / "G4.txt")
    assert code == 2 and "not a back-off distribution" in err and not (tmp_path / "G4.txt").exists()


# ----------------------------------------------------------------------------------- subword models
WORDS = ("the market said company shares report investors trading stock prices billion million quarter "
         "analysts expects higher lower interest rates").split()


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A 3-gram over BPE pieces (``train --tokenizer bpe:60``), its file and test lines."""
    pytest.importorskip("tokenizers", reason="learned subword tokenizers need the subwords extra")
    d = tmp_path_factory.mktemp("bpe")
    r = random.Random(11)
    (d / "train.txt").write_text("\n".join(" ".join(r.choice(WORDS) for _ in range(r.randint(4, 14)))
                                           for _ in range(400)) + "\n")
    code, _, err = invoke_cli(["train", d / "train.txt", "--tokenizer", "bpe:60", "--order", "3", "--smoothing", "wb",
                               "-o", d / "bpe.arpa"])
    assert code == 0, err
    lines = [" ".join(r.choice(WORDS) for _ in range(r.randint(3, 9))) for _ in range(30)] + ["the analysts were higher"]
    return {"arpa": d / "bpe.arpa", "dir": d, "lines": lines}


def test_nemo_arpa_scores_in_kenlm_as_the_model_does(bpe, cli_run):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module (pip install kenlm-ex) is the reference")
    from corpora.tokenize import make_tokenizer

    lm = load_any(bpe["arpa"])
    tok = make_tokenizer(lm.vocab_.tokenizer)
    # The acoustic model's tokenizer numbers the same pieces otherwise, and has more of them.
    pieces = lm.vocab_.itos_[4:]
    asr = ["<unk>"] + random.Random(3).sample(pieces, len(pieces)) + ["▁extra", "xq"]
    (bpe["dir"] / "tokens.txt").write_text("".join(f"{p}\t0\n" for p in asr))  # a SentencePiece .vocab
    out = bpe["dir"] / "nemo.arpa"
    code, _, err = cli_run("export-nemo", bpe["arpa"], out, "--tokens", bpe["dir"] / "tokens.txt")
    assert code == 0, err
    unigrams = out.read_text().split("\\1-grams:\n")[1].split("\n\n")[0].split("\n")
    names = [u.split("\t")[1] for u in unigrams]
    assert sorted(names) == sorted(["<s>", "</s>", "<unk>"] + [chr(asr.index(p) + 100) for p in pieces])
    ours, theirs = Model(str(bpe["arpa"])), kenlm.Model(str(out))
    for line in bpe["lines"]:
        ps = tok.encode(line)
        as_ids = " ".join(chr(asr.index(p) + 100) for p in ps)  # what NeMo's decoder asks KenLM
        assert theirs.score(as_ids) == pytest.approx(ours.score(" ".join(ps)), abs=1e-5)
    # a token list that lacks pieces of the model: named, with the fix, nothing written
    (bpe["dir"] / "short.txt").write_text("<unk>\n▁the\n")
    code, _, err = cli_run("export-nemo", bpe["arpa"], bpe["dir"] / "n2.arpa", "--tokens", bpe["dir"] / "short.txt")
    assert code == 2 and "pieces are not in the token list" in err and "acoustic model's own tokenizer" in err
    assert not (bpe["dir"] / "n2.arpa").exists()


@needs("pyctcdecode")
def test_pyctcdecode_decodes_with_the_piece_model(bpe):
    from corpora.tokenize import make_tokenizer
    from fusion import piece_language_model
    from pyctcdecode import Alphabet, BeamSearchDecoderCTC

    lm = load_any(bpe["arpa"])
    tok = make_tokenizer(lm.vocab_.tokenizer)
    labels = [""] + lm.vocab_.itos_[4:]  # the acoustic model's labels: blank, then the pieces
    at = {p: i for i, p in enumerate(labels)}
    plm = piece_language_model(bpe["arpa"], alpha=0.5, beta=1.0)

    def logits(text, confuse=None):
        frames = []
        for p in tok.encode(text):
            f = np.full(len(labels), 1e-4)
            if confuse and p == confuse[0]:
                f[at[confuse[0]]], f[at[confuse[1]]] = 0.4, 0.5  # the wrong piece sounds likelier
            else:
                f[at[p]] = 0.9
            frames += [f, np.where(np.arange(len(labels)) == 0, 0.9, 1e-4)]  # each piece, then a blank
        x = np.array(frames)
        return np.log(x / x.sum(1, keepdims=True))

    decoder = BeamSearchDecoderCTC(Alphabet.build_alphabet(labels), language_model=plm)
    text = "the analysts said shares were higher"
    beam = decoder.decode_beams(logits(text))[0]
    assert beam[0] == text
    # Its LM score is pyctcdecode's: alpha * ln p(every piece and </s>) + beta per word.
    lm_part = beam[4] - beam[3]
    want = 0.5 * math.log(10) * Model(str(bpe["arpa"])).score(" ".join(tok.encode(text))) + 1.0 * len(text.split())
    assert lm_part == pytest.approx(want, abs=1e-9)
    # The acoustics prefer "marpet"; the piece model knows "market".
    confused = logits("the market said", confuse=("k", "p"))
    assert BeamSearchDecoderCTC(Alphabet.build_alphabet(labels)).decode(confused) == "the marpet said"
    assert decoder.decode(confused) == "the market said"
    assert plm.score_partial_token("mark") == 0.0 and plm.score_partial_token("zé") == -10.0  # é: never seen


# ----------------------------------------------------------------------------------- torchaudio's interface
def test_ctc_decoder_lm_scores_are_the_models_and_states_merge(arpas, toy):
    from fusion import CTCDecoderNgramLM

    model = Model(str(arpas[3]))
    words = list(reversed(toy.vocab.itos_[3:]))  # the decoder's own numbering
    lm = CTCDecoderNgramLM(arpas[3], words)
    for sent in toy.corpus.sentences("test")[:20]:
        sent = [w if w in model else "<unk>" for w in sent]
        for nothing in (False, True):
            state, total = lm.start(nothing), 0.0
            for w in sent:
                state, s = lm.score(state, words.index(w))
                total += s
            state, s = lm.finish(state)
            assert total + s == pytest.approx(model.score(" ".join(sent), bos=not nothing), abs=1e-12)
    # Histories ending in the same two words have the same state object (a 3-gram): they merge.
    a, b, c, d = (words.index(w) for w in toy.vocab.itos_[10:14])
    s0 = lm.start()
    x = lm.score(lm.score(lm.score(s0, a)[0], c)[0], d)[0]
    y = lm.score(lm.score(lm.score(s0, b)[0], c)[0], d)[0]
    assert x is y and lm.score(s0, a)[0] is not lm.score(s0, b)[0]
    with pytest.raises(InputError, match="outside the"):
        lm.score(s0, len(words))
    with pytest.raises(InputError, match="none of the decoder's"):
        CTCDecoderNgramLM(arpas[3], ["NOT", "WORDS"])


def test_as_torchaudio_uses_torchaudios_states(arpas, toy, monkeypatch):
    """torchaudio is not installed here: its two classes as its documentation describes them stand in."""
    from fusion.ctc import CTCDecoderNgramLM, as_torchaudio

    with monkeypatch.context() as m:
        m.setitem(sys.modules, "torchaudio", None)
        with pytest.raises(InputError, match="torchaudio is not installed"):
            as_torchaudio(CTCDecoderNgramLM(arpas[3], toy.vocab.itos_[3:]))

    class CTCDecoderLM:
        def __init__(self):
            pass

    class CTCDecoderLMState:
        def __init__(self):
            self.children = {}

        def child(self, i):
            return self.children.setdefault(i, CTCDecoderLMState())

    decoder = types.ModuleType("torchaudio.models.decoder")
    decoder.CTCDecoderLM, decoder.CTCDecoderLMState = CTCDecoderLM, CTCDecoderLMState
    monkeypatch.setitem(sys.modules, "torchaudio", types.ModuleType("torchaudio"))
    monkeypatch.setitem(sys.modules, "torchaudio.models", types.ModuleType("torchaudio.models"))
    monkeypatch.setitem(sys.modules, "torchaudio.models.decoder", decoder)
    words = toy.vocab.itos_[3:]
    lm = as_torchaudio(CTCDecoderNgramLM(arpas[3], words))
    assert isinstance(lm, CTCDecoderLM)
    model = Model(str(arpas[3]))
    sent = [w if w in model else "<unk>" for w in toy.corpus.sentences("test")[0]]
    state, total = lm.start(False), 0.0
    assert isinstance(state, CTCDecoderLMState)
    for w in sent:
        state, s = lm.score(state, words.index(w))
        total += s
    total += lm.finish(state)[1]
    assert total == pytest.approx(model.score(" ".join(sent)), abs=1e-12)
    a, b, c, d = (words.index(w) for w in words[7:11])
    s0 = lm.start(False)
    x = lm.score(lm.score(lm.score(s0, a)[0], c)[0], d)[0]
    y = lm.score(lm.score(lm.score(s0, b)[0], c)[0], d)[0]
    assert x is y  # one torchaudio state per n-gram state: the decoder merges the two hypotheses


def test_the_adapters_and_exports_load_without_torch():
    """The decoder adapters and the exports are torch-free (a CTC decoder's process need not load it)."""
    import subprocess

    code = ("import sys, fusion; fusion.CTCDecoderNgramLM; fusion.piece_language_model; "
            "import ngramlm.next_table, ngramlm.tools.export_fst, ngramlm.tools.export_nemo, "
            "ngramlm.commands.export_decoders; assert 'torch' not in sys.modules, 'torch was imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert r.returncode == 0, r.stderr
