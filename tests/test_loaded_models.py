"""A model read from a file says what it is -- its order and the smoothing the file records -- never a
made-up smoother (issue 23).  Before: every ARPA file became ``NgramLM(smoothing="arpa")``, and
refitting it failed with "unknown smoother 'arpa'"."""
from __future__ import annotations

import numpy as np
import pytest

from corpora.errors import InputError
from ngramlm import NgramLM
from ngramlm.io.arpa import write_arpa
from ngramlm.loading import read_arpa


@pytest.fixture(scope="module")
def fitted(toy_dataset, tmp_path_factory):
    d = tmp_path_factory.mktemp("loaded")
    lm = NgramLM(order=3, smoothing="wb").fit(toy_dataset["train"], vocab=toy_dataset.vocab)
    ours = d / "ours.arpa"
    write_arpa(lm, ours)
    foreign = d / "foreign.arpa"  # as KenLM or SRILM write it: no ngramlm-meta comment
    foreign.write_text("".join(line for line in ours.read_text("utf-8").splitlines(True)
                               if not line.startswith("# ngramlm-meta")), "utf-8")
    return lm, ours, foreign


def test_our_arpa_records_its_smoothing_and_refits_to_the_same_model(fitted, toy_dataset):
    lm, ours, _ = fitted
    back = read_arpa(ours)
    assert back.smoother_name_ == "wb" and back.order_ == 3 and back.smoothing == "wb"
    assert repr(back).startswith("NgramLM(order=3, smoothing='wb'")
    refit = back.fit(toy_dataset["train"], vocab=toy_dataset.vocab)
    for a, b in zip(refit.tables_.log10_prob, lm.tables_.log10_prob):
        assert np.array_equal(a, b)


def test_a_foreign_arpa_says_its_smoothing_is_not_recorded_and_refuses_to_guess(fitted, toy_dataset, tmp_path,
                                                                                run_cli):
    lm, _, foreign = fitted
    back = read_arpa(foreign)
    assert back.smoother_name_ == "unknown" and back.smoothing is None and back.order_ == 3
    assert "arpa" not in repr(back)
    with pytest.raises(InputError, match="does not record its smoothing") as e:
        back.fit(toy_dataset["train"], vocab=toy_dataset.vocab)
    assert "smoothing='mkn'" in str(e.value)
    native = tmp_path / "m.npz"
    assert run_cli("import-arpa", foreign, native)[0] == 0
    code, out, err = run_cli("ppl", native, "toy")
    assert code == 0 and "(3-gram, smoothing not recorded in the file)" in out, err
    a = lm.token_scores(toy_dataset["test"]).log10_prob
    b = back.token_scores(toy_dataset["test"]).log10_prob
    assert np.allclose(a, b, atol=1e-6)  # the same model, whatever it is called
