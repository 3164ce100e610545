#!/usr/bin/env python3
"""Make node tests, in the layout of ONNX's backend tests, for ops whose tests
Debian's libonnx-testdata lacks (or has too few of).

    python3 tests/conformance/make_node_tests.py [--out tests/conformance/node]

Needs the `onnx` Python package (1.16 or later: its reference implementation
computes the expected outputs; made with 1.23.2). For every case NAME this
writes NAME/model.onnx and NAME/test_data_set_0/{input_I.pb, output_0.pb},
which BackendRunTest.OurNodeTestsThroughTheReferenceExecutor runs through
the reference executor. The inputs come from a seeded generator, so running
the script again gives the same files.
"""

import argparse
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

IR_VERSION = 8  # what PyTorch's exporters write; the importer reads 3 to 14


def case(name, op, opset, inputs, attrs=None, constants=None, expected=None):
    """One node test: op over the named inputs (name -> array), then the
    constants (name -> array), each made by a Constant node (known at import
    time, where an initializer would be a weight). The expected output is
    ONNX's reference implementation's, or expected(inputs) where that is
    wrong."""
    constants = constants or {}
    nodes = [helper.make_node("Constant", [], [n],
                              value=numpy_helper.from_array(a, n))
             for n, a in constants.items()]
    nodes.append(helper.make_node(op, list(inputs) + list(constants), ["y"],
                                  **(attrs or {})))
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    (y,) = ReferenceEvaluator(model).run(None, inputs)
    if expected is not None:
        y = expected(inputs).astype(np.float32)
    model.graph.output[0].CopyFrom(
        helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape))
    if not (op == "GroupNormalization" and opset < 21):
        # The checker refuses GroupNormalization-18 as deprecated (its
        # per-group scale); models exported at 18-20 still carry it.
        onnx.checker.check_model(model, full_check=True)
    return name, model, inputs, y


def graph_case(name, opset, inputs, nodes):
    """A test of several nodes over float inputs, ending in output y."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    (y,) = ReferenceEvaluator(model).run(None, inputs)
    model.graph.output[0].CopyFrom(
        helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape))
    onnx.checker.check_model(model, full_check=True)
    return name, model, inputs, y


def cases():
    rng = np.random.default_rng(20261201)

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 2 + 0.5

    out = []
    # InstanceNormalization-6, imported at the model's opset (13 to 21).
    for name, shape, opset, attrs in [
            ("test_ours_instancenorm_4d", (2, 3, 4, 5), 13, {}),
            ("test_ours_instancenorm_3d_epsilon", (3, 2, 7), 17,
             {"epsilon": 0.1}),
            ("test_ours_instancenorm_5d", (1, 4, 2, 3, 2), 21, {})]:
        c = shape[1]
        out.append(case(name, "InstanceNormalization", opset,
                        {"x": normal(*shape), "scale": normal(c),
                         "bias": normal(c)}, attrs))
    # Scale 1 and bias 0 as constants: the importer leaves out Mul and Add.
    out.append(case("test_ours_instancenorm_constant_identity",
                    "InstanceNormalization", 17, {"x": normal(2, 4, 3, 3)},
                    constants={"scale": np.ones(4, np.float32),
                               "bias": np.zeros(4, np.float32)}))
    out.append(case("test_ours_instancenorm_constant_affine",
                    "InstanceNormalization", 17, {"x": normal(2, 4, 3, 3)},
                    constants={"scale": normal(4), "bias": normal(4)}))
    # GroupNormalization-18: scale and bias per group.
    for name, shape, groups, attrs in [
            ("test_ours_group_normalization_18", (2, 6, 3, 4), 3, {}),
            ("test_ours_group_normalization_18_epsilon", (3, 4, 5), 2,
             {"epsilon": 0.01}),
            ("test_ours_group_normalization_18_one_group", (2, 4, 2, 2), 1,
             {})]:
        out.append(case(name, "GroupNormalization", 18,
                        {"x": normal(*shape), "scale": normal(groups),
                         "bias": normal(groups)},
                        dict(attrs, num_groups=groups)))
    # GroupNormalization-21: scale and bias per channel.
    for name, shape, groups, attrs in [
            ("test_ours_group_normalization_21", (2, 6, 3, 4), 3, {}),
            ("test_ours_group_normalization_21_rank2", (3, 8), 4, {}),
            ("test_ours_group_normalization_21_5d_stash", (1, 4, 2, 3, 2), 2,
             {"stash_type": 1, "epsilon": 0.001}),
            ("test_ours_group_normalization_21_per_channel", (2, 4, 6), 4,
             {})]:
        c = shape[1]
        out.append(case(name, "GroupNormalization", 21,
                        {"x": normal(*shape), "scale": normal(c),
                         "bias": normal(c)},
                        dict(attrs, num_groups=groups)))
    # Ops the importer writes as several IR ops (handlers/Composite.cpp),
    # at opsets the Debian data has no test of them at.
    x = normal(2, 3, 4)
    for name, op, opset, attrs in [
            ("test_ours_selu", "Selu", 17, {}),
            ("test_ours_selu_attributes", "Selu", 13,
             {"alpha": 2.0, "gamma": 3.0}),
            ("test_ours_celu", "Celu", 17, {}),
            ("test_ours_celu_alpha", "Celu", 17, {"alpha": 2.0}),
            ("test_ours_softsign", "Softsign", 17, {}),
            ("test_ours_thresholdedrelu", "ThresholdedRelu", 17,
             {"alpha": 0.5}),
            ("test_ours_mish", "Mish", 18, {}),
            ("test_ours_lpnormalization_l2", "LpNormalization", 17, {})]:
        out.append(case(name, op, opset, {"x": x}, attrs))
    # onnx.reference's LpNormalization divides by the sum of x**p, which for
    # p = 1 is not the L1 norm of negative values; the operator's definition
    # (an Lp norm), onnx-mlir and OpenVINO divide by the sum of |x|.
    out.append(case("test_ours_lpnormalization_l1_axis0", "LpNormalization",
                    17, {"x": x}, {"axis": 0, "p": 1},
                    expected=lambda i: i["x"] / np.abs(i["x"]).sum(
                        axis=0, keepdims=True)))
    out.append(case("test_ours_prelu_per_channel", "PRelu", 17,
                    {"x": normal(2, 3, 4, 4), "slope": normal(3, 1, 1)}))
    out.append(case("test_ours_sum_broadcast", "Sum", 17,
                    {"a": normal(2, 3, 4), "b": normal(3, 1), "c": normal(4)}))
    out.append(case("test_ours_mean_broadcast", "Mean", 17,
                    {"a": normal(2, 3, 4), "b": normal(1, 4)}))
    out.append(case("test_ours_tile_3d", "Tile", 17, {"x": normal(2, 1, 3)},
                    constants={"repeats": np.array([1, 4, 2], np.int64)}))
    out.append(case("test_ours_reduce_l2_18_axes_input", "ReduceL2", 18,
                    {"x": x}, {"keepdims": 0},
                    constants={"axes": np.array([-1, 0], np.int64)}))
    # A zero norm gives zeros (p = 1 against the definition, as above).
    z = normal(3, 4)
    z[:, 1] = 0
    out.append(case("test_ours_lpnormalization_zero_norm_p2",
                    "LpNormalization", 17, {"x": z}, {"axis": 0}))

    def l1_normalized(i):
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(
                i["x"] / np.abs(i["x"]).sum(axis=0, keepdims=True))
    out.append(case("test_ours_lpnormalization_zero_norm_p1",
                    "LpNormalization", 17, {"x": z}, {"axis": 0, "p": 1},
                    expected=l1_normalized))
    # Over an empty set ReduceMax gives -inf and ReduceMin +inf.
    for op in ("ReduceMax", "ReduceMin"):
        out.append(case("test_ours_%s_empty_set" % op.lower(), op, 13,
                        {"x": np.zeros((2, 0, 3), np.float32)},
                        {"axes": [1], "keepdims": 1}))
    # Sign keeps NaN and gives 0 for both zeros.
    out.append(case("test_ours_sign_nan_and_zeros", "Sign", 17,
                    {"x": np.array([-2.5, -0.0, 0.0, 3.0, np.nan, -np.inf],
                                   np.float32)}))
    out.append(case("test_ours_reducelogsumexp_axes_input", "ReduceLogSumExp",
                    18, {"x": normal(2, 3, 4)}, {"keepdims": 0},
                    constants={"axes": np.array([0, 2], np.int64)}))
    # Infinite maxima: +inf gives +inf and a slice all -inf gives -inf (the
    # function body's log(sum(exp(x))) and PyTorch's; onnx.reference's
    # shifted form gives NaN for the latter); an empty set gives -inf.
    inf = np.inf
    out.append(case("test_ours_reducelogsumexp_infinities", "ReduceLogSumExp",
                    17, {"x": np.array([[-inf, -inf, -inf], [1, 2, -inf],
                                        [inf, 1, 2], [inf, -inf, 0]],
                                       np.float32)},
                    {"axes": [1], "keepdims": 0},
                    expected=lambda i: np.array([-inf, np.logaddexp(1, 2),
                                                 inf, inf])))
    out.append(case("test_ours_reducelogsumexp_empty_set", "ReduceLogSumExp",
                    17, {"x": np.zeros((2, 0, 3), np.float32)},
                    {"axes": [1], "keepdims": 1}))
    # A folded ReduceProd wraps in its element type: 65536 * 65536 * 3 is 0
    # in int32.
    out.append(graph_case(
        "test_ours_reduceprod_int32_wraps", 17, {"x": normal(1)},
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
            np.array([65536, 65536, 3], np.int32), "c")),
         helper.make_node("ReduceProd", ["c"], ["p"], keepdims=0),
         helper.make_node("Cast", ["p"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["x", "f"], ["y"])]))
    # CumSum over the middle axis of a 3-D input, each way.
    for exclusive in (0, 1):
        for reverse in (0, 1):
            out.append(case(
                "test_ours_cumsum_middle_axis_exclusive%d_reverse%d"
                % (exclusive, reverse), "CumSum", 14, {"x": normal(2, 5, 3)},
                {"exclusive": exclusive, "reverse": reverse},
                constants={"axis": np.array(-2, np.int64)}))
    # Position ids as RoBERTa makes them from a padding mask: a cumulative
    # sum of int64s known only at run time; plus whether a folded one of
    # int32s wrapped (2^31 - 1 + 1 is negative).
    out.append(graph_case(
        "test_ours_cumsum_int_positions", 17, {"x": normal(4, 3)},
        [helper.make_node("Constant", [], ["zero"],
                          value=numpy_helper.from_array(
                              np.array(0, np.float32), "zero")),
         helper.make_node("Greater", ["x", "zero"], ["positive"]),
         helper.make_node("Cast", ["positive"], ["mask"], to=TensorProto.INT64),
         helper.make_node("Constant", [], ["axis"],
                          value=numpy_helper.from_array(
                              np.array(1, np.int32), "axis")),
         helper.make_node("CumSum", ["mask", "axis"], ["running"]),
         helper.make_node("Mul", ["running", "mask"], ["positions"]),
         helper.make_node("Cast", ["positions"], ["p"], to=TensorProto.FLOAT),
         helper.make_node("Constant", [], ["big"],
                          value=numpy_helper.from_array(
                              np.array([2147483647, 1, 5], np.int32), "big")),
         helper.make_node("Constant", [], ["axis0"],
                          value=numpy_helper.from_array(
                              np.array(0, np.int64), "axis0")),
         helper.make_node("CumSum", ["big", "axis0"], ["wrapped"]),
         helper.make_node("Constant", [], ["izero"],
                          value=numpy_helper.from_array(
                              np.array(0, np.int32), "izero")),
         helper.make_node("Less", ["wrapped", "izero"], ["negative"]),
         helper.make_node("Cast", ["negative"], ["n"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["p", "n"], ["y"])]))
    # And, Or and Xor of masks broadcast against each other, as 1, 2 and 4.
    logic = [helper.make_node("Constant", [], ["zero"],
                              value=numpy_helper.from_array(
                                  np.array(0.5, np.float32), "zero")),
             helper.make_node("Greater", ["x", "zero"], ["a"]),
             helper.make_node("Greater", ["z", "zero"], ["b"])]
    for i, op in enumerate(["And", "Or", "Xor"]):
        logic += [helper.make_node(op, ["a", "b"], [op + "_m"]),
                  helper.make_node("Cast", [op + "_m"], [op + "_f"],
                                   to=TensorProto.FLOAT),
                  helper.make_node("Constant", [], [op + "_w"],
                                   value=numpy_helper.from_array(
                                       np.array(2.0 ** i, np.float32),
                                       op + "_w")),
                  helper.make_node("Mul", [op + "_f", op + "_w"], [op + "_v"])]
    logic += [helper.make_node("Add", ["And_v", "Or_v"], ["ao"]),
              helper.make_node("Add", ["ao", "Xor_v"], ["y"])]
    out.append(graph_case("test_ours_and_or_xor_broadcast", 17,
                          {"x": normal(3, 4), "z": normal(4)}, logic))
    # Round takes halves to even; Sin and Cos at the opset PyTorch exports.
    out.append(case("test_ours_round_halves", "Round", 17,
                    {"x": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.51,
                                    -0.49], np.float32)}))
    for op in ("Sin", "Cos"):
        out.append(case("test_ours_%s" % op.lower(), op, 17,
                        {"x": normal(3, 4) * 3}))
    # Einsum: attention's two products, transposes and sums, implicit
    # outputs, a broadcast ellipsis, an outer product and three operands.
    for name, equation, shapes in [
            ("attention_scores", "bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
            ("attention_values", "bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
            ("transpose", "ij->ji", [(3, 4)]),
            ("sum_all", "ij->", [(3, 4)]),
            ("implicit_inner", "i,i", [(5,), (5,)]),
            ("implicit_sorted", "ba,ca", [(3, 4), (2, 4)]),
            ("ellipsis_broadcast", "...ij,...jk->...ik",
             [(2, 1, 3, 4), (1, 5, 4, 2)]),
            ("sum_one_side", "ijk,ik->j", [(2, 3, 4), (2, 4)]),
            ("outer", "bi,bj->bij", [(2, 3), (2, 4)]),
            ("three_operands", "ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]),
            # Appended later (the generator's draws above stay the same).
            ("ellipsis_summed", "...ij->ji", [(4, 2, 3)]),
            ("pairs_sharing_first", "ij,kl,jk->il", [(2, 3), (4, 5), (3, 4)]),
            ("uppercase_implicit", "Ab,bc", [(2, 3), (3, 4)])]:
        names = ["a", "b", "c"][:len(shapes)]
        out.append(case("test_ours_einsum_" + name, "Einsum", 17,
                        {n: normal(*shape) for n, shape in zip(names, shapes)},
                        {"equation": equation}))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "node"))
    args = parser.parse_args()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    for name, model, inputs, y in cases():
        data = os.path.join(args.out, name, "test_data_set_0")
        os.makedirs(data)
        onnx.save(model, os.path.join(args.out, name, "model.onnx"))
        for i, (n, a) in enumerate(inputs.items()):
            with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(a, n).SerializeToString())
        with open(os.path.join(data, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(
                y.astype(np.float32), "y").SerializeToString())
        print(name)


if __name__ == "__main__":
    main()
