"""Worker for ONNX Runtime: the ``.keras`` model is exported to ONNX under Keras' TensorFlow backend
(``model.export(format="onnx")``, tf2onnx underneath) and run with ``onnxruntime.InferenceSession``.

Run as ``python -m twinspect.dl.fuzz.backends.onnxruntime onnxruntime``. An export failure is reported as
an error of this system (a converter failure is a finding of the ONNX path).
"""

from __future__ import annotations

import os
import sys
import tempfile

from twinspect.dl.fuzz.backends.loading import load_model
from twinspect.dl.fuzz.backends.worker import serve


def main(system: str) -> None:
    """Serve requests (see :func:`twinspect.dl.fuzz.backends.worker.serve`)."""
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3

    def run_one(model_path: str, inputs_path: str) -> list:
        x = np.load(inputs_path)["x"]
        model = load_model(model_path)  # the file's weights, without computing discarded initial ones
        model(x, training=False)  # Keras' ONNX export needs a model that has been called once
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            model.export(path, format="onnx", verbose=False)
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return list(sess.run(None, {name: x}))

    serve(run_one)


if __name__ == "__main__":
    main(sys.argv[1])
