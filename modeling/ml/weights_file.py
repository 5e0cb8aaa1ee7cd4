"""Reading ``torch.save`` files safely: ``weights_only=True`` plus an allow-list of the numpy
constructors that released files (PANNs' ``main.py`` checkpoints) pickle.

Never full unpickling: a file naming any other Python object is refused, and the message names
the object, so a reader can tell "not a PyTorch file" from "a PyTorch file holding more than
weights".
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch


def _numpy_globals() -> list[Any]:
    """The numpy constructors a pickled array or scalar names: rebuilding an array from its
    bytes, nothing that runs code. numpy 1.x files name them under ``numpy.core``, numpy 2
    under ``numpy._core``; both spellings are allowed."""
    from numpy._core import multiarray

    dtype_classes = [getattr(np.dtypes, name) for name in dir(np.dtypes) if name.endswith("DType")]
    return [
        multiarray._reconstruct,
        (multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
        multiarray.scalar,
        (multiarray.scalar, "numpy.core.multiarray.scalar"),
        np.ndarray,
        np.dtype,
        *dtype_classes,
    ]


NUMPY_GLOBALS = _numpy_globals()
ALLOWED_NAMES = {
    entry[1] if isinstance(entry, tuple) else f"{entry.__module__}.{entry.__qualname__}"
    for entry in NUMPY_GLOBALS
}
_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def load_file(path: Path | str) -> Any:
    """A ``torch.save`` file read with ``weights_only=True`` and the numpy allow-list.

    ValueError says which: not a PyTorch file at all, or a PyTorch file that pickles an object
    outside the allow-list (named), which is refused rather than unpickled.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} does not exist")
    try:
        with torch.serialization.safe_globals(NUMPY_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = _GLOBAL.search(str(exc))
        what = f" ({found.group(1)})" if found else ""
        raise ValueError(
            f"{path}: a PyTorch file that stores a Python object{what} outside the allowed "
            "tensors, numbers, strings and numpy arrays; it is not unpickled"
        ) from None
    except Exception as exc:
        raise ValueError(f"{path}: not a PyTorch weights file ({exc})") from None
