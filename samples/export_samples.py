#!/usr/bin/python3
"""Export the onnx2soap sample models to ONNX.

Run with Debian's Python (PyTorch 1.13, torchvision 0.14, onnx 1.12):

    /usr/bin/python3 samples/export_samples.py [--out samples] [--only NAME...]
                                               [--with-weights NAME...]

Every model is built after torch.manual_seed(0) and exported in TRAINING mode
(BatchNormalization and Dropout kept, no constant folding) at opset 17, with the
batch dimension of every input and output symbolic and named "batch".

Models 1-8 (the large ones) are saved with their weights as ONNX external data
(NAME.onnx + NAME.onnx.data); the .onnx.data file is then deleted unless
--with-weights NAME (or --with-weights all) was given, so only the small
graph-only NAME.onnx remains.  tiny_mlp and tiny_cnn keep their weights inline.

The script also writes expected.json (trainable-parameter counts, input and
output signatures) and checks that the ONNX initializers hold every trainable
parameter exactly once.
"""

import argparse
import collections
import io
import json
import math
import os
import re
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
import onnx
from onnx import TensorProto

OPSET = 17
BATCH = "batch"

# --------------------------------------------------------------------------
# Recurrent models (FlexFlow MLSys 2019, section 8)
# --------------------------------------------------------------------------

RNN_SEQ = 40


class RNNTC(nn.Module):
    """Text classifier: Embedding -> 4-layer LSTM (1024) -> Linear on last step."""

    def __init__(self, vocab=10000, embed=1024, hidden=1024, layers=4, classes=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, tokens):                 # [batch, 40] int64
        x = self.embed(tokens)                 # [batch, 40, 1024]
        y, _ = self.lstm(x)                    # [batch, 40, 1024]
        last = y[:, -1, :]                     # [batch, 1024]
        return self.fc(last)                   # [batch, classes]


class RNNLM(nn.Module):
    """Language model: Embedding -> 2-layer LSTM (2048) -> Linear to vocab."""

    def __init__(self, vocab=10000, embed=2048, hidden=2048, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, tokens):                 # [batch, 40] int64
        x = self.embed(tokens)
        y, _ = self.lstm(x)                    # [batch, 40, 2048]
        return self.fc(y)                      # [batch, 40, vocab]


class NMT(nn.Module):
    """Seq2seq with Luong (dot-product, "global") attention, teacher forcing.

    encoder: Embedding(src) -> 2-layer LSTM(1024) over 40 source steps
    decoder: Embedding(tgt) -> 2-layer LSTM(1024) over 40 target steps,
             initial state = final encoder state
    attention: scores = dec @ enc^T, softmax over source steps,
               context = attn @ enc, h~ = tanh(W_c [context; dec]),
               logits = W_out h~
    No input feeding (it would need a per-step loop), so the graph has no
    Loop/Scan/If.
    """

    def __init__(self, src_vocab=32000, tgt_vocab=32000, embed=1024, hidden=1024,
                 layers=2):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, embed)
        self.tgt_embed = nn.Embedding(tgt_vocab, embed)
        self.encoder = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.decoder = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.attn_combine = nn.Linear(2 * hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, tgt_vocab)

    def forward(self, src_tokens, tgt_tokens):            # [batch, 40] each
        enc, (h, c) = self.encoder(self.src_embed(src_tokens))   # [b, 40, 1024]
        dec, _ = self.decoder(self.tgt_embed(tgt_tokens), (h, c))  # [b, 40, 1024]
        scores = torch.matmul(dec, enc.transpose(1, 2))   # [b, 40tgt, 40src]
        attn = torch.softmax(scores, dim=-1)
        context = torch.matmul(attn, enc)                 # [b, 40, 1024]
        h_tilde = torch.tanh(self.attn_combine(torch.cat([context, dec], dim=-1)))
        return self.out(h_tilde)                          # [b, 40, tgt_vocab]


# --------------------------------------------------------------------------
# Transformers
# --------------------------------------------------------------------------


class SelfAttention(nn.Module):
    """Multi-head self-attention written with Linear/Reshape/Transpose/MatMul/Softmax.

    Shapes use Python ints (-1 for the batch) so the exported Reshape targets are
    constants rather than Shape/Gather/Concat subgraphs.
    """

    def __init__(self, seq, hidden, heads, causal):
        super().__init__()
        self.seq, self.hidden, self.heads = seq, hidden, heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)
        self.causal = causal

    def split(self, x):                        # [b, T, H*D] -> [b, H, T, D]
        return x.reshape(-1, self.seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, future_mask=None):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if self.causal:
            scores = scores.masked_fill(future_mask, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(p, v)                           # [b, H, T, D]
        ctx = ctx.transpose(1, 2).reshape(-1, self.seq, self.hidden)
        return self.o(ctx)


class FeedForward(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()                   # exact (erf) GELU
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class BertLayer(nn.Module):
    """Post-LN block: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, seq, hidden, heads, ffn, dropout):
        super().__init__()
        self.attn = SelfAttention(seq, hidden, heads, causal=False)
        self.drop1 = nn.Dropout(dropout)
        self.ln1 = nn.LayerNorm(hidden)
        self.ffn = FeedForward(hidden, ffn)
        self.drop2 = nn.Dropout(dropout)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x):
        x = self.ln1(x + self.drop1(self.attn(x)))
        return self.ln2(x + self.drop2(self.ffn(x)))


class BertEncoder(nn.Module):
    def __init__(self, vocab=8000, seq=128, hidden=256, heads=4, ffn=1024, layers=4,
                 classes=2, dropout=0.1):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, hidden)
        # Learned absolute positions, added directly (sequence length is fixed),
        # so no Range/Gather for position ids appears in the graph.
        self.pos_embed = nn.Parameter(torch.empty(1, seq, hidden).normal_(std=0.02))
        self.ln = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            [BertLayer(seq, hidden, heads, ffn, dropout) for _ in range(layers)])
        self.pool = nn.Linear(hidden, hidden)
        self.cls = nn.Linear(hidden, classes)

    def forward(self, tokens):                 # [batch, 128] int64
        x = self.drop(self.ln(self.tok_embed(tokens) + self.pos_embed))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pool(x[:, 0, :]))   # [CLS] token
        return self.cls(pooled)                # [batch, classes]


class GPTBlock(nn.Module):
    """Pre-LN block: x = x + Attn(LN(x)); x = x + FFN(LN(x))."""

    def __init__(self, seq, hidden, heads, ffn, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = SelfAttention(seq, hidden, heads, causal=True)
        self.drop1 = nn.Dropout(dropout)
        self.ln2 = nn.LayerNorm(hidden)
        self.ffn = FeedForward(hidden, ffn)
        self.drop2 = nn.Dropout(dropout)

    def forward(self, x, future_mask):
        x = x + self.drop1(self.attn(self.ln1(x), future_mask))
        return x + self.drop2(self.ffn(self.ln2(x)))


class GPTDecoder(nn.Module):
    def __init__(self, vocab=8000, seq=128, hidden=256, heads=4, ffn=1024, layers=4,
                 dropout=0.1):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, hidden)
        self.pos_embed = nn.Parameter(torch.empty(1, seq, hidden).normal_(std=0.02))
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [GPTBlock(seq, hidden, heads, ffn, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)   # NOT tied
        # Causal mask: True where attention is NOT allowed (strict upper
        # triangle).  A plain tensor attribute, not a registered buffer, so the
        # tracer records it as one bool Constant node (16 KiB, inline in the
        # graph-only file) shared by all blocks, instead of an initializer that
        # would be moved to the external data file with the weights.
        self.future_mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)

    def forward(self, tokens):                 # [batch, 128] int64
        x = self.drop(self.tok_embed(tokens) + self.pos_embed)
        for block in self.blocks:
            x = block(x, self.future_mask)
        return self.lm_head(self.ln_f(x))      # [batch, 128, vocab]


# --------------------------------------------------------------------------
# Tiny demo models (weights inline)
# --------------------------------------------------------------------------


def tiny_mlp():
    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, 10))


def tiny_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, 10))


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------

Spec = collections.namedtuple("Spec", "build inputs outputs external")
# inputs: list of (name, shape-without-batch, torch dtype)

MODELS = collections.OrderedDict([
    ("alexnet", Spec(lambda: torchvision.models.alexnet(num_classes=1000),
                     [("input", [3, 224, 224], torch.float32)], ["logits"], True)),
    ("inception_v3", Spec(lambda: torchvision.models.inception_v3(
                              weights=None, aux_logits=False, init_weights=True),
                          [("input", [3, 299, 299], torch.float32)], ["logits"], True)),
    ("resnet101", Spec(lambda: torchvision.models.resnet101(weights=None),
                       [("input", [3, 224, 224], torch.float32)], ["logits"], True)),
    ("rnntc", Spec(RNNTC, [("tokens", [RNN_SEQ], torch.int64)], ["logits"], True)),
    ("rnnlm", Spec(RNNLM, [("tokens", [RNN_SEQ], torch.int64)], ["logits"], True)),
    ("nmt", Spec(NMT, [("src_tokens", [RNN_SEQ], torch.int64),
                       ("tgt_tokens", [RNN_SEQ], torch.int64)], ["logits"], True)),
    ("bert_encoder", Spec(BertEncoder, [("tokens", [128], torch.int64)],
                          ["logits"], True)),
    ("gpt_decoder", Spec(GPTDecoder, [("tokens", [128], torch.int64)],
                         ["logits"], True)),
    ("tiny_mlp", Spec(tiny_mlp, [("input", [64], torch.float32)], ["logits"], False)),
    ("tiny_cnn", Spec(tiny_cnn, [("input", [3, 16, 16], torch.float32)],
                      ["logits"], False)),
])

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE,
               TensorProto.BFLOAT16}
DTYPE_NAMES = {TensorProto.FLOAT: "float32", TensorProto.INT64: "int64",
               TensorProto.INT32: "int32", TensorProto.BOOL: "bool",
               TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64"}


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def value_info_json(vi):
    t = vi.type.tensor_type
    shape = []
    for d in t.shape.dim:
        shape.append(d.dim_param if d.HasField("dim_param") else d.dim_value)
    return {"name": vi.name, "shape": shape,
            "dtype": DTYPE_NAMES.get(t.elem_type, str(t.elem_type))}


def onnx_trainable_count(model):
    """Sum of numel over float initializers that are not BatchNorm running stats."""
    bn_stats = set()
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            bn_stats.update(node.input[3:5])
    total, names = 0, []
    for init in model.graph.initializer:
        if init.data_type in FLOAT_TYPES and init.name not in bn_stats:
            total += numel(init.dims)
            names.append(init.name)
    return total, names


def constant_node_bytes(model):
    total = 0
    for node in model.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    t = a.t
                    total += len(t.raw_data) or numel(t.dims) * 4
    return total


def export_one(name, spec, out_dir, with_weights):
    torch.manual_seed(0)
    model = spec.build()
    model.train()
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)

    torch.manual_seed(0)
    example = []
    for _, shape, dtype in spec.inputs:
        full = [2] + shape
        if dtype == torch.int64:
            example.append(torch.randint(0, 100, full, dtype=torch.int64))
        else:
            example.append(torch.randn(full, dtype=dtype))
    input_names = [i[0] for i in spec.inputs]
    dynamic_axes = {n: {0: BATCH} for n in input_names + spec.outputs}

    buf = io.BytesIO()
    torch.onnx.export(
        model, tuple(example), buf,
        export_params=True,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        opset_version=OPSET,
        input_names=input_names,
        output_names=spec.outputs,
        dynamic_axes=dynamic_axes)
    m = onnx.load_model_from_string(buf.getvalue())
    onnx.checker.check_model(m)
    m = onnx.shape_inference.infer_shapes(m)   # fills output shapes where missing
    onnx.checker.check_model(m)

    onnx_params, _ = onnx_trainable_count(m)
    const_bytes = constant_node_bytes(m)

    path = os.path.join(out_dir, name + ".onnx")
    data_name = name + ".onnx.data"
    data_path = os.path.join(out_dir, data_name)
    if os.path.exists(data_path):
        os.remove(data_path)
    if spec.external:
        onnx.save_model(m, path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_name,
                        size_threshold=0)
        if not with_weights:
            os.remove(data_path)
    else:
        onnx.save_model(m, path)

    ops = collections.Counter(n.op_type for n in m.graph.node)
    entry = {
        "file": name + ".onnx",
        "parameters": params,
        "inputs": [value_info_json(v) for v in m.graph.input
                   if v.name in input_names],
        "outputs": [value_info_json(v) for v in m.graph.output],
        "torch_version": torch.__version__,
        "opset": OPSET,
    }
    info = {
        "size": os.path.getsize(path),
        "data_size": os.path.getsize(data_path) if os.path.exists(data_path) else 0,
        "params": params, "onnx_params": onnx_params, "nodes": len(m.graph.node),
        "ops": ops, "const_bytes": const_bytes,
    }
    return entry, info


def main():
    # torch.onnx is chatty (TracerWarning, num_batches_tracked mutation removed,
    # LSTM batch-size note); none of it matters for these graphs.
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=list(MODELS))
    ap.add_argument("--with-weights", nargs="+", metavar="NAME", default=[],
                    help="keep NAME.onnx.data (external weights) for these models "
                         "('all' for every model)")
    args = ap.parse_args()
    for n in args.with_weights:
        if n != "all" and n not in MODELS:
            ap.error("unknown model for --with-weights: %s" % n)

    os.makedirs(args.out, exist_ok=True)
    names = args.only or list(MODELS)
    exp_path = os.path.join(args.out, "expected.json")
    expected = {}
    if os.path.exists(exp_path):
        with open(exp_path) as f:
            expected = json.load(f)

    ok = True
    all_ops = collections.Counter()
    rows = []
    for name in names:
        keep = "all" in args.with_weights or name in args.with_weights
        print("exporting %s ..." % name, file=sys.stderr, flush=True)
        entry, info = export_one(name, MODELS[name], args.out, keep)
        expected[name] = entry
        all_ops.update(info["ops"])
        match = info["params"] == info["onnx_params"]
        ok &= match
        rows.append((name, info, match))
        print("  parameters: torch %d, onnx initializers %d -> %s"
              % (info["params"], info["onnx_params"], "OK" if match else "MISMATCH"),
              file=sys.stderr, flush=True)

    ordered = collections.OrderedDict((k, expected[k]) for k in MODELS if k in expected)
    text = json.dumps(ordered, indent=2)
    # keep shape lists on one line: "shape": ["batch", 3, 224, 224]
    text = re.sub(r'\[\s*((?:"batch"|\d+)(?:,\s*(?:"batch"|\d+))*)\s*\]',
                  lambda mo: "[" + re.sub(r",\s*", ", ", mo.group(1)) + "]", text)
    with open(exp_path, "w") as f:
        f.write(text + "\n")

    print()
    print("%-13s %10s %12s %12s %6s %9s  %s" % ("model", "onnx bytes", "data bytes",
                                               "parameters", "nodes", "const B",
                                               "op types"))
    for name, info, match in rows:
        ops = ", ".join("%s:%d" % kv for kv in sorted(info["ops"].items()))
        print("%-13s %10d %12d %12d %6d %9d  %s%s" % (
            name, info["size"], info["data_size"], info["params"], info["nodes"],
            info["const_bytes"], ops, "" if match else "  [PARAM MISMATCH]"))
    print()
    print("op types across exported models:",
          ", ".join("%s:%d" % kv for kv in sorted(all_ops.items())))
    if not ok:
        print("ERROR: parameter count mismatch", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
