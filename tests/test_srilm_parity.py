"""Parity with SRILM's ngram-count (``compat="srilm"``) on committed SRILM-written ARPA files
(tests/data/srilm/README.md), and the smoothers' rules for degenerate count-of-counts."""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from corpora import Vocab
from corpora.errors import InputError
from corpora.toy import generate_corpus
from ngramlm import NgramLM
from ngramlm.loading import read_arpa
from ngramlm.srilm_compat import DEFAULT_GTMIN
from ngramlm.tools.pruning import ngram_words

from conftest import invoke_cli

DATA = Path(__file__).parent / "data" / "srilm"
PPL = json.loads((DATA / "toy-ppl.srilm.json").read_text())
# Fixture tag -> (our smoother, its parameters): SRILM's ngram-count options are in the README.
METHOD = {"katz": ("katz", {}), "wb": ("wb", {}), "absolute": ("absolute", {"discount": 0.7}), "kn": ("kn", {}),
          "mkn": ("mkn", {}), "addk": ("addk", {"k": 0.5})}


@pytest.fixture(scope="module")
def toy():
    c = generate_corpus()
    train, test = c.splits["train"][:400], c.splits["test"][:300]
    vocab = Vocab().fit(train)
    return vocab, vocab.encode_sentences(train), test


def _entries(model) -> dict:
    """{words: (log10 p, log10 back-off)} of every stored n-gram, as an ARPA file lists them."""
    it = model.vocab_.itos_
    out = {}
    for k in range(1, model.order_ + 1):
        bo = model.log10_backoff_[k - 1] if k < model.order_ else None
        for j, g in enumerate(ngram_words(model, k)):
            words = tuple(it[i] for i in g)
            if words == ("<pad>",):
                continue
            out[words] = (model.log10_prob_[k - 1][j], 0.0 if bo is None else bo[j])
    return out


def _arpa_entries(path) -> dict:
    """The same straight from the file's text (SRILM writes 7 significant digits; -99 is log10 0)."""
    out, order = {}, 0
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("\\") and line.endswith("-grams:"):
                order = int(line[1:line.index("-")])
                continue
            if not order or not line or line.startswith("\\"):
                continue
            fields = line.split("\t")
            out[tuple(fields[1].split(" "))] = (float(fields[0]), float(fields[2]) if len(fields) > 2 else 0.0)
    return out


def _fit(tag, vocab, enc):
    smoothing, params = METHOD[tag[:-3]]
    order, form, cut = int(tag[-3]), tag[-2], tag[-1]
    return NgramLM(order=order, smoothing=smoothing, compat="srilm", interpolate=(form == "i") or None,
                   gtmin=[1] if cut == "n" else None, **params).fit(enc, vocab=vocab)


TAGS = sorted(PPL)


def test_every_fixture_is_here_and_small():
    assert len(TAGS) == 14
    for tag in TAGS:
        f = DATA / f"toy{tag}.srilm.arpa.gz"
        assert f.stat().st_size < 300_000, f


@pytest.mark.parametrize("tag", TAGS)
def test_every_arpa_value_equals_srilms(toy, tag):
    vocab, enc, _ = toy
    ours = _entries(_fit(tag, vocab, enc))
    theirs = _arpa_entries(DATA / f"toy{tag}.srilm.arpa.gz")
    assert set(ours) == set(theirs), (len(set(ours) - set(theirs)), len(set(theirs) - set(ours)))
    worst = 0.0
    for g, (p, b) in theirs.items():
        q, c = ours[g]
        for x, y in ((p, q), (b, c)):
            if x <= -99 or y == -np.inf:  # log10 0 both ways
                assert x <= -99 and y == -np.inf, (g, x, y)
                continue
            worst = max(worst, abs(x - y))
    assert worst <= 1e-6, (tag, worst)


@pytest.mark.parametrize("tag", TAGS)
def test_ppl_and_ppl1_equal_ngram_ppl(toy, tag):
    vocab, enc, test = toy
    lm = _fit(tag, vocab, enc)
    r = lm.perplexity_report(vocab.encode_sentences(test))
    ref = PPL[tag]
    assert (r.sentences, r.words) == (ref["sentences"], ref["words"])
    # ngram -ppl prints 7 significant digits
    assert r.ppl == pytest.approx(ref["ppl"], rel=1e-6), tag
    assert r.ppl1 == pytest.approx(ref["ppl1"], rel=1e-6), tag
    assert r.log10_prob == pytest.approx(ref["logprob"], abs=0.06)


def test_cutoffs_store_fewer_ngrams_and_their_mass_goes_to_the_backoff(toy):
    """gtmin 2 from trigrams on (SRILM's default): the trigrams seen once are gone, yet every context
    still sums to one."""
    vocab, enc, _ = toy
    cut = NgramLM(order=3, smoothing="wb", compat="srilm").fit(enc, vocab=vocab)
    full = NgramLM(order=3, smoothing="wb", compat="srilm", gtmin=[1]).fit(enc, vocab=vocab)
    assert DEFAULT_GTMIN == (1, 1, 2)
    assert cut.n_ngrams_[:2] == full.n_ngrams_[:2] and cut.n_ngrams_[2] < full.n_ngrams_[2] / 2
    for ctx in (["<s>"], ["<s>", vocab.itos_[5]], [vocab.itos_[7], vocab.itos_[9]]):
        assert cut.next_probs(ctx).sum() == pytest.approx(1.0, abs=1e-5)  # float32 values, as SRILM's


def test_srilm_options_need_the_compat_and_refusals_say_why(toy):
    vocab, enc, _ = toy
    with pytest.raises(InputError, match="compat='srilm'"):
        NgramLM(order=3, smoothing="wb", gtmin=[1]).fit(enc, vocab=vocab)
    with pytest.raises(InputError, match="-cdiscount"):
        NgramLM(order=3, smoothing="absolute", compat="srilm").fit(enc, vocab=vocab)
    with pytest.raises(InputError, match="not one of SRILM"):
        NgramLM(order=3, smoothing="stupid", compat="srilm").fit(enc, vocab=vocab)


def test_srilm_refuses_this_modified_kneser_ney_5_gram_and_we_warn_and_go_on(toy):
    """SRILM stops ("one of required modified KneserNey count-of-counts is zero") on the toy's
    5-gram; here the order takes the fixed discounts, with a warning that names it."""
    vocab, enc, test = toy
    lm = NgramLM(order=5, smoothing="mkn", compat="srilm", interpolate=True).fit(enc, vocab=vocab)
    assert any("4-grams" in w and "fixed discounts" in w for w in lm.info_["warnings"])
    assert np.isfinite(lm.perplexity_report(vocab.encode_sentences(test)).ppl)


def test_native_file_keeps_the_srilm_options(toy, tmp_path):
    vocab, enc, _ = toy
    lm = NgramLM(order=3, smoothing="kn", compat="srilm", interpolate=True, gtmin=[1, 1, 1]).fit(enc, vocab=vocab)
    lm.save(tmp_path / "m.npz")
    back = NgramLM.load(tmp_path / "m.npz")
    assert (back.compat, back.interpolate, back.gtmin) == ("srilm", True, [1, 1, 1])
    ctx = ["<s>", vocab.itos_[5]]
    assert np.array_equal(back.next_probs(ctx), lm.next_probs(ctx))


def test_train_cli_with_srilm_options_writes_srilms_arpa(toy, tmp_path):
    vocab, enc, _ = toy
    text = tmp_path / "train.txt"
    text.write_text("\n".join(" ".join(s) for s in generate_corpus().splits["train"][:400]) + "\n")
    out = tmp_path / "kn.arpa"
    code, _, err = invoke_cli(["train", str(text), "--order", "3", "-s", "kn", "--compat", "srilm", "--interpolate",
                               "-o", str(out)])
    assert code == 0, err
    ours = _entries(read_arpa(out))
    theirs = _arpa_entries(DATA / "toykn3ic.srilm.arpa.gz")
    assert set(ours) == set(theirs)
    assert max(abs(ours[g][0] - theirs[g][0]) for g in theirs if theirs[g][0] > -99) <= 1e-6
    code, _, err = invoke_cli(["train", str(text), "--gtmin", "1", "-o", str(out)])
    assert code == 2 and "add --compat srilm" in err


# ----------------------------------------------------------------------------- the real corpora
def test_ptb_reproduces_mikolovs_srilm_baselines(shared_corpora):
    """Mikolov's thesis, Table 4.1 (SRILM on PTB): Good-Turing 3-gram 165.2 (ngram-count's defaults) and
    Kneser-Ney 3-gram 148.3 (-kndiscount -interpolate, no cut-offs); SRILM 1.7.3 printed 165.2308 /
    210.9276 and 148.2813 / 188.3136 (ppl / ppl1) here."""
    from corpora import load_corpus, prepare

    ds = prepare(load_corpus("ptb", data_dir=shared_corpora))
    gt = NgramLM(order=3, smoothing="katz", compat="srilm").fit(ds["train"], vocab=ds.vocab)
    r = gt.perplexity_report(ds["test"])
    assert (round(r.ppl, 4), round(r.ppl1, 4)) == (165.2308, 210.9276)
    kn = NgramLM(order=3, smoothing="mkn", compat="srilm", interpolate=True, gtmin=[1]).fit(ds["train"], vocab=ds.vocab)
    r = kn.perplexity_report(ds["test"])
    assert (round(r.ppl, 4), round(r.ppl1, 4)) == (148.2813, 188.3136)


def test_ptb_katz_and_character_mkn_train_with_warnings(shared_corpora, tmp_path):
    """Both once stopped with a discount error; SRILM's rule (Good-Turing) and the fixed discounts (Kneser-Ney)
    now let them go on, each with a warning that names the order."""
    env = {"NGRAMLM_DATA_DIR": str(shared_corpora)}
    out = tmp_path / "k.npz"
    code, _, err = invoke_cli(["train", "ptb", "--order", "3", "-s", "katz", "-o", str(out), "--data-dir",
                               str(shared_corpora)])
    assert code == 0, err
    assert "warning: Good-Turing 1-grams" in err
    code, _, err = invoke_cli(["train", "ptb", "--tokenizer", "char", "--order", "5", "-o", str(out), "--data-dir",
                               str(shared_corpora)])
    assert code == 0, err
    assert "warning: cannot estimate Kneser-Ney discounts for 1-grams" in err and "[0.5, 1.0, 1.5]" in err
    assert env  # the data directory is passed as an option, as a user would


def test_compare_rows_name_each_smoother_as_kenlm_and_srilm_spell_it(toy_dataset):
    """A report's n-gram row carries the SRILM/KenLM spelling of its smoother, shown once as a numbered
    note that every row of that smoother refers to."""
    from ngramlm import NgramCounts
    from reports.experiments.ngram_part import ngram_row
    from reports.render.report import _footnotes, _row

    ds = toy_dataset
    counts = NgramCounts.from_encoded(ds["train"], order=2, vocab_size=len(ds.vocab))
    rows = [_row(ngram_row(s, 2, counts, ds)[0]) for s in ("mkn", "wb", "mkn")]
    notes = {n["text"] for n in _footnotes(rows)}
    assert any("-kndiscount -interpolate" in n and "lmplz" in n for n in notes)
    assert any("-wbdiscount -interpolate" in n for n in notes)
    assert rows[0]["refs"] == rows[2]["refs"] != rows[1]["refs"]


def test_train_compat_srilm_prunes_and_limits_as_ngram_does():
    """`train --compat srilm` end to end with SRILM's other steps: -prune on the estimated model and
    -limit-vocab on it give the files SRILM wrote (tests/data/srilm/tools/README.md has the commands)."""
    tools = DATA / "tools"
    c = generate_corpus()
    toy5, toy_a = c.splits["train"][:500], c.splits["train"][:1500]
    v5 = Vocab().fit(toy5)
    pruned = NgramLM(order=5, smoothing="kn", compat="srilm", interpolate=True, gtmin=[1],
                     prune_entropy=1e-5).fit(v5.encode_sentences(toy5), vocab=v5)
    _same_entries(_entries(pruned), _arpa_entries(tools / "toy5.prune1e-5.arpa.gz"))
    va = Vocab().fit(toy_a)
    words = (tools / "words.txt").read_text().split()
    limited = NgramLM(order=3, smoothing="mkn", compat="srilm", interpolate=True).fit(
        va.encode_sentences(toy_a), vocab=va, limit_vocab=words)
    _same_entries(_entries(limited), _arpa_entries(tools / "toyA.limit.arpa.gz"))


def _same_entries(ours: dict, theirs: dict) -> None:
    ours = {g: v for g, v in ours.items() if g in theirs or v[0] > -np.inf}  # words outside a limited list
    assert set(ours) == set(theirs), (len(set(ours) - set(theirs)), len(set(theirs) - set(ours)))
    for g, (p, b) in theirs.items():
        q, c = ours[g]
        for x, y in ((p, q), (b, c)):
            if x <= -99:
                assert y == -np.inf or y <= -99, (g, x, y)
            else:
                assert abs(x - y) <= 1e-6, (g, x, y)


@pytest.mark.slow
def test_every_method_form_cutoff_and_order_1_to_5_against_live_srilm(tmp_path):
    """With SRILM's binaries at hand (``NGRAMLM_SRILM_BIN``): ngram-count on 1,500 toy sentences for
    every method, back-off and interpolated, default cut-offs and none, orders 1 to 5 (120 models), each
    against ours value for value (its 7 printed digits)."""
    import itertools
    import os
    import subprocess

    srilm = os.environ.get("NGRAMLM_SRILM_BIN")
    if not srilm:
        pytest.skip("set NGRAMLM_SRILM_BIN to the folder of SRILM's ngram-count")
    train = generate_corpus().splits["train"][:1500]
    text = tmp_path / "toy.txt"
    text.write_text("".join(" ".join(s) + "\n" for s in train))
    vocab = Vocab().fit(train)
    enc = vocab.encode_sentences(train)
    options = {"katz": [], "wb": ["-wbdiscount"], "absolute": ["-cdiscount", "0.7"], "kn": ["-ukndiscount"],
               "mkn": ["-kndiscount"], "addk": ["-addsmooth", "0.5"]}
    arpa = tmp_path / "srilm.arpa"
    for order, method, interp, cut in itertools.product(range(1, 6), options, (False, True), (True, False)):
        cmd = [os.path.join(srilm, "ngram-count"), "-order", str(order), "-unk", "-text", str(text), "-lm", str(arpa),
               *options[method], *(["-interpolate"] if interp else []),
               *([] if cut else [x for k in range(1, order + 1) for x in (f"-gt{k}min", "1")])]
        subprocess.run(cmd, check=True, capture_output=True)
        subprocess.run(["gzip", "-f", str(arpa)], check=True)
        smoothing, params = METHOD[method]
        lm = NgramLM(order=order, smoothing=smoothing, compat="srilm", interpolate=interp or None,
                     gtmin=None if cut else [1], **params).fit(enc, vocab=vocab)
        _same_entries(_entries(lm), _arpa_entries(tmp_path / "srilm.arpa.gz"))
