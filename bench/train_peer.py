#!/usr/bin/python3
"""The PyTorch peer of the training benchmark (docs/benchmarks.md, "Training step").

Run with Debian's Python (PyTorch 1.13 is visible only there):

    /usr/bin/python3 bench/train_peer.py resnet18|transformer DIR [--steps N] [--threads 2]
                                          [--lr 0.01] [--json] [--device cpu|cuda]
                                          [--init onnx|random]

DIR holds model.onnx, input_0.pb and labels.pb (bench/train_models.py, or
tests/fixtures/transformer).  The module is rebuilt in PyTorch (torchvision resnet18, or
make_fixtures.py's TinyTransformer) and its initial state is read from the ONNX
initializers, which are named after the state_dict keys: both sides start from the same
weights.  Then it runs 2 warm-up steps and N timed steps of

    zero_grad; loss = CE(model(x).reshape(-1, C), y.reshape(-1)); backward; step

with torch.optim.SGD(lr), in training mode (BatchNorm with batch statistics), and prints
the median step time and the losses of all 2 + N steps (loss i: step i's forward pass,
before its update, as `onnx2soap train` prints it).  --device cuda runs it on GPU 0
(fp32, TF32 off, synchronized around each step: tests/gpu/run_bundle.sh --bench);
--init random keeps PyTorch's own initial weights (for a model whose ONNX weights
were not carried).
"""

import argparse
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 2


def build(name):
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=1000)
    if name == "transformer":
        sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
        from make_fixtures import TinyTransformer
        return TinyTransformer()
    raise SystemExit("unknown model %s (resnet18 or transformer)" % name)


def load_initial_state(model, path):
    """Copies every ONNX initializer named like a state_dict entry into the model; every
    parameter must be covered."""
    m = onnx.load(path)
    state = model.state_dict()
    loaded = set()
    with torch.no_grad():
        for init in m.graph.initializer:
            if init.name in state:
                value = torch.from_numpy(numpy_helper.to_array(init).copy())
                if value.shape != state[init.name].shape:
                    raise SystemExit("%s: shape %s in ONNX, %s in PyTorch" % (
                        init.name, tuple(value.shape), tuple(state[init.name].shape)))
                state[init.name].copy_(value)
                loaded.add(init.name)
    missing = [k for k, _ in model.named_parameters() if k not in loaded]
    if missing:
        raise SystemExit("parameters without an ONNX initializer: %s" % missing[:5])


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return torch.from_numpy(numpy_helper.to_array(t).copy())


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=["resnet18", "transformer"])
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=5, help="timed steps after 2 warm-up steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--init", choices=["onnx", "random"], default="onnx")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build(args.model)
    if args.init == "onnx":
        load_initial_state(model, os.path.join(args.dir, "model.onnx"))
    dev = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    model.to(dev)
    model.train()
    x = read_tensor(os.path.join(args.dir, "input_0.pb")).to(dev)
    y = read_tensor(os.path.join(args.dir, "labels.pb")).to(dev)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)

    losses, times = [], []
    for _ in range(WARMUP + args.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        sync()
        t1 = time.perf_counter()
        losses.append(loss.item())
        times.append(t1 - t0)
    timed = times[WARMUP:]
    result = {"model": args.model, "batch": int(x.shape[0]), "threads": args.threads,
              "device": args.device,
              "torch_version": torch.__version__, "median_step_s": statistics.median(timed),
              "min_step_s": min(timed), "step_s": times, "losses": losses}
    if args.json:
        print(json.dumps(result))
    else:
        print("median step %.6f s (min %.6f s, %d timed steps after %d warm-up)" % (
            result["median_step_s"], result["min_step_s"], len(timed), WARMUP))
        for i, (l, t) in enumerate(zip(losses, times)):
            print("step %d loss %.9g time %.6f" % (i, l, t))


if __name__ == "__main__":
    main()
