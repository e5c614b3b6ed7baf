"""Execute the notebooks end to end (nbclient); any cell error fails the test.

Needs nbclient, nbformat and ipykernel (the test extra); skipped when they are missing. The notebooks
run on small data by design (the bundled 2,000-document sample, a 1,500-document labelled corpus).
"""
import json
import os

import pytest

NOTEBOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "notebooks")
OWNED = ["01_quickstart.ipynb", "02_lexical_vs_semantic.ipynb", "03_choosing_parameters.ipynb", "04_filtering.ipynb"]

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")
pytest.importorskip("pandas")


@pytest.mark.parametrize("name", OWNED)
def test_notebook_is_stored_without_outputs(name):
    with open(os.path.join(NOTEBOOKS, name), encoding="utf-8") as fh:
        raw = json.load(fh)
    nb = nbformat.reads(json.dumps(raw), as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{name} has no code cells"
    assert all(not c.outputs and c.execution_count is None for c in code), f"{name} was saved with outputs"


@pytest.mark.parametrize("name", OWNED)
def test_notebook_executes(name, tmp_path, monkeypatch):
    if name.startswith("02_"):  # the semantic stage needs the [semantic] extra
        pytest.importorskip("sentence_transformers")
        pytest.importorskip("faiss")
    if name.startswith("04_"):  # train_classifier needs the [train] extra
        pytest.importorskip("fasttext")
    # The kernel inherits this environment: keep the real CPU path (not the CUDA simulator that
    # conftest turns on for the kernel tests) and let the GPU be used when there is one.
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert outputs, f"{name} executed but produced no output"
