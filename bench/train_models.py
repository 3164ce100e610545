#!/usr/bin/python3
"""Make the training benchmark's inputs (docs/benchmarks.md, "Training step (CPU backend)").

Run with Debian's Python (PyTorch 1.13, torchvision 0.14, onnx 1.12):

    /usr/bin/python3 bench/train_models.py [--out build/bench-models]

Writes OUT/resnet18_train/ (not committed, ~45 MB):

  model.onnx   torchvision resnet18(num_classes=1000), exported in TRAINING mode (opset 17,
               BatchNormalization with training_mode=1, no constant folding), batch 16
               fixed, the INITIAL weights (torch.manual_seed(SEED)) inline
  input_0.pb   a fixed 16x3x224x224 float32 batch (randn), TensorProto named "input"
  labels.pb    int64 labels [16] in [0, 1000)

The Transformer case reuses tests/fixtures/transformer/ (model.onnx, input_0.pb, labels.pb).
bench/train_peer.py rebuilds the same modules and reads their initial weights back from the
ONNX initializers, so both sides start from identical weights.
"""

import argparse
import copy
import io
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

SEED = 0
BATCH = 16
CLASSES = 1000


def save_tensor(path, array, name):
    t = numpy_helper.from_array(np.ascontiguousarray(array), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def resnet18():
    torch.manual_seed(SEED)
    model = torchvision.models.resnet18(num_classes=CLASSES)
    model.train()
    return model


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "bench-models"))
    args = ap.parse_args()
    out = os.path.join(args.out, "resnet18_train")
    os.makedirs(out, exist_ok=True)

    model = resnet18()
    init_state = copy.deepcopy(model.state_dict())
    g = torch.Generator().manual_seed(SEED + 1000)
    x = torch.randn([BATCH, 3, 224, 224], generator=g, dtype=torch.float32)
    y = torch.randint(0, CLASSES, [BATCH], generator=g, dtype=torch.int64)

    buf = io.BytesIO()
    # Export a copy: the tracing forward runs in training mode and would update the
    # BatchNorm running statistics of `model`.
    torch.onnx.export(copy.deepcopy(model), (x,), buf, export_params=True,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      input_names=["input"], output_names=["logits"])
    m = onnx.load_model_from_string(buf.getvalue())
    # The initializers must hold the INITIAL state (the traced forward moved the running
    # statistics); and every parameter must be an initializer named after it, which
    # train_peer.py relies on.
    names = {i.name for i in m.graph.initializer}
    missing = [k for k, _ in model.named_parameters() if k not in names]
    if missing:
        sys.exit("parameters not exported as named initializers: %s" % missing[:5])
    for init in m.graph.initializer:
        if init.name in init_state:
            init.CopyFrom(numpy_helper.from_array(
                init_state[init.name].detach().cpu().numpy(), init.name))
    onnx.checker.check_model(m)
    onnx.save_model(m, os.path.join(out, "model.onnx"))
    save_tensor(os.path.join(out, "input_0.pb"), x.numpy(), "input")
    save_tensor(os.path.join(out, "labels.pb"), y.numpy(), "labels")
    print("wrote %s (%.1f MB)" % (out, os.path.getsize(os.path.join(out, "model.onnx")) / 1e6),
          file=sys.stderr)


if __name__ == "__main__":
    main()
