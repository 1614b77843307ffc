"""``ngramlm lab``: the list, each lab's measured claim, and the reports they write.

The closed-form labs run at their default size; the training labs run with ``--quick``
(seconds each).  Each lab has its own fixture, so a lab runs once, and only when a test
that reads it is selected (``-k positional`` runs the positional-encoding lab alone).  The
labs that read The Time Machine are skipped where the real corpora are absent
(``$NGRAMLM_TEST_CORPORA``, else ``<repo>/../shared/corpora``); the tests of the labs that
take more than a few seconds are marked ``slow``."""
from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import NamedTuple

import pytest

from conftest import invoke_cli, needs

ROOT = Path(__file__).resolve().parents[1]
pytestmark = needs("matplotlib", "torch")
CLOSED_FORM = ["positional-encoding", "attention-scaling", "nadaraya-watson"]
SELF_CONTAINED = ["attention-cost", "long-range", "sine-forecast"]  # run with --quick, no corpus files
CORPUS_LABS = ["gradients", "clipping", "bptt", "minibatch", "depth", "bidirectional", "exposure-bias"]
NAMES = CLOSED_FORM + SELF_CONTAINED + CORPUS_LABS
# The labs that take more than about 5 s on 2 cores (measured: bidirectional 6.5 s, depth 5.9 s; the others
# 0.6-4.2 s): their tests are marked `slow`.
SLOW_LABS = {"depth", "bidirectional"}


def corpora_dir():
    """The real corpora's folder, or None where The Time Machine is not in it."""
    root = Path(os.environ.get("NGRAMLM_TEST_CORPORA") or ROOT.parent / "shared" / "corpora").resolve()
    return root if (root / "timemachine").is_dir() else None


class LabRun(NamedTuple):
    """One ``ngramlm lab NAME -o out`` run: its exit code and output; the lab wrote ``out/NAME/``."""
    out: Path
    name: str
    code: int
    stdout: str
    stderr: str

    @property
    def folder(self) -> Path:
        return self.out / self.name

    def results(self) -> dict:
        assert self.code == 0, self.stderr
        return json.loads((self.folder / "results.json").read_text())["results"]


@pytest.fixture(scope="module")
def labs_out(tmp_path_factory):
    """The one ``-o`` folder every lab of this module writes into (each into its own sub-folder)."""
    return tmp_path_factory.mktemp("labs")


def fixture_name(name: str) -> str:
    """The fixture of lab ``name``: ``lab_`` and its name with underscores."""
    return "lab_" + name.replace("-", "_")


def lab_fixture(name: str):
    """A module-scoped fixture that runs lab ``name`` through the CLI the first time a test asks for it."""

    @pytest.fixture(scope="module", name=fixture_name(name))
    def run(labs_out) -> LabRun:
        args = ["lab", name]
        if name not in CLOSED_FORM:
            args.append("--quick")
        if name in CORPUS_LABS:
            data = corpora_dir()
            if data is None:
                pytest.skip("The Time Machine is not available (set NGRAMLM_TEST_CORPORA)")
            args += ["--data-dir", data]
        return LabRun(labs_out, name, *invoke_cli([*args, "-o", labs_out]))

    run.__doc__ = f"The ``{name}`` lab, run once for this module."
    return run


lab_positional_encoding = lab_fixture("positional-encoding")
lab_attention_scaling = lab_fixture("attention-scaling")
lab_nadaraya_watson = lab_fixture("nadaraya-watson")
lab_attention_cost = lab_fixture("attention-cost")
lab_long_range = lab_fixture("long-range")
lab_sine_forecast = lab_fixture("sine-forecast")
lab_gradients = lab_fixture("gradients")
lab_clipping = lab_fixture("clipping")
lab_bptt = lab_fixture("bptt")
lab_minibatch = lab_fixture("minibatch")
lab_depth = lab_fixture("depth")
lab_bidirectional = lab_fixture("bidirectional")
lab_exposure_bias = lab_fixture("exposure-bias")


def test_the_tests_of_the_slow_labs_are_marked_slow():
    # Else `-m "not slow"` would run a slow lab after all, for the one test that reads it unmarked.
    slow_fixtures = {fixture_name(n) for n in SLOW_LABS}
    for name, fn in globals().items():
        if name.startswith("test_") and slow_fixtures & set(inspect.signature(fn).parameters):
            assert any(m.name == "slow" for m in getattr(fn, "pytestmark", [])), name


def test_lab_lists_the_labs_with_their_sections():
    code, stdout, _ = invoke_cli(["lab"])
    assert code == 0
    for name in NAMES:
        assert name in stdout
    assert "positional encoding" in stdout and "scaled dot-product attention" in stdout
    assert "attention pooling" in stdout
    assert "exposure bias" in stdout and "Bidirectional" in stdout and "Markov" in stdout


def test_unknown_lab_names_the_labs_and_exits_2():
    code, _, stderr = invoke_cli(["lab", "no-such-lab"])
    assert code == 2
    assert "unknown lab 'no-such-lab'" in stderr
    for name in NAMES:
        assert name in stderr


def test_positional_encoding_rotation_and_offset(lab_positional_encoding):
    r = lab_positional_encoding.results()
    assert r["rotation_error_max"] < 1e-9  # P[i+k] = M_k P[i] with one M_k for all i
    assert r["dot_offset_spread"] < 1e-9   # P[i]·P[i+δ] is the same for every i
    assert r["dot_closed_form_error"] < 1e-9


def test_positional_encoding_functions_directly():
    import numpy as np

    from labs.positional_encoding import encodings, rotation

    p = encodings(n_positions=50, d=16)
    assert np.allclose(p[7], rotation(k=7, d=16) @ p[0])
    assert np.isclose(p[3] @ p[10], p[20] @ p[27]) and np.isclose(p[3] @ p[10], p[10] @ p[3])


def test_attention_scaling_variances_and_saturation(lab_attention_scaling):
    by_d = {row["d"]: row for row in lab_attention_scaling.results()["by_d"]}
    assert abs(by_d[256]["var_scaled"] - 1) < 0.10
    assert abs(by_d[256]["var_dot"] - 256) < 0.10 * 256
    # unscaled softmax collapses towards one-hot as d grows; scaled stays spread out
    assert by_d[1024]["entropy_unscaled"] < 0.5 < 3.0 < by_d[1024]["entropy_scaled"]
    assert by_d[1024]["entropy_unscaled"] < by_d[16]["entropy_unscaled"]


def test_nadaraya_watson_narrow_kernel_and_learned_width(lab_nadaraya_watson):
    r = lab_nadaraya_watson.results()
    assert r["narrow_train_max_error"] < 1e-6
    mse = r["test_mse"]
    assert mse["learned"] < mse["average"]
    assert mse["learned"] < mse["fixed"]
    assert r["loo_loss_last"] < r["loo_loss_first"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_LABS else n for n in NAMES])
def test_each_lab_writes_its_report(name, request):
    run = request.getfixturevalue(fixture_name(name))
    assert run.code == 0, run.stderr
    assert "wrote" in run.stdout and ":" in run.stdout.splitlines()[1]  # headline numbers printed
    d, folder = run.out, run.folder
    payload = json.loads((folder / "results.json").read_text())
    pngs = sorted(p.name for p in (folder / "plots").glob("*.png"))
    assert len(pngs) >= 2 and payload["plots"] == [f"plots/{Path(p).name}" for p in payload["plots"]]
    html = (folder / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(pngs)  # self-contained
    md = (folder / "report.md").read_text()
    for p in pngs:
        assert f"plots/{p}" in md
    for f in ("report.md", "report.html", "results.json"):
        text = (folder / f).read_text()
        assert str(d) not in text and str(ROOT) not in text  # no absolute paths
    assert not list(folder.rglob("*.tmp"))


# ---------------------------------------------------------------- the sequence-model labs


def test_gradients_exact_exercise_and_gated_cells_keep_gradients_longer(lab_gradients):
    r = lab_gradients.results()
    assert r["linear_exact"]["0.5"] == pytest.approx(0.5 ** 100, rel=1e-9)  # the exercise: 7.9e-31
    assert r["linear_exact"]["1.5"] == pytest.approx(1.5 ** 100, rel=1e-9)  # and its exploding twin: 4.1e17
    prof = r["tanh_gain_profiles"]
    assert prof["0.5"][0] < 1e-20 < 1 < prof["3.0"][0]  # 100 steps back: vanished / exploded
    back50 = r["trained_back50"]
    assert back50["lstm"] > 100 * back50["rnn_tanh"]  # trained: the tanh RNN forgets far faster
    for cell in ("rnn_tanh", "gru", "lstm"):
        assert r["cells"][cell]["valid_ppl"] < 12  # they did learn (uniform over 27 chars would be 27)


def test_clipping_bounds_the_update_norm(lab_clipping):
    r = lab_clipping.results()
    bound = r["lr"] * r["theta"]
    clipped, unclipped = r["runs"]["clipped"], r["runs"]["unclipped"]
    assert max(clipped["update_norms"]) <= bound * (1 + 1e-5)
    assert all(u <= r["lr"] * min(g, r["theta"]) * (1 + 1e-5) + 1e-9
               for g, u in zip(clipped["grad_norms"], clipped["update_norms"]))
    assert max(unclipped["update_norms"]) > 10 * bound  # the same batches without clipping: a blow-up
    assert clipped["valid_ppl"] is not None and clipped["valid_ppl"] < 12
    assert unclipped["valid_ppl"] is None or unclipped["valid_ppl"] > 2 * clipped["valid_ppl"]


def test_bptt_truncation_cuts_the_gradient_and_randomised_is_unbiased(lab_bptt):
    r = lab_bptt.results()
    assert r["truncated_beyond_cut"] == 0.0  # nothing flows past the last cut
    assert r["reach"]["full"][0] > 0  # full BPTT reaches the first input
    cos = r["cosine_to_full"]
    assert cos["randomised_mean"] >= cos["randomised_single"] - 1e-6  # averaging draws approaches the full gradient
    assert 0.5 < cos["truncated"] <= 1.0 + 1e-6
    for scheme in ("full", "truncated", "randomised"):
        assert r["runs"][scheme]["valid_ppl"] < 12


def test_minibatch_batches_and_both_schemes_learn(lab_minibatch):
    r = lab_minibatch.results()
    seq, rnd = r["batches_shown"]["sequential"], r["batches_shown"]["random"]
    for (x0, _), (x1, _) in zip(seq, seq[1:]):  # each row continues where the previous batch's row stopped
        for a, b in zip(x0, x1):
            assert b[0] == a[-1] + 1
    for xs, ys in seq + rnd:  # targets are the inputs shifted by one
        for x, y in zip(xs, ys):
            assert y == [t + 1 for t in x]
    starts = [row[0] for xs, _ in rnd for row in xs]
    assert len(set(s % 5 for s in starts)) == 1  # one random offset, windows of bptt = 5
    assert starts != sorted(starts)  # shuffled
    for scheme in ("random", "sequential"):
        assert r["runs"][scheme]["valid_ppl"] < 12


@pytest.mark.slow
def test_depth_adds_one_layer_of_parameters_each(lab_depth):
    r = lab_depth.results()
    p = [r["runs"][str(d)]["params"] for d in (1, 2, 3)]
    assert p[0] < p[1] < p[2] and p[2] - p[1] == p[1] - p[0]
    for d in (1, 2, 3):
        assert r["runs"][str(d)]["valid_ppl"] < 12


@pytest.mark.slow
def test_bidirectional_lm_cheats_but_helps_the_cloze(lab_bidirectional):
    m = lab_bidirectional.results()["models"]
    assert m["bidirectional"]["lm_valid_ppl"] < 1.5 < 3 < m["causal"]["lm_valid_ppl"]
    assert m["bidirectional"]["cloze_accuracy"] > m["causal"]["cloze_accuracy"] + 0.05


def test_exposure_bias_teacher_forced_beats_free_running(lab_exposure_bias):
    r = lab_exposure_bias.results()
    tf, fr = r["teacher_forced_acc"], r["free_running_acc"]
    assert tf[0] == pytest.approx(fr[0], abs=0.02)  # the first character: same model, same true prefix
    assert r["teacher_forced_mean"] > r["free_running_mean"] + 0.1
    assert fr[-1] < fr[0]
    after = r["after_first_error"]
    assert after["teacher_forced"] > after["free_running"]


def test_attention_cost_quadratic_memory_and_path_lengths(lab_attention_cost):
    r = lab_attention_cost.results()
    assert r["slopes"]["attention_memory"] == pytest.approx(2.0, abs=1e-6)  # the n×n weights, exactly
    n = r["path_n"]
    assert r["path_length"] == {"attention": 1, "rnn": n - 1, "conv": -(-(n - 1) // 2)}
    rows = r["by_n"]
    assert rows[-1]["attention_weight_bytes"] == 4 * r["batch"] * rows[-1]["n"] ** 2
    assert r["permutation_equivariance_error"] < 1e-5  # no positions: order is invisible to it


def test_long_range_the_ngram_pays_once_the_origin_leaves_its_window(lab_long_range):
    r = lab_long_range.results()
    assert r["n_pairs"] > 50
    assert r["median_bits"]["true language"] < 0.2  # the true model: about 0.1 bit when the expected word comes
    far = r["far_mean_bits"]
    assert far["MKN 5-gram"] > 3.0 > 1.0 > far["true language"]  # measured: 4.58 vs 0.63 (default), 4.60 vs 0.24 (quick)
    assert r["mean_bits"]["truth without the origin"] > 3.0
    assert r["bits_per_token"]["truth"] < r["bits_per_token"]["MKN 5-gram"]


def test_sine_forecast_errors_accumulate_with_k(lab_sine_forecast):
    mse = lab_sine_forecast.results()["mse_clean"]
    assert mse["1"] < mse["4"] < mse["16"] < mse["64"]
    assert mse["64"] > 10 * mse["1"]
