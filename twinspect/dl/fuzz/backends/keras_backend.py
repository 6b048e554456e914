"""Worker for Keras 3 on one backend (``keras-tensorflow``, ``keras-jax``, ``keras-torch``).

Run as ``python -m twinspect.dl.fuzz.backends.keras_backend <system>``; sets ``KERAS_BACKEND`` before
importing Keras, loads ``.keras`` files (:func:`twinspect.dl.fuzz.backends.loading.load_model`) and runs them
in inference mode.
"""

from __future__ import annotations

import os
import sys

from twinspect.dl.fuzz.backends.loading import load_model
from twinspect.dl.fuzz.backends.worker import serve


def main(system: str) -> None:
    """Serve requests for ``system`` (see :func:`twinspect.dl.fuzz.backends.worker.serve`)."""
    os.environ["KERAS_BACKEND"] = system.split("-", 1)[1]
    import keras
    import numpy as np

    cache: dict = {}

    def run_one(model_path: str, inputs_path: str) -> list:
        st = os.stat(model_path)
        key = (model_path, st.st_mtime_ns, st.st_size, st.st_ino)
        if key not in cache:  # the same path is rewritten for every model: key on the file's identity
            cache.clear()
            cache[key] = load_model(model_path)  # the file's weights, without computing discarded initial ones
        model = cache[key]
        x = np.load(inputs_path)["x"]
        out = model(x, training=False)
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [keras.ops.convert_to_numpy(o) for o in outs]

    serve(run_one)


if __name__ == "__main__":
    main(sys.argv[1])
