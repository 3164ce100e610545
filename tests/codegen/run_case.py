#!/usr/bin/env python3
"""End-to-end tests of `onnx2soap compile`: one ctest per row of cases.json.

Each case compiles a training fixture (tests/fixtures/<name>) into a project,
builds it against the runtime the main build already compiled
(ONNX2SOAP_RUNTIME_EXPORT), runs it under mpirun and checks what it printed:
losses against PyTorch's (losses.json) and against a 1-rank run of the same
model, and every rank's bytes sent per step against the planner's figure.
Other kinds check reproducible output, checkpoint/resume, --save-onnx, a rank
that dies, and compile-time errors. docs/generated-program.md ("How it is
tested") describes the cases. Standard library only.

usage: run_case.py --case NAME --onnx2soap BIN --runtime-export FILE
                   --mpirun MPIRUN --work DIR [--list]
"""
import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(SOURCE_DIR, "tests", "fixtures")
CUDA_COMPILER = "/usr/local/cuda/bin/nvcc"

# compile flags of the optimizer settings losses.json names.
def optimizer_flags(fixture, optimizer):
    """compile's flags for the fixture's PyTorch run `optimizer` (losses.json
    records the learning rate, momentum and weight decay of each)."""
    with open(fixture_path(fixture, "losses.json")) as f:
        run = json.load(f)[optimizer]
    kind = {"SGD": "sgd", "Adam": "adam", "AdamW": "adamw"}.get(
        run["optimizer"])
    if kind is None:
        raise Failure("%s: no compile flags for PyTorch's %s" %
                      (optimizer, run["optimizer"]))
    if kind != "sgd" and (run["betas"] != [0.9, 0.999] or run["eps"] != 1e-8
                          or run.get("amsgrad")):
        # compile has no flags for these: the program uses PyTorch's defaults.
        raise Failure("%s: betas %s, eps %g differ from compile's" %
                      (optimizer, run["betas"], run["eps"]))
    flags = ["--optimizer", kind, "--lr", repr(run["lr"])]
    if run.get("momentum"):
        flags += ["--momentum", repr(run["momentum"])]
    # Always given: adamw's default (0.01) is not 0.
    flags += ["--weight-decay", repr(run.get("weight_decay", 0.0))]
    return flags
LOSS_RTOL = 1e-4
STEPS = 5


class Failure(Exception):
    """A check that did not hold; the message says which and with what."""


def log(*parts):
    print(*parts, flush=True)


def run(cmd, timeout=600, check=True, env=None, cwd=None):
    """Runs cmd, echoing it; returns (rc, stdout, stderr)."""
    log("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        raise Failure("exit %d from %s\nstdout:\n%s\nstderr:\n%s" %
                      (proc.returncode, " ".join(cmd), proc.stdout,
                       proc.stderr))
    return proc.returncode, proc.stdout, proc.stderr


def mpi_env():
    env = dict(os.environ)
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # Ranks share the 2-core machine: no OpenMP spinning.
    env["OMP_NUM_THREADS"] = "1"
    return env


def fixture_info(name):
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        manifest = json.load(f)
    for entry in manifest["fixtures"]:
        if entry["name"] == name:
            return entry
    raise Failure("fixture %s is not in tests/fixtures/manifest.json" % name)


def fixture_path(name, file):
    return os.path.join(FIXTURES, name, file)


def torch_losses(fixture, optimizer):
    with open(fixture_path(fixture, "losses.json")) as f:
        return json.load(f)[optimizer]["losses"]


class Env:
    """Paths given on the command line, and the case's own folder."""

    def __init__(self, args, case):
        self.onnx2soap = args.onnx2soap
        self.runtime_export = args.runtime_export
        self.mpirun = args.mpirun
        self.work = args.work
        self.case = case
        self.dir = os.path.join(args.work, case["name"])

    def path(self, *parts):
        return os.path.join(self.dir, *parts)


#===-- Strategies ------------------------------------------------------===#

BUILTIN_STRATEGIES = ("data-parallel", "model-parallel", "expert")


def strategy_file(env, fixture, ranks, out, flags):
    """Runs `onnx2soap <flags> ... -o out` for the fixture on cpu:<ranks>
    (flags: the subcommand first) and returns the strategy file it wrote."""
    info = fixture_info(fixture)
    run([env.onnx2soap, flags[0], fixture_path(fixture, "model.onnx"),
         "--batch", str(info["inputs"][0]["shape"][0]), "--cluster",
         "cpu:%d" % ranks, "-o", out] + list(flags[1:]))
    with open(out) as f:
        return json.load(f)


def base_strategy(env, fixture, ranks, out, extra=()):
    """A strategy file whose op keys the hand-made strategies rewrite (a
    one-step search: any valid file)."""
    return strategy_file(env, fixture, ranks, out,
                         ["search", "--iterations", "1"] + list(extra))


def builtin_strategy(env, fixture, ranks, name, out, extra=()):
    """The built-in strategy `name`, as the file `simulate -o` writes."""
    return strategy_file(env, fixture, ranks, out,
                         ["simulate", "--strategy", name] + list(extra))


def write_hand_made(env, fixture, ranks, spec, out):
    """Writes spec ({"base": "single" | "batch" | a built-in strategy,
    "ops": {name: fields}}) as a strategy file. single: every op whole on
    rank 0; batch: every op cut in <ranks> parts along its dim 0 (the batch
    in most fixtures), a scalar (the loss) by its contraction; data-parallel,
    model-parallel, expert: that strategy as `simulate -o` writes it. "ops"
    then overrides fields per op, "ops_matching" ({regex: fields}) those of
    every op whose name matches; "unroll": true plans the model with
    --unroll-rnn."""
    if spec["base"] in BUILTIN_STRATEGIES:
        strategy = builtin_strategy(env, fixture, ranks, spec["base"], out,
                                    unroll_flags(spec))
    elif spec["base"] in ("single", "batch"):
        strategy = base_strategy(env, fixture, ranks, out, unroll_flags(spec))
        for config in strategy["ops"].values():
            rank = len(config["degrees"])
            config.update(degrees=[1] * rank, reduction=1, first_device=0,
                          device_stride=1)
            if spec["base"] == "batch":
                if rank:
                    config["degrees"][0] = ranks
                else:
                    config["reduction"] = ranks
    else:
        raise Failure("unknown strategy base %r" % spec["base"])
    for pattern, fields in spec.get("ops_matching", {}).items():
        matched = [name for name in strategy["ops"] if re.search(pattern, name)]
        if not matched:
            raise Failure("strategy pattern %r matches no op" % pattern)
        for name in matched:
            strategy["ops"][name].update(fields)
    for name, fields in spec.get("ops", {}).items():
        if name not in strategy["ops"]:
            raise Failure("strategy override names op %r, which the model "
                          "does not have (ops: %s)" %
                          (name, ", ".join(sorted(strategy["ops"]))))
        strategy["ops"][name].update(fields)
    with open(out, "w") as f:
        json.dump(strategy, f, indent=2, sort_keys=True)
        f.write("\n")
    return out


def strategy_flags(env, fixture, ranks, strategy, file):
    """compile flags for a case's strategy: a built-in name, "search", or a
    hand-made spec (written to file)."""
    if strategy == "search":
        return ["--iterations", "50", "--seed", "1"]
    if isinstance(strategy, str):
        return ["--strategy", strategy]
    return unroll_flags(strategy) + [
        "--strategy", write_hand_made(env, fixture, ranks, strategy, file)]


def unroll_flags(spec):
    return ["--unroll-rnn"] if spec.get("unroll") else []


#===-- Compile, build, run ------------------------------------------------===#

def compile_project(env, fixture, ranks, strategy, optimizer, out,
                    strategy_file=None, cluster=None, extra=()):
    info = fixture_info(fixture)
    if strategy_file is None:
        strategy_file = out + ".strategy.json"
    flags = strategy_flags(env, fixture, ranks, strategy, strategy_file)
    cmd = [env.onnx2soap, "compile", fixture_path(fixture, "model.onnx"),
           "--batch", str(info["inputs"][0]["shape"][0]),
           "--cluster", cluster or "cpu:%d" % ranks] + list(extra) + \
        flags + optimizer_flags(fixture, optimizer) + ["-o", out]
    run(cmd)


def build_project(env, project, jobs=1, cuda=False, timeout=600):
    build = os.path.join(project, "build")
    cmd = ["cmake", "-S", project, "-B", build, "-G", "Ninja"]
    if cuda:
        cmd.append("-DCMAKE_CUDA_COMPILER=" + CUDA_COMPILER)
    # The runtime (CUDA backend and NCCL included when the onnx2soap build
    # has them) is the one the onnx2soap build compiled from the same
    # sources; only main.cpp and plan.cpp are compiled here.
    cmd.append("-DONNX2SOAP_RUNTIME_EXPORT=" + env.runtime_export)
    run(cmd, timeout=timeout)
    run(["ninja", "-C", build, "-j%d" % jobs], timeout=timeout)
    return os.path.join(build, "train")


def fixture_data_flags(fixture):
    """--inputs for each of the fixture's inputs, in order, and --labels."""
    flags = []
    for i in range(len(fixture_info(fixture)["inputs"])):
        flags += ["--inputs", fixture_path(fixture, "input_%d.pb" % i)]
    return flags + ["--labels", fixture_path(fixture, "labels.pb")]


def train(env, program, fixture, ranks, steps=STEPS, extra=(), timeout=300,
          data=None):
    """Runs the program on the fixture's batch (or the dataset folder data);
    returns ({step: loss text}, [(sent, planner)], out)."""
    cmd = [env.mpirun, "--oversubscribe", "-np", str(ranks), program] + \
        (["--data", data] if data else fixture_data_flags(fixture)) + \
        ["--steps", str(steps), "--threads", "1"] + list(extra)
    _, out, err = run(cmd, timeout=timeout, env=mpi_env())
    log(out.rstrip())
    losses = {}
    sent = {}
    for line in out.splitlines():
        m = re.match(r"step (\d+) loss (\S+) time \S+ s$", line)
        if m:
            losses[int(m.group(1))] = m.group(2)
        m = re.match(r"rank (\d+) sent (\S+) bytes per step "
                     r"\(planner: (\S+)\)$", line)
        if m:
            sent[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return losses, [sent.get(r) for r in range(ranks)], out


def check_losses(losses, expected, what, rtol=LOSS_RTOL, steps=STEPS):
    errors = []
    for step in range(1, steps + 1):
        if step not in losses:
            errors.append("step %d: no loss printed" % step)
            continue
        got, want = float(losses[step]), expected[step - 1]
        if not abs(got - want) <= rtol * abs(want):
            errors.append("step %d: loss %s, %s %.9g (rel diff %.3g)" %
                          (step, losses[step], what, want,
                           abs(got - want) / abs(want)))
    return errors


def check_bytes(sent):
    errors = []
    for rank, figures in enumerate(sent):
        if figures is None:
            errors.append("rank %d: no bytes line" % rank)
        elif figures[0] != figures[1]:
            errors.append("rank %d sent %.17g bytes per step, planner %.17g" %
                          (rank, figures[0], figures[1]))
    return errors


def check_allocated(out, project, ranks):
    """Each rank's device memory as the program allocated it, against the
    plan's figure and compile's manifest (allocated_bytes)."""
    with open(os.path.join(project, "manifest.json")) as f:
        manifest = json.load(f)
    promised = manifest["allocated_bytes"]
    held = {}
    for line in out.splitlines():
        m = re.match(r"rank (\d+) allocated (\S+) bytes \(plan: (\S+)\)$",
                     line)
        if m:
            held[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    errors = []
    if len(promised) != ranks:
        errors.append("manifest.json: allocated_bytes has %d ranks, not %d" %
                      (len(promised), ranks))
    for rank in range(ranks):
        if rank not in held:
            errors.append("rank %d: no allocated line" % rank)
            continue
        got, plan = held[rank]
        want = promised[rank] if rank < len(promised) else None
        if not (got == plan == want):
            errors.append("rank %d allocated %.17g bytes, plan %.17g, "
                          "manifest %s" % (rank, got, plan, want))
    log("allocated per rank: %s (planner's peak: %s)" %
        (promised, manifest.get("predicted_peak_memory")))
    return errors


@contextlib.contextmanager
def locked(path):
    with open(path, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_key(env):
    """Identifies the onnx2soap binary and runtime libraries: a cached
    reference run is redone when either is rebuilt."""
    files = [env.onnx2soap, env.runtime_export]
    libs = os.path.join(os.path.dirname(env.runtime_export), "runtime_lib")
    if os.path.isdir(libs):
        files += [os.path.join(libs, n) for n in sorted(os.listdir(libs))
                  if n.endswith(".a")]
    stats = [(f, os.stat(f).st_mtime_ns, os.stat(f).st_size) for f in files]
    return hashlib.sha256(repr(stats).encode()).hexdigest()


def one_rank_losses(env, fixture, optimizer):
    """The 1-rank run's losses, computed once per fixture and optimizer (and
    build) and shared by the cases (ctest -j runs them concurrently: a file
    lock)."""
    ref = os.path.join(env.work, "ref-%s-%s" % (fixture, optimizer))
    result = ref + ".json"
    key = build_key(env)
    os.makedirs(env.work, exist_ok=True)
    with locked(ref + ".lock"):
        if os.path.exists(result):
            with open(result) as f:
                cached = json.load(f)
            if cached.get("key") == key:
                return {int(k): v for k, v in cached["losses"].items()}
        shutil.rmtree(ref, ignore_errors=True)
        compile_project(env, fixture, 1, "data-parallel", optimizer, ref)
        program = build_project(env, ref)
        losses, _, _ = train(env, program, fixture, 1)
        errors = check_losses(losses, torch_losses(fixture, optimizer),
                              "PyTorch")
        if errors:
            raise Failure("the 1-rank reference run of %s (%s) does not "
                          "match PyTorch:\n  %s" %
                          (fixture, optimizer, "\n  ".join(errors)))
        with open(result + ".tmp", "w") as f:
            json.dump({"key": key, "losses": losses}, f)
        os.replace(result + ".tmp", result)
        return losses


#===-- Case kinds ------------------------------------------------------===#

def case_train(env, case):
    """Compile, build, run 5 steps: losses vs PyTorch and the 1-rank run,
    bytes vs the planner."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    project = env.path("project")
    extra = ["--gradient-bucket", case["gradient_bucket"]] \
        if "gradient_bucket" in case else []
    compile_project(env, fixture, ranks, case["strategy"], opt, project,
                    extra=extra)
    with open(os.path.join(project, "strategy.json")) as f:
        plan = json.load(f)
    ops = plan["ops"]
    log("gradient bucket: %s bytes" % plan.get("gradient_bucket"))
    log("strategy used:\n" + "\n".join(
        "  %s: %s" % (name, json.dumps(config, sort_keys=True))
        for name, config in sorted(ops.items())))
    program = build_project(env, project)
    losses, sent, out = train(env, program, fixture, ranks)
    errors = check_losses(losses, torch_losses(fixture, opt), "PyTorch")
    one_rank = one_rank_losses(env, fixture, opt)
    errors += check_losses(losses, [float(one_rank[step]) for step in
                                    sorted(one_rank)], "1 rank")
    errors += check_bytes(sent)
    errors += check_allocated(out, project, ranks)
    if errors:
        raise Failure("\n".join(errors))


def tree(root):
    """{relative path: sha256} of every file under root but build/."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if not (dirpath == root and d == "build"))
        for name in filenames:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                files[os.path.relpath(full, root)] = \
                    hashlib.sha256(f.read()).hexdigest()
    return files


def compare_trees(a, b):
    ta, tb = tree(a), tree(b)
    errors = ["only in %s: %s" % (a, p) for p in sorted(set(ta) - set(tb))]
    errors += ["only in %s: %s" % (b, p) for p in sorted(set(tb) - set(ta))]
    errors += ["differs: %s" % p for p in sorted(set(ta) & set(tb))
               if ta[p] != tb[p]]
    return len(ta), errors


def case_repro(env, case):
    """The same model and strategy compiled into two differently named
    folders gives byte-identical trees."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    first = env.path("a", "project")
    second = env.path("b", "other-name")
    os.makedirs(os.path.dirname(first))
    os.makedirs(os.path.dirname(second))
    # One strategy file for both compiles (a hand-made one is written once).
    strategy_file = env.path("strategy.json")
    for out in (first, second):
        compile_project(env, fixture, ranks, case["strategy"], opt, out,
                        strategy_file=strategy_file)
    count, errors = compare_trees(first, second)
    log("compared %d files" % count)
    if errors:
        raise Failure("\n".join(errors))


def case_checkpoint(env, case):
    """3 steps with --checkpoint, then --resume to 5: steps 4 and 5 print
    exactly what an uninterrupted run prints."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    project = env.path("project")
    compile_project(env, fixture, ranks, case["strategy"], opt, project)
    program = build_project(env, project)
    whole, _, _ = train(env, program, fixture, ranks)
    ckpt = env.path("checkpoint")
    first, _, _ = train(env, program, fixture, ranks, steps=3,
                        extra=["--checkpoint", ckpt])
    rest, sent, out = train(env, program, fixture, ranks, steps=5,
                            extra=["--checkpoint", ckpt, "--resume"])
    errors = []
    if "resumed from step 3" not in out:
        errors.append("no 'resumed from step 3' line")
    for step in (1, 2, 3):
        if first.get(step) != whole.get(step):
            errors.append("step %d: %s before the checkpoint, %s "
                          "uninterrupted" % (step, first.get(step),
                                             whole.get(step)))
    for step in (4, 5):
        if rest.get(step) != whole.get(step):
            errors.append("step %d: %s after resuming, %s uninterrupted" %
                          (step, rest.get(step), whole.get(step)))
    if sorted(rest) != [4, 5]:
        errors.append("the resumed run printed steps %s, not [4, 5]" %
                      sorted(rest))
    errors += check_bytes(sent)
    if errors:
        raise Failure("\n".join(errors))


#===-- Dataset folders (train --data) ------------------------------------===#

def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_varint(data, pos):
    """(value, next position) of the varint at data[pos]."""
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def read_tensor(path):
    """(dims, data_type, raw bytes) of a TensorProto file holding raw_data
    (the fixtures, written by onnx.numpy_helper)."""
    with open(path, "rb") as f:
        data = f.read()
    pos, dims, dtype, raw = 0, [], None, None
    while pos < len(data):
        key, pos = read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos)
            if number == 1:
                dims.append(value)
            elif number == 2:
                dtype = value
        elif wire == 2:
            size, pos = read_varint(data, pos)
            payload, pos = data[pos:pos + size], pos + size
            if number == 1:  # packed dims
                p = 0
                while p < len(payload):
                    value, p = read_varint(payload, p)
                    dims.append(value)
            elif number == 9:
                raw = payload
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise Failure("%s: wire type %d" % (path, wire))
    if raw is None or dtype is None:
        raise Failure("%s: no raw_data or data_type" % path)
    return dims, dtype, raw


def tensor_proto(dims, dtype, raw=None, external=None):
    """A serialized TensorProto: raw_data, or ONNX external data given as
    [(key, value)] (location, offset, length)."""
    out = bytearray()
    for d in dims:
        out += varint(1 << 3) + varint(d)
    out += varint(2 << 3) + varint(dtype)
    if raw is not None:
        out += varint(9 << 3 | 2) + varint(len(raw)) + raw
    for key, value in external or ():
        entry = (varint(1 << 3 | 2) + varint(len(key)) + key.encode() +
                 varint(2 << 3 | 2) + varint(len(value)) + value.encode())
        out += varint(13 << 3 | 2) + varint(len(entry)) + entry
    if external:
        out += varint(14 << 3) + varint(1)  # data_location = EXTERNAL
    return bytes(out)


def write_dataset(fixture, folder, rows):
    """A dataset folder whose samples are the fixture batch's rows, in the
    order given (indices may repeat): input_0.pb as external data at an
    offset in input_0.bin, labels.pb inline."""
    os.makedirs(folder, exist_ok=True)
    for name, src, external in (("input_0", "input_0.pb", True),
                                ("labels", "labels.pb", False)):
        dims, dtype, raw = read_tensor(fixture_path(fixture, src))
        row = len(raw) // dims[0]
        data = b"".join(raw[r * row:(r + 1) * row] for r in rows)
        new_dims = [len(rows)] + dims[1:]
        path = os.path.join(folder, name + ".pb")
        if external:
            pad = b"\x00" * 7
            with open(os.path.join(folder, name + ".bin"), "wb") as f:
                f.write(pad + data)
            proto = tensor_proto(new_dims, dtype, external=[
                ("location", name + ".bin"), ("offset", str(len(pad))),
                ("length", str(len(data)))])
        else:
            proto = tensor_proto(new_dims, dtype, raw=data)
        with open(path, "wb") as f:
            f.write(proto)


def case_dataset(env, case):
    """train --data DIR. A folder of three copies of the fixture batch: every
    step trains on that batch, so the losses are PyTorch's. A folder of 1.5
    batches (rows shuffled), so steps see different, wrapped batches: the
    run equals the 1-rank run of the same folder, its step 2 differs from
    the first folder's, and a resumed run goes on where the data stopped."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    batch = fixture_info(fixture)["inputs"][0]["shape"][0]
    project = env.path("project")
    compile_project(env, fixture, ranks, case["strategy"], opt, project)
    program = build_project(env, project)
    copies = env.path("copies")
    write_dataset(fixture, copies, list(range(batch)) * 3)
    errors = []
    losses, sent, _ = train(env, program, fixture, ranks, data=copies)
    errors += check_losses(losses, torch_losses(fixture, opt), "PyTorch")
    errors += check_bytes(sent)

    mixed = env.path("mixed")
    rows = list(range(batch))[::-1] + list(range(0, batch, 2))
    write_dataset(fixture, mixed, rows)
    got, _, _ = train(env, program, fixture, ranks, data=mixed)
    reference = env.path("reference")
    compile_project(env, fixture, 1, "data-parallel", opt, reference)
    one = build_project(env, reference)
    want, _, _ = train(env, one, fixture, 1, data=mixed)
    errors += check_losses(got, [float(want[s]) for s in sorted(want)],
                           "1 rank")
    if got.get(2) == losses.get(2):
        errors.append("step 2 on the 1.5-batch folder printed the loss of "
                      "the whole-batch folder (%s): the data did not move" %
                      got.get(2))
    ckpt = env.path("checkpoint")
    train(env, program, fixture, ranks, steps=3, data=mixed,
          extra=["--checkpoint", ckpt])
    rest, _, _ = train(env, program, fixture, ranks, steps=5, data=mixed,
                       extra=["--checkpoint", ckpt, "--resume"])
    for step in (4, 5):
        if rest.get(step) != got.get(step):
            errors.append("step %d: %s after resuming, %s uninterrupted" %
                          (step, rest.get(step), got.get(step)))

    # Refused, with one error line and exit 2: --data with --inputs, and a
    # folder without labels.pb.
    os.remove(os.path.join(mixed, "labels.pb"))
    for flags, part in (
            (["--data", copies, "--inputs",
              fixture_path(fixture, "input_0.pb")], "--data: takes the place"),
            (["--data", mixed], "labels.pb")):
        rc, _, err = run([env.mpirun, "-np", "1", one] + flags +
                         ["--threads", "1"], check=False, env=mpi_env())
        lines = [l for l in err.splitlines() if l.startswith("train: error")]
        log("stderr: " + err.rstrip())
        if rc == 0 or len(lines) != 1 or part not in lines[0]:
            errors.append("train %s: exit %d, stderr %r (expected one "
                          "'train: error' line naming %r)" %
                          (" ".join(flags), rc, err, part))
    if errors:
        raise Failure("\n".join(errors))


def case_save_onnx(env, case):
    """--save-onnx after 5 steps writes a model that `onnx2soap run` runs and
    whose loss under `onnx2soap train` (fresh SGD, lr 0.1) is the program's
    step-6 loss: step 6 starts from the weights after 5 updates."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    if opt != "sgd":
        raise Failure("save_onnx compares with `onnx2soap train`, which "
                      "starts without momentum: use optimizer sgd")
    project = env.path("project")
    compile_project(env, fixture, ranks, case["strategy"], opt, project)
    program = build_project(env, project)
    six, _, _ = train(env, program, fixture, ranks, steps=6)
    saved = env.path("trained.onnx")
    five, _, out = train(env, program, fixture, ranks,
                         extra=["--save-onnx", saved])
    errors = []
    if "saved " + saved not in out:
        errors.append("no 'saved %s' line" % saved)
    data = env.path("data")
    outputs = env.path("outputs")
    os.makedirs(data)
    shutil.copy(fixture_path(fixture, "input_0.pb"),
                os.path.join(data, "input_0.pb"))
    run([env.onnx2soap, "run", saved, "--data", data, "--out", outputs,
         "--threads", "1"])
    if not os.path.exists(os.path.join(outputs, "output_0.pb")):
        errors.append("onnx2soap run wrote no output_0.pb")
    _, text, _ = run([env.onnx2soap, "train", saved] +
                     fixture_data_flags(fixture) +
                     ["--steps", "1", "--optimizer", "sgd", "--lr", "0.1",
                      "--threads", "1"])
    m = re.search(r"^step 0 loss (\S+)$", text, re.M)
    if not m:
        errors.append("onnx2soap train printed no step 0 loss:\n" + text)
    elif 6 not in six:
        errors.append("the program printed no step 6")
    else:
        got, want = float(m.group(1)), float(six[6])
        log("onnx2soap train on the saved model: %s; program step 6: %s" %
            (m.group(1), six[6]))
        if not abs(got - want) <= 1e-5 * abs(want):
            errors.append("loss of the saved model %s, the program's step 6 "
                          "%s (rel diff %.3g)" %
                          (m.group(1), six[6], abs(got - want) / abs(want)))
    if errors:
        raise Failure("\n".join(errors))


def case_rank_failure(env, case):
    """One of two ranks dies or stalls: the job ends non-zero, in bounded
    time, with an error line."""
    fixture, opt = case["fixture"], case["optimizer"]
    project = env.path("project")
    compile_project(env, fixture, 2, case["strategy"], opt, project)
    program = build_project(env, project)
    data = fixture_data_flags(fixture)
    common = ["--threads", "1", "--timeout", "5"]
    mode = case["mode"]
    pid_file = env.path("rank1.pid")
    if mode == "exit-before-init":
        # Rank 1 exits 1 before MPI starts.
        cmd = ["-np", "1", program] + data + common + \
            [":", "-np", "1", "false"]
    elif mode == "error-after-init":
        # Rank 1 starts MPI, then fails to read its batch.
        cmd = ["-np", "1", program] + data + common + \
            [":", "-np", "1", program, "--inputs", env.path("missing.pb"),
             "--labels", fixture_path(fixture, "labels.pb")] + common
    elif mode == "stall":
        # Rank 1 is stopped (SIGSTOP) once step 1 is done: rank 0 must give
        # up after its 5 s timeout.
        cmd = ["-np", "1", program] + data + common + \
            ["--steps", "100000000", ":", "-np", "1", "sh", "-c",
             'echo $$ > "$0"; exec "$@"', pid_file, program] + data + \
            common + ["--steps", "100000000"]
    else:
        raise Failure("unknown rank_failure mode %r" % mode)
    cmd = [env.mpirun, "--oversubscribe"] + cmd
    log("$ " + " ".join(cmd))
    start = time.monotonic()
    limit = 30
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=mpi_env(), start_new_session=True)
    output = []
    stopped = None
    try:
        for line in proc.stdout:
            output.append(line)
            if mode == "stall" and stopped is None and \
                    line.startswith("step 1 "):
                with open(pid_file) as f:
                    stopped = int(f.read())
                os.kill(stopped, signal.SIGSTOP)
                log("stopped rank 1 (pid %d) after step 1" % stopped)
            if time.monotonic() - start > limit:
                break
        try:
            proc.wait(timeout=max(1, limit - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            pass
    finally:
        elapsed = time.monotonic() - start
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
    text = "".join(output)
    log(text.rstrip())
    log("exit %s after %.1f s" % (proc.returncode, elapsed))
    errors = []
    if elapsed > limit:
        errors.append("still running after %d s (killed)" % limit)
    elif proc.returncode == 0:
        errors.append("exit 0")
    if not re.search(case["expect"], text, re.M):
        errors.append("no line matching %r in the output" % case["expect"])
    if errors:
        raise Failure("\n".join(errors))


def snapshot(root):
    return sorted((os.path.relpath(os.path.join(d, n), root),
                   open(os.path.join(d, n), "rb").read())
                  for d, _, names in os.walk(root) for n in names)


def expect_usage_error(cmd):
    rc, out, err = run(cmd, check=False)
    errors = []
    lines = err.splitlines()
    if rc != 2:
        errors.append("exit %d, not 2" % rc)
    if len(lines) != 1 or not lines[0].startswith("onnx2soap: error: "):
        errors.append("stderr is not one 'onnx2soap: error: ' line:\n" + err)
    log("stderr: " + err.rstrip())
    return errors


def case_compile_error(env, case):
    fixture = case["fixture"]
    info = fixture_info(fixture)
    model = [fixture_path(fixture, "model.onnx"), "--batch",
             str(info["inputs"][0]["shape"][0])]
    mode = case["mode"]
    if mode == "cluster-mismatch":
        # A strategy made for cpu:2 given to compile for cpu:4.
        strategy = env.path("cpu2.json")
        base_strategy(env, fixture, 2, strategy)
        out = env.path("project")
        errors = expect_usage_error(
            [env.onnx2soap, "compile"] + model +
            ["--cluster", "cpu:4", "--strategy", strategy, "-o", out])
        if os.path.exists(out):
            errors.append("%s was created" % out)
    elif mode == "non-empty-folder":
        # -o names a folder with files but no manifest.json.
        out = env.path("taken")
        os.makedirs(os.path.join(out, "sub"))
        with open(os.path.join(out, "notes.txt"), "w") as f:
            f.write("not a generated project\n")
        with open(os.path.join(out, "sub", "data.bin"), "wb") as f:
            f.write(bytes(range(256)))
        before = snapshot(out)
        errors = expect_usage_error(
            [env.onnx2soap, "compile"] + model +
            ["--cluster", "cpu:2", "--strategy", "data-parallel", "-o", out])
        if snapshot(out) != before:
            errors.append("the folder was changed")
        leftovers = sorted(set(os.listdir(env.dir)) - {"taken"})
        if leftovers:
            errors.append("compile left %s next to the folder" % leftovers)
    else:
        raise Failure("unknown compile_error mode %r" % mode)
    if errors:
        raise Failure("\n".join(errors))


def case_program_flags(env, case):
    """The built program refuses flags out of range before MPI starts: exit
    2, one 'train: error: ' line (--threads 100000 crashed in the thread
    pool, 2^31 wrapped to a negative count, 2^64 steps read as 2^63-1,
    --timeout 0 aborted the job at its first collective, empty paths and a
    --checkpoint-every without --checkpoint did nothing silently, and so did
    training flags beside --profile-comm)."""
    fixture = case["fixture"]
    project = env.path("project")
    compile_project(env, fixture, 2, "data-parallel", "sgd", project)
    program = build_project(env, project)
    data = fixture_data_flags(fixture)
    errors = []
    for flags, expect in [
            (["--threads", "100000"], "--threads: '100000' is more than 1024"),
            (["--threads", "2147483648"],
             "--threads: '2147483648' is more than 1024"),
            (["--steps", "18446744073709551616"],
             "--steps: '18446744073709551616' is more than "
             "9223372036854775807"),
            (["--steps", "-1"],
             "--steps: expected a non-negative integer, got '-1'"),
            (["--timeout", "0"], "--timeout: must be at least 1 (second)"),
            (["--checkpoint", ""], "--checkpoint: needs a value"),
            (["--save-onnx", ""], "--save-onnx: needs a value"),
            (["--checkpoint-every", "5"],
             "--checkpoint-every: goes with --checkpoint DIR"),
            (["--profile-comm", env.path("comm.json")],
             "--profile-comm: measures communication and trains nothing; "
             "--inputs does not go with it")]:
        rc, out, err = run([program] + data + flags, check=False)
        log("%s: exit %d, stderr %s" % (" ".join(flags), rc, err.rstrip()))
        lines = err.splitlines()
        if rc != 2 or len(lines) != 1 or \
                lines[0] != "train: error: " + expect:
            errors.append("%s: exit %d, stderr %r; expected exit 2 and "
                          "'train: error: %s'" % (" ".join(flags), rc, err,
                                                   expect))
    if errors:
        raise Failure("\n".join(errors))


def check_trace(path, ranks, out):
    """--trace's file: Chrome trace events of the last step, one track per
    rank, each rank's steps one after another (forward and backward calls,
    sends and receives on a split plan, waits for started sends), within
    the step's printed wall time."""
    errors = []
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    times = re.findall(r"step %d loss \S+ time (\S+) s" % STEPS, out)
    step = float(times[0]) * 1e6 if times else 0
    for r in range(ranks):
        mine = [e for e in events if e["tid"] == r]
        kinds = {e["cat"] for e in mine}
        for kind in ("forward", "backward", "send", "receive"):
            if kind not in kinds:
                errors.append("trace: rank %d has no %s step" % (r, kind))
        end = 0
        for e in mine:
            if e["ts"] < end - 1e-3 or e["dur"] < 0:
                errors.append("trace: rank %d: %r overlaps the step before "
                              "it" % (r, e["name"]))
                break
            end = e["ts"] + e["dur"]
        if not 0 < end <= step * 1.01 + 1000:
            errors.append("trace: rank %d ends at %.0f us, the step took "
                          "%.0f us" % (r, end, step))
    if not any(e["name"] == "/4/Conv" for e in events):
        errors.append("trace: no event names the split convolution /4/Conv")
    return errors


def case_profile_ops(env, case):
    """--profile-ops writes the planner's profile format: `simulate --profile`
    takes the file for the same model and strategy, and it holds an entry
    (with forward and backward times) for every op the program computes,
    and a table of box copies timed on the program's device.
    bench/compare_traces.py reads the program's --trace beside the
    planner's.
    Every rank's profiled step is split into kernels, copies, communication
    and the rest, which add up to it. --trace in the same run writes the
    last step's timeline (check_trace); into a missing folder it fails
    before the first step."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    project = env.path("project")
    compile_project(env, fixture, ranks, case["strategy"], opt, project)
    program = build_project(env, project)
    profile = env.path("profile.json")
    trace = env.path("trace.json")
    _, _, out = train(env, program, fixture, ranks,
                      extra=["--profile-ops", profile, "--trace", trace])
    with open(profile) as f:
        data = json.load(f)
    errors = check_trace(trace, ranks, out)
    # An output rank 0 could not write fails the run before its first step,
    # naming the flag and the folder.
    missing = os.path.join(env.path("no-such-folder"), "trace.json")
    rc, bad_out, bad_err = run(
        [env.mpirun, "--oversubscribe", "-np", str(ranks), program] +
        fixture_data_flags(fixture) +
        ["--steps", "2", "--threads", "1", "--trace", missing],
        check=False, env=mpi_env())
    if rc == 0 or "step 1 " in bad_out or \
            "--trace: %s: folder %s does not exist" % (
                missing, os.path.dirname(missing)) not in bad_out + bad_err:
        errors.append("--trace into a missing folder: exit %d, output:\n%s%s"
                      % (rc, bad_out, bad_err))
    parts = {}
    for line in out.splitlines():
        m = re.match(r"rank (\d+) per profiled step: (\S+) s = kernels (\S+) "
                     r"s, copies (\S+) s, communication (\S+) s, other "
                     r"(\S+) s$", line)
        if m:
            parts[int(m.group(1))] = [float(x) for x in m.groups()[1:]]
    for r in range(ranks):
        if r not in parts:
            errors.append("rank %d: no per-step breakdown printed" % r)
            continue
        total, kernels, copies, comm, other = parts[r]
        if not (kernels > 0 and copies >= 0 and comm > 0 and
                other >= -1e-6 and
                abs(kernels + copies + comm + other - total) <= 1e-5):
            errors.append("rank %d: breakdown %r does not add up (kernels "
                          "and communication > 0 on a split plan)" %
                          (r, parts[r]))
    if data.get("format") != "onnx2soap-profile" or \
            data.get("device_type") != "cpu":
        errors.append("not a cpu profile: %r" % data.get("format"))
    entries = data.get("entries", [])
    if not entries or any(e["forward_s"] < 0 for e in entries):
        errors.append("no or negative entries")
    if not any("backward_s" in e for e in entries):
        errors.append("no backward times")
    copies = data.get("copies", {})
    sizes, times = copies.get("sizes_bytes", []), copies.get("times_us", [])
    if len(sizes) < 2 or len(times) != len(sizes) or \
            sorted(sizes) != sizes or min(times) <= 0 or \
            not times[-1] > times[0] or copies.get("samples", 0) < 1:
        errors.append("no table of box copies: %r" % copies)
    info = fixture_info(fixture)
    planned = env.path("planned.json")
    _, text, _ = run([env.onnx2soap, "simulate",
                      fixture_path(fixture, "model.onnx"), "--batch",
                      str(info["inputs"][0]["shape"][0]), "--cluster",
                      "cpu:%d" % ranks, "--strategy",
                      os.path.join(project, "strategy.json"), "--profile",
                      profile, "--json", "--trace", planned])
    if not json.loads(text).get("time", 0) > 0:
        errors.append("simulate --profile gave no time")
    # bench/compare_traces.py lines the program's trace up with the
    # planner's: a row per rank, the split convolution among the op groups.
    _, table, _ = run([sys.executable,
                       os.path.join(SOURCE_DIR, "bench", "compare_traces.py"),
                       trace, planned, "--top", "100"])
    for r in range(ranks):
        if not re.search(r"^\| %d \| [0-9.]+, [0-9.]+ \|" % r, table, re.M):
            errors.append("compare_traces: no row for rank %d:\n%s" %
                          (r, table))
    if "| /4/Conv | forward |" not in table:
        errors.append("compare_traces: no row for /4/Conv:\n%s" % table)
    if errors:
        raise Failure("\n".join(errors))


def case_profile_comm(env, case):
    """--profile-comm times communication by message size (a message per
    kind of route, the all-reduces of the plan's groups and of all ranks)
    and writes a cluster file's "measured"
    section: `clusters --show cpu:N --measured` takes it, and the planner's
    model parallelism, simulated on that cluster, takes the measured times."""
    fixture, ranks, opt = case["fixture"], case["ranks"], case["optimizer"]
    project = env.path("project")
    compile_project(env, fixture, ranks, case["strategy"], opt, project)
    program = build_project(env, project)
    measured = env.path("comm.json")
    run([env.mpirun, "--oversubscribe", "-np", str(ranks), program,
         "--profile-comm", measured, "--profile-comm-max", "65536",
         "--threads", "1"], timeout=300, env=mpi_env())
    with open(measured) as f:
        section = json.load(f)["measured"]
    errors = []
    names = ["node0/cpu%d" % r for r in range(ranks)]
    groups = [t["devices"] for t in section["all_reduces"]]
    if names not in groups:
        errors.append("no all-reduce among all ranks: %r" % groups)
    if not section["transfers"]:
        errors.append("no transfer measured")
    for t in section["transfers"] + section["all_reduces"]:
        if t["sizes_bytes"][0] != 8 or t["sizes_bytes"][-1] != 65536 or \
                len(t["times_us"]) != len(t["sizes_bytes"]) or \
                not all(x > 0 for x in t["times_us"]):
            errors.append("bad table %r" % t)
    _, shown, _ = run([env.onnx2soap, "clusters", "--show", "cpu:%d" % ranks,
                       "--measured", measured])
    cluster = env.path("cluster.json")
    with open(cluster, "w") as f:
        f.write(shown)
    if json.loads(shown).get("measured") != section:
        errors.append("clusters --show --measured changed the tables")
    info = fixture_info(fixture)
    times = []
    for c in ["cpu:%d" % ranks, cluster]:
        _, text, _ = run([env.onnx2soap, "simulate",
                          fixture_path(fixture, "model.onnx"), "--batch",
                          str(info["inputs"][0]["shape"][0]), "--cluster", c,
                          "--strategy", "model-parallel", "--json"])
        times.append(json.loads(text)["time"])
    if times[0] == times[1]:
        errors.append("the measured tables changed no simulated time (%g s)"
                      % times[0])
    if errors:
        raise Failure("\n".join(errors))


def case_gpu_build(env, case):
    """The CUDA project for GPUs configures with nvcc and links against the
    CUDA backend and NCCL communication the onnx2soap build compiled (the
    project's bundled copy of the same sources is not rebuilt here): built,
    not run (no GPU on the test machine)."""
    fixture, opt = case["fixture"], case["optimizer"]
    project = env.path("project")
    compile_project(env, fixture, case["ranks"], case["strategy"], opt,
                    project, cluster=case["cluster"],
                    extra=["--gpus", str(case["ranks"])])
    start = time.monotonic()
    program = build_project(env, project, jobs=2, cuda=True, timeout=1400)
    log("CUDA project built in %.0f s" % (time.monotonic() - start))
    if not os.access(program, os.X_OK):
        raise Failure("no %s after the build" % program)


KINDS = {
    "train": case_train,
    "repro": case_repro,
    "checkpoint": case_checkpoint,
    "save_onnx": case_save_onnx,
    "profile_ops": case_profile_ops,
    "profile_comm": case_profile_comm,
    "rank_failure": case_rank_failure,
    "compile_error": case_compile_error,
    "program_flags": case_program_flags,
    "gpu_build": case_gpu_build,
    "dataset": case_dataset,
}


def load_cases():
    with open(os.path.join(HERE, "cases.json")) as f:
        cases = json.load(f)["cases"]
    names = [c["name"] for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SystemExit("cases.json: duplicate case names %s" % duplicates)
    for c in cases:
        if c["kind"] not in KINDS:
            raise SystemExit("cases.json: case %s has unknown kind %r" %
                             (c["name"], c["kind"]))
    return {c["name"]: c for c in cases}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--onnx2soap")
    parser.add_argument("--runtime-export")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--work")
    parser.add_argument("--keep", action="store_true",
                        help="keep the case's folder when it passes")
    args = parser.parse_args()
    cases = load_cases()
    if args.list:
        for name in cases:
            print(name)
        return 0
    case = cases.get(args.case)
    if case is None:
        raise SystemExit("no case %r in cases.json" % args.case)
    for flag in ("onnx2soap", "runtime_export", "work"):
        if not getattr(args, flag):
            raise SystemExit("--%s is required" % flag.replace("_", "-"))
    env = Env(args, case)
    shutil.rmtree(env.dir, ignore_errors=True)
    os.makedirs(env.dir)
    start = time.monotonic()
    xfail = case.get("xfail")
    try:
        KINDS[case["kind"]](env, case)
    except (Failure, subprocess.TimeoutExpired) as failure:
        log("FAIL %s: %s" % (case["name"], failure))
        if xfail:
            log("expected failure (cases.json): %s" % xfail)
            return 0
        return 1
    log("case %s passed in %.1f s" % (case["name"], time.monotonic() - start))
    if xfail:
        log("FAIL: the case is marked as expected to fail (%s) but passed; "
            "remove its xfail in cases.json" % xfail)
        return 1
    if not args.keep:
        shutil.rmtree(env.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
