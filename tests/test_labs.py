"""``ngramlm lab``: the list, the three labs' measured claims, and their written reports."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import invoke_cli, needs

ROOT = Path(__file__).resolve().parents[1]
pytestmark = needs("matplotlib", "torch")
NAMES = ["positional-encoding", "attention-scaling", "nadaraya-watson"]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """Run every lab once through the CLI; the tests below read what they wrote."""
    d = tmp_path_factory.mktemp("labs")
    runs = {name: invoke_cli(["lab", name, "-o", d]) for name in NAMES}
    return d, runs


def results(out, name):
    return json.loads((out[0] / name / "results.json").read_text())["results"]


def test_lab_lists_the_labs_with_their_sections():
    code, stdout, _ = invoke_cli(["lab"])
    assert code == 0
    for name in NAMES:
        assert name in stdout
    assert "positional encoding" in stdout and "scaled dot-product attention" in stdout
    assert "attention pooling" in stdout


def test_unknown_lab_names_the_labs_and_exits_2():
    code, _, stderr = invoke_cli(["lab", "no-such-lab"])
    assert code == 2
    assert "unknown lab 'no-such-lab'" in stderr
    for name in NAMES:
        assert name in stderr


def test_positional_encoding_rotation_and_offset(out):
    r = results(out, "positional-encoding")
    assert r["rotation_error_max"] < 1e-9  # P[i+k] = M_k P[i] with one M_k for all i
    assert r["dot_offset_spread"] < 1e-9   # P[i]·P[i+δ] is the same for every i
    assert r["dot_closed_form_error"] < 1e-9


def test_positional_encoding_functions_directly():
    import numpy as np

    from labs.positional_encoding import encodings, rotation

    p = encodings(n_positions=50, d=16)
    assert np.allclose(p[7], rotation(k=7, d=16) @ p[0])
    assert np.isclose(p[3] @ p[10], p[20] @ p[27]) and np.isclose(p[3] @ p[10], p[10] @ p[3])


def test_attention_scaling_variances_and_saturation(out):
    by_d = {row["d"]: row for row in results(out, "attention-scaling")["by_d"]}
    assert abs(by_d[256]["var_scaled"] - 1) < 0.10
    assert abs(by_d[256]["var_dot"] - 256) < 0.10 * 256
    # unscaled softmax collapses towards one-hot as d grows; scaled stays spread out
    assert by_d[1024]["entropy_unscaled"] < 0.5 < 3.0 < by_d[1024]["entropy_scaled"]
    assert by_d[1024]["entropy_unscaled"] < by_d[16]["entropy_unscaled"]


def test_nadaraya_watson_narrow_kernel_and_learned_width(out):
    r = results(out, "nadaraya-watson")
    assert r["narrow_train_max_error"] < 1e-6
    mse = r["test_mse"]
    assert mse["learned"] < mse["average"]
    assert mse["learned"] < mse["fixed"]
    assert r["loo_loss_last"] < r["loo_loss_first"]


@pytest.mark.parametrize("name", NAMES)
def test_each_lab_writes_its_report(out, name):
    d, runs = out
    code, stdout, stderr = runs[name]
    assert code == 0, stderr
    assert "wrote" in stdout and ":" in stdout.splitlines()[1]  # headline numbers printed
    folder = d / name
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
