//===- tests/onnx_import/BadModelTest.cpp - Broken models, one-line errors ===//
//
// Each case starts from ModelBuilder's valid model, breaks one thing (a
// field, a shape, an op's attributes or inputs, external data), and expects
// a one-line error naming what is wrong and where (BadInputTest.cpp: broken
// bytes, missing files, and models that must import).
//
//===----------------------------------------------------------------------===//
#include "ExpectImportError.h"
#include "ModelBuilder.h"
#include "onnx_import/Importer.h"
#include "gtest/gtest.h"
#include <cmath>
#include <functional>

using namespace onnx2soap;
using namespace onnx2soap::testing;
using onnx_import::ImportOptions;

namespace {

using Mutation = std::function<void(onnx::ModelProto &, const TempDir &)>;

struct BadModelCase {
  const char *Name;
  Mutation Mutate;
  const char *Expected;
  ImportOptions Options = batch(2);
};

onnx::GraphProto &graph(onnx::ModelProto &M) { return *M.mutable_graph(); }

/// Replaces the graph input x with one of the given dims.
void setInputDims(onnx::ModelProto &M, std::initializer_list<Dim> Dims) {
  onnx::GraphProto &G = graph(M);
  G.mutable_input()->DeleteSubrange(0, 1);
  addInput(G, "x", Dims);
}

/// Appends Reshape(y, shape) -> r with r the graph output.
void addReshape(onnx::ModelProto &M, std::vector<int64_t> Target) {
  onnx::GraphProto &G = graph(M);
  addInt64Initializer(G, "target", std::move(Target));
  addNode(G, "Reshape", {"y", "target"}, {"r"}, "reshape");
  G.mutable_output(0)->set_name("r");
}

/// Makes the graph one ConvTranspose of x [batch, 1, 7] by a [1, 1, 1]
/// kernel with stride 3, plus the attributes Set adds.
Mutation convTranspose(std::function<void(onnx::NodeProto &)> Set) {
  return [Set](onnx::ModelProto &M, const TempDir &) {
    onnx::GraphProto &G = graph(M);
    G.clear_node();
    G.clear_initializer();
    G.clear_input();
    addInput(G, "x", {"batch", 1, 7});
    addFloatInitializer(G, "W", {1, 1, 1});
    onnx::NodeProto *N = addNode(G, "ConvTranspose", {"x", "W"}, {"y"}, "up");
    addIntsAttr(*N, "strides", {3});
    Set(*N);
  };
}

/// Makes the graph x [batch, 4, 6, 6] -> (what Build adds) -> r.
Mutation resizeGraph(std::function<void(onnx::GraphProto &)> Build) {
  return [Build](onnx::ModelProto &M, const TempDir &) {
    onnx::GraphProto &G = graph(M);
    G.clear_node();
    G.clear_initializer();
    G.clear_input();
    G.clear_output();
    addInput(G, "x", {"batch", 4, 6, 6});
    Build(G);
    addOutput(G, "r");
  };
}

/// Makes the graph one node of OpType over x [batch, 4, 6, 6] (X's dims
/// when given), scale [ScaleSize] and bias [ScaleSize] at Opset, plus the
/// attributes Set adds.
Mutation normGraph(const char *OpType, int64_t Opset, int64_t ScaleSize,
                   std::function<void(onnx::NodeProto &)> Set,
                   std::vector<Dim> X = {"batch", 4, 6, 6},
                   int32_t Type = onnx::TensorProto::FLOAT) {
  return [=](onnx::ModelProto &M, const TempDir &) {
    M.mutable_opset_import(0)->set_version(Opset);
    onnx::GraphProto &G = graph(M);
    G.clear_node();
    G.clear_initializer();
    G.clear_input();
    G.clear_output();
    onnx::ValueInfoProto *In = addInput(G, "x", {}, Type);
    auto *Shape = In->mutable_type()->mutable_tensor_type()->mutable_shape();
    for (const Dim &D : X) {
      auto *Entry = Shape->add_dim();
      if (D.Name.empty())
        Entry->set_dim_value(D.Size);
      else
        Entry->set_dim_param(D.Name);
    }
    addFloatInitializer(G, "scale", {ScaleSize});
    addFloatInitializer(G, "bias", {ScaleSize});
    Set(*addNode(G, OpType, {"x", "scale", "bias"}, {"r"}, "norm"));
    addOutput(G, "r");
  };
}

void noAttributes(onnx::NodeProto &) {}

const BadModelCase BadModelCases[] =
    {
        // Versions.
        {"WrongIrVersion",
         [](onnx::ModelProto &M, const TempDir &) { M.set_ir_version(99); },
         "ONNX IR version 99 is not supported"},
        {"NoIrVersion",
         [](onnx::ModelProto &M, const TempDir &) { M.clear_ir_version(); },
         "has no ir_version"},
        {"OldOpset",
         [](onnx::ModelProto &M, const TempDir &) {
           M.mutable_opset_import(0)->set_version(7);
         },
         "the model uses ai.onnx opset 7; onnx2soap supports opsets 13 to 21"},
        {"FutureOpset",
         [](onnx::ModelProto &M, const TempDir &) {
           M.mutable_opset_import(0)->set_version(99);
         },
         "ai.onnx opset 99"},
        {"NoOpset",
         [](onnx::ModelProto &M, const TempDir &) { M.clear_opset_import(); },
         "imports no default-domain (ai.onnx) opset"},

        // Operators.
        {"UnknownOp",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->set_op_type("Frobnicate");
         },
         "unsupported ONNX operators: Frobnicate (opset 17) at 'relu'"},
        {"SeveralUnknownOpsSorted",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(0)->set_op_type("Zorch");
           graph(M).mutable_node(1)->set_op_type("Blarg");
           graph(M).mutable_node(2)->set_op_type("Zorch");
         },
         "unsupported ONNX operators: Blarg (opset 17) at 'add'; Zorch (opset "
         "17) at 'matmul' and 1 more"},
        {"CustomDomainOp",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->set_domain("com.example");
         },
         "unsupported ONNX operators: com.example.Relu at 'relu'"},

        // ConvTranspose: with auto_pad SAME and a stride past the kernel
        // ONNX puts zeros before the first output, which were put after
        // the last (every value shifted); output_padding -1 cropped the
        // output, and one of the stride or more failed only in the kernel.
        {"ConvTransposeSameShifts",
         convTranspose([](onnx::NodeProto &N) {
           addStringAttr(N, "auto_pad", "SAME_UPPER");
         }),
         "op ConvTranspose): auto_pad SAME_UPPER with stride 3 along "
         "spatial dim 0 asks for 21 outputs where the window reaches 19; the "
         "zeros it would put before the first are not supported"},
        {"ConvTransposeNegativeOutputPadding",
         convTranspose(
             [](onnx::NodeProto &N) { addIntsAttr(N, "output_padding", {-1}); }),
         "the node gives output_padding -1 along spatial dim 0; it must be "
         "from 0 to 2 (less than the stride or the dilation)"},
        {"ConvTransposeOutputPaddingOfTheStride",
         convTranspose(
             [](onnx::NodeProto &N) { addIntsAttr(N, "output_padding", {3}); }),
         "the node gives output_padding 3 along spatial dim 0"},
        {"ConvTransposeOutputShapePastThePadding",
         convTranspose(
             [](onnx::NodeProto &N) { addIntsAttr(N, "output_shape", {22}); }),
         "output_shape gives output_padding 3 along spatial dim 0; it must be "
         "from 0 to 2"},

        {"SparseInitializer",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::SparseTensorProto *S = graph(M).add_sparse_initializer();
           S->mutable_values()->set_name("S");
           S->mutable_values()->set_data_type(onnx::TensorProto::FLOAT);
           S->add_dims(4);
         },
         "sparse initializer 'S' is not supported (store it dense)"},

        // More inputs than the op takes were dropped (Relu(a, W)).
        {"ExtraInput",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->add_input("W");
         },
         "node 'relu' (#2, op Relu): Relu takes at most 1 input, the node "
         "has 2"},

        {"NoOutputs",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).clear_output();
         },
         "the model's graph has no outputs"},
        {"OpsetImportedTwice",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::OperatorSetIdProto *Id = M.add_opset_import();
           Id->set_domain("ai.onnx");
           Id->set_version(18);
         },
         "the model imports the ai.onnx opset twice, as 17 and as 18"},

        // Attributes and inputs of another opset than the model's.
        {"ReduceRepeatsAnAxis",
         [](onnx::ModelProto &M, const TempDir &) {
           addInt64Initializer(graph(M), "axes", {1, -1});
           addNode(graph(M), "ReduceSum", {"y", "axes"}, {"s"}, "sum");
           graph(M).mutable_output(0)->set_name("s");
         },
         "node 'sum' (#3, op ReduceSum): axes repeat axis 1"},
        {"ReduceMeanNoopBefore18",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::NodeProto *N =
               addNode(graph(M), "ReduceMean", {"y"}, {"m"}, "mean");
           addIntsAttr(*N, "axes", {1});
           addIntAttr(*N, "noop_with_empty_axes", 1);
           graph(M).mutable_output(0)->set_name("m");
         },
         "node 'mean' (#3, op ReduceMean): noop_with_empty_axes exists from "
         "opset 18 on; this model uses opset 17"},
        {"SplitNumOutputsBefore18",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::NodeProto *N =
               addNode(graph(M), "Split", {"y"}, {"s0", "s1"}, "split");
           addIntAttr(*N, "axis", 0);
           addIntAttr(*N, "num_outputs", 2);
           graph(M).mutable_output(0)->set_name("s0");
         },
         "node 'split' (#3, op Split): num_outputs exists from opset 18 on; "
         "this model uses opset 17"},
        {"SplitAttribute",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::NodeProto *N =
               addNode(graph(M), "Split", {"y"}, {"s0", "s1"}, "split");
           addIntsAttr(*N, "split", {1, 2});
           addIntAttr(*N, "axis", 1);
           graph(M).mutable_output(0)->set_name("s0");
         },
         "node 'split' (#3, op Split): the 'split' attribute was replaced by "
         "an input in opset 13"},
        {"PadAxesBefore18",
         [](onnx::ModelProto &M, const TempDir &) {
           addInt64Initializer(graph(M), "pads", {1, 1});
           addInt64Initializer(graph(M), "axes", {1});
           addNode(graph(M), "Pad", {"y", "pads", "", "axes"}, {"p"}, "pad");
           graph(M).mutable_output(0)->set_name("p");
         },
         "node 'pad' (#3, op Pad): the axes input exists from opset 18 on; "
         "this model uses opset 17"},

        // Resize: nearest and linear over the spatial dims only.
        // InstanceNormalization and GroupNormalization.
        {"InstanceNormRank2",
         normGraph("InstanceNormalization", 17, 4, noAttributes,
                   {"batch", 4}),
         "node 'norm' (#0, op InstanceNormalization): input [2,4] has fewer "
         "than 3 dims ([N, C, D1, ...] expected)"},
        {"InstanceNormScaleSize",
         normGraph("InstanceNormalization", 17, 3, noAttributes),
         "node 'norm' (#0, op InstanceNormalization): scale [3] must have 4 "
         "values, one per channel"},
        {"InstanceNormHalf",
         normGraph("InstanceNormalization", 17, 4, noAttributes,
                   {"batch", 4, 6, 6}, onnx::TensorProto::FLOAT16),
         "node 'norm' (#0, op InstanceNormalization): input of type f16 is "
         "not supported (float or double)"},
        {"GroupNormGroupsDoNotDivide",
         normGraph("GroupNormalization", 21, 4,
                   [](onnx::NodeProto &N) { addIntAttr(N, "num_groups", 3); }),
         "node 'norm' (#0, op GroupNormalization): num_groups 3 does not "
         "divide the 4 channels of input [2,4,6,6]"},
        {"GroupNormNoGroups",
         normGraph("GroupNormalization", 21, 4, noAttributes),
         "node 'norm' (#0, op GroupNormalization): the attribute 'num_groups' "
         "is required"},
        {"GroupNormStashBefore21",
         normGraph("GroupNormalization", 18, 2,
                   [](onnx::NodeProto &N) {
                     addIntAttr(N, "num_groups", 2);
                     addIntAttr(N, "stash_type", 1);
                   }),
         "node 'norm' (#0, op GroupNormalization): stash_type exists from "
         "opset 21 on; this model uses opset 18"},
        {"GroupNormStashDouble",
         normGraph("GroupNormalization", 21, 4,
                   [](onnx::NodeProto &N) {
                     addIntAttr(N, "num_groups", 2);
                     addIntAttr(N, "stash_type", 11);
                   }),
         "node 'norm' (#0, op GroupNormalization): stash_type 11 is not "
         "supported (only FLOAT)"},
        {"GroupNorm18ScalePerChannel",
         normGraph("GroupNormalization", 18, 4,
                   [](onnx::NodeProto &N) { addIntAttr(N, "num_groups", 2); }),
         "node 'norm' (#0, op GroupNormalization): scale [4] must have 2 "
         "values, one per group (opset 18)"},
        // Ops written as several IR ops (handlers/Composite.cpp).
        {"PReluSlopeBroadcastsTheInput", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 1, 6});
           addFloatInitializer(G, "slope", {4, 1});
           addNode(G, "PRelu", {"x", "slope"}, {"r"}, "act");
         }),
         "node 'act' (#0, op PRelu): slope [4,1] does not broadcast to the "
         "input [2,1,6]"},
        {"SeluOfIntegers", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 4}, onnx::TensorProto::INT64);
           addNode(G, "Selu", {"x"}, {"r"}, "act");
         }),
         "node 'act' (#0, op Selu): input of type i64 is not supported "
         "(floating point only)"},
        {"CeluAlphaZero", resizeGraph([](onnx::GraphProto &G) {
           addFloatAttr(*addNode(G, "Celu", {"x"}, {"r"}, "act"), "alpha", 0);
         }),
         "node 'act' (#0, op Celu): alpha 0 is not positive"},
        {"TileRepeatsPerDim", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "repeats", {2, 2});
           addNode(G, "Tile", {"x", "repeats"}, {"r"}, "tile");
         }),
         "node 'tile' (#0, op Tile): repeats [2,2] must have one value per "
         "dim of the input [2,4,6,6]"},
        {"TileZeroRepeats", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "repeats", {1, 0, 1, 1});
           addNode(G, "Tile", {"x", "repeats"}, {"r"}, "tile");
         }),
         "node 'tile' (#0, op Tile): repeats [1,0,1,1] must be positive"},
        {"TileTooLarge", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "repeats", {1, 1, int64_t(1) << 62, 1});
           addNode(G, "Tile", {"x", "repeats"}, {"r"}, "tile");
         }),
         "node 'tile' (#0, op Tile): repeats [1,1,4611686018427387904,1] "
         "make dim 2 of the input [2,4,6,6] too large"},
        {"ReduceL2OfIntegers", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 4}, onnx::TensorProto::INT32);
           addNode(G, "ReduceL2", {"x"}, {"r"}, "norm");
         }),
         "node 'norm' (#0, op ReduceL2): input of type i32 is not supported "
         "(floating point only)"},
        {"DepthToSpaceNoBlocksize", resizeGraph([](onnx::GraphProto &G) {
           addNode(G, "DepthToSpace", {"x"}, {"r"}, "shuffle");
         }),
         "node 'shuffle' (#0, op DepthToSpace): the attribute 'blocksize' is "
         "required"},
        {"DepthToSpaceChannels", resizeGraph([](onnx::GraphProto &G) {
           addIntAttr(*addNode(G, "DepthToSpace", {"x"}, {"r"}, "shuffle"),
                      "blocksize", 3);
         }),
         "node 'shuffle' (#0, op DepthToSpace): blocksize 3 squared does not "
         "divide the 4 channels"},
        {"SpaceToDepthSpatial", resizeGraph([](onnx::GraphProto &G) {
           addIntAttr(*addNode(G, "SpaceToDepth", {"x"}, {"r"}, "unshuffle"),
                      "blocksize", 4);
         }),
         "node 'unshuffle' (#0, op SpaceToDepth): blocksize 4 does not divide "
         "the spatial dims of [2,4,6,6]"},
        {"TriluVectorK", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "k", {1, 2});
           addNode(G, "Trilu", {"x", "k"}, {"r"}, "mask");
         }),
         "node 'mask' (#0, op Trilu): k must be a scalar, it has 2 values"},
        {"TriluMaskTooLarge", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {int64_t(0), int64_t(1) << 33, int64_t(1) << 33});
           addNode(G, "Trilu", {"x"}, {"r"}, "mask");
         }),
         "node 'mask' (#0, op Trilu): the last two dims of "
         "[0,8589934592,8589934592] make a mask of more than 4194304 values",
         ImportOptions()},
        {"SignOfUInt8", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 4}, onnx::TensorProto::UINT8);
           addNode(G, "Sign", {"x"}, {"r"}, "sign");
         }),
         "node 'sign' (#0, op Sign): input of type u8 is not supported (f32, "
         "f64, i32 or i64)"},
        {"ReduceLogSumExpOfHalves", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 4}, onnx::TensorProto::FLOAT16);
           addNode(G, "ReduceLogSumExp", {"x"}, {"r"}, "lse");
         }),
         "node 'lse' (#0, op ReduceLogSumExp): input of type f16 is not "
         "supported (float or double)"},
        {"ReduceProdAtRunTime", resizeGraph([](onnx::GraphProto &G) {
           addNode(G, "ReduceProd", {"x"}, {"r"}, "prod");
         }),
         "node 'prod' (#0, op ReduceProd): ReduceProd of 'x', known only at "
         "run time, is not supported (only of values known at import time, "
         "as in shape computations)"},
        {"LpNormalizationP3", resizeGraph([](onnx::GraphProto &G) {
           addIntAttr(*addNode(G, "LpNormalization", {"x"}, {"r"}, "norm"),
                      "p", 3);
         }),
         "node 'norm' (#0, op LpNormalization): p 3 is not supported (1 or "
         "2)"},
        {"ReduceL2AxesAttributeIn18",
         [](onnx::ModelProto &M, const TempDir &Dir) {
           resizeGraph([](onnx::GraphProto &G) {
             addIntsAttr(*addNode(G, "ReduceL2", {"x"}, {"r"}, "norm"), "axes",
                         {1});
           })(M, Dir);
           M.mutable_opset_import(0)->set_version(18);
         },
         "node 'norm' (#0, op ReduceL2): the 'axes' attribute was replaced by "
         "an input in opset 18; this model uses opset 18"},
        {"AndOfFloats", resizeGraph([](onnx::GraphProto &G) {
           addNode(G, "And", {"x", "x"}, {"r"}, "both");
         }),
         "node 'both' (#0, op And): input 0 of type f32 is not supported "
         "(bool only)"},
        {"LessOrEqualOfBools", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 4}, onnx::TensorProto::BOOL);
           addNode(G, "LessOrEqual", {"x", "x"}, {"r"}, "le");
         }),
         "node 'le' (#0, op LessOrEqual): input of type bool is not supported "
         "(f32, f64, u8, i32 or i64)"},
        {"EinsumDiagonal", resizeGraph([](onnx::GraphProto &G) {
           addStringAttr(*addNode(G, "Einsum", {"x"}, {"r"}, "sum"),
                         "equation", "biij->bj");
         }),
         "node 'sum' (#0, op Einsum): label 'i' repeats in operand 0 "
         "('biij'): diagonals are not supported"},
        {"EinsumTermsForInputs", resizeGraph([](onnx::GraphProto &G) {
           addStringAttr(*addNode(G, "Einsum", {"x", "x"}, {"r"}, "sum"),
                         "equation", "bcij->bc");
         }),
         "node 'sum' (#0, op Einsum): equation 'bcij->bc' has 1 operand "
         "terms for 2 inputs"},
        {"EinsumLabelsForRank", resizeGraph([](onnx::GraphProto &G) {
           addStringAttr(*addNode(G, "Einsum", {"x"}, {"r"}, "sum"),
                         "equation", "bij->b");
         }),
         "node 'sum' (#0, op Einsum): equation term 'bij' has 3 labels for "
         "operand 0 of rank 4"},
        {"EinsumOutputLabelInNoOperand", resizeGraph([](onnx::GraphProto &G) {
           addStringAttr(*addNode(G, "Einsum", {"x"}, {"r"}, "sum"),
                         "equation", "bcij->bk");
         }),
         "node 'sum' (#0, op Einsum): output label 'k' is in no operand"},
        {"EinsumSummedLabelSizes", resizeGraph([](onnx::GraphProto &G) {
           addFloatInitializer(G, "w", {5, 5});
           addStringAttr(*addNode(G, "Einsum", {"x", "w"}, {"r"}, "mix"),
                         "equation", "bcij,jk->bcik");
         }),
         "node 'mix' (#0, op Einsum): label 'j' has sizes 6 and 5"},
        {"EinsumEllipsisSizes", resizeGraph([](onnx::GraphProto &G) {
           addFloatInitializer(G, "w", {3, 6, 2});
           addStringAttr(*addNode(G, "Einsum", {"x", "w"}, {"r"}, "mix"),
                         "equation", "...ij,...jk->...ik");
         }),
         "node 'mix' (#0, op Einsum): ellipsis dim 0 (from the right) has "
         "sizes 4 and 3"},
        {"EinsumDigitInOutput", resizeGraph([](onnx::GraphProto &G) {
           addStringAttr(*addNode(G, "Einsum", {"x"}, {"r"}, "sum"),
                         "equation", "...ij->...0");
         }),
         "node 'sum' (#0, op Einsum): equation output '...0' has '0'; only "
         "letters and one ellipsis are allowed"},
        {"EinsumWithoutEquation", resizeGraph([](onnx::GraphProto &G) {
           addNode(G, "Einsum", {"x"}, {"r"}, "sum");
         }),
         "node 'sum' (#0, op Einsum): the attribute 'equation' is required"},
        {"GatherElementsRank", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "idx", {0, 1});
           addNode(G, "GatherElements", {"x", "idx"}, {"r"}, "pick");
         }),
         "node 'pick' (#0, op GatherElements): indices [2] must have the rank "
         "of data [2,4,6,6]"},
        {"GatherElementsIndexOutOfRange",
         resizeGraph([](onnx::GraphProto &G) {
           onnx::TensorProto *Idx = addInt64Initializer(G, "idx", {0, 6});
           Idx->clear_dims();
           for (int64_t D : {1, 1, 1, 2})
             Idx->add_dims(D);
           addIntAttr(*addNode(G, "GatherElements", {"x", "idx"}, {"r"}, "pick"),
                      "axis", -1);
         }),
         "node 'pick' (#0, op GatherElements): index 6 is out of range for dim "
         "3 of size 6"},
        {"CumSumAxisAtRunTime", resizeGraph([](onnx::GraphProto &G) {
           addInput(G, "axis", {}, onnx::TensorProto::INT64);
           addNode(G, "CumSum", {"x", "axis"}, {"r"}, "scan");
         }),
         "node 'scan' (#0, op CumSum): input 'axis' (axis) must be a constant "
         "or computable from static shapes at import time"},
        {"CumSumTwoAxes", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "axis", {1, 2});
           addNode(G, "CumSum", {"x", "axis"}, {"r"}, "scan");
         }),
         "node 'scan' (#0, op CumSum): axis must be one integer, got i64 [2]"},
        {"CumSumAxisOutOfRange", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "axis", {-5});
           addNode(G, "CumSum", {"x", "axis"}, {"r"}, "scan");
         }),
         "node 'scan' (#0, op CumSum): axis -5 is out of range for input "
         "[2,4,6,6]"},
        {"CumSumExclusiveTwo", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "axis", {1});
           addIntAttr(*addNode(G, "CumSum", {"x", "axis"}, {"r"}, "scan"),
                      "exclusive", 2);
         }),
         "node 'scan' (#0, op CumSum): exclusive 2 is not supported (0 or 1)"},
        {"CumSumOfHalves", resizeGraph([](onnx::GraphProto &G) {
           G.clear_input();
           addInput(G, "x", {"batch", 4}, onnx::TensorProto::FLOAT16);
           addInt64Initializer(G, "axis", {1});
           addNode(G, "CumSum", {"x", "axis"}, {"r"}, "scan");
         }),
         "node 'scan' (#0, op CumSum): input of type f16 is not supported "
         "(f32, f64, i32 or i64)"},
        {"ResizeCubic", resizeGraph([](onnx::GraphProto &G) {
           addFloatInitializer(G, "scales", {4});
           onnx::NodeProto *N =
               addNode(G, "Resize", {"x", "", "scales"}, {"r"}, "up");
           addStringAttr(*N, "mode", "cubic");
         }),
         "node 'up' (#0, op Resize): mode 'cubic' is not supported (nearest "
         "and linear are)"},
        {"ResizeChannels", resizeGraph([](onnx::GraphProto &G) {
           addInt64Initializer(G, "sizes", {2, 8, 12, 12});
           addNode(G, "Resize", {"x", "", "", "sizes"}, {"r"}, "up");
         }),
         "node 'up' (#0, op Resize): resizes dim 1 of [2,4,6,6]; only the "
         "spatial dims (2 on) can be resized"},
        {"ResizeScalesAndSizes", resizeGraph([](onnx::GraphProto &G) {
           addFloatInitializer(G, "scales", {4});
           addInt64Initializer(G, "sizes", {2, 4, 12, 12});
           addNode(G, "Resize", {"x", "", "scales", "sizes"}, {"r"}, "up");
         }),
         "node 'up' (#0, op Resize): exactly one of scales and sizes must be "
         "given"},

        {"ResizeFloatSizes", resizeGraph([](onnx::GraphProto &G) {
           addFloatInitializer(G, "sizes", {4});
           addNode(G, "Resize", {"x", "", "", "sizes"}, {"r"}, "up");
         }),
         "node 'up' (#0, op Resize): sizes must be int64, it is f32"},
        {"ReduceFloatAxes",
         [](onnx::ModelProto &M, const TempDir &) {
           addFloatInitializer(graph(M), "axes", {1});
           addNode(graph(M), "ReduceSum", {"y", "axes"}, {"s"}, "sum");
           graph(M).mutable_output(0)->set_name("s");
         },
         "node 'sum' (#3, op ReduceSum): axes must be an integer tensor"},

        // Clip's bounds must be scalars of the input's type known at import
        // time; an infinite bound on the wrong side is not modelled.
        {"ClipBoundNotScalar",
         [](onnx::ModelProto &M, const TempDir &) {
           addFloatInitializer(graph(M), "lo", {2});
           addNode(graph(M), "Clip", {"y", "lo"}, {"c"}, "clip");
           graph(M).mutable_output(0)->set_name("c");
         },
         "node 'clip' (#3, op Clip): min must be a scalar, it has 2 elements"},
        {"ClipBoundAtRunTime",
         [](onnx::ModelProto &M, const TempDir &) {
           addNode(graph(M), "Clip", {"y", "", "y"}, {"c"}, "clip");
           graph(M).mutable_output(0)->set_name("c");
         },
         "node 'clip' (#3, op Clip): input 'y' (max) must be a constant"},
        {"ClipBoundOfAnotherType",
         [](onnx::ModelProto &M, const TempDir &) {
           addInt64Initializer(graph(M), "lo", {0});
           graph(M).mutable_initializer()->rbegin()->clear_dims();
           addNode(graph(M), "Clip", {"y", "lo"}, {"c"}, "clip");
           graph(M).mutable_output(0)->set_name("c");
         },
         "node 'clip' (#3, op Clip): min is i64, the input f32"},
        {"ClipMinPlusInfinity",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::TensorProto *Lo = addFloatInitializer(graph(M), "lo", {});
           float Inf = INFINITY;
           Lo->set_raw_data(std::string(reinterpret_cast<char *>(&Inf), 4));
           addNode(graph(M), "Clip", {"y", "lo"}, {"c"}, "clip");
           graph(M).mutable_output(0)->set_name("c");
         },
         "node 'clip' (#3, op Clip): min of +infinity is not supported"},

        // Constant: a value attribute of another type than its name says
        // was read as 0 or as nothing; two of them, the first taken.
        {"ConstantValueFloatOfTypeInt",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::NodeProto *N =
               addNode(graph(M), "Constant", {}, {"c"}, "const");
           addIntAttr(*N, "value_float", 3);
           graph(M).mutable_node(1)->set_input(1, "c");
         },
         "node 'const' (#3, op Constant): attribute 'value_float' must be a "
         "FLOAT"},
        {"ConstantValueIntsOfTypeFloats",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::NodeProto *N =
               addNode(graph(M), "Constant", {}, {"c"}, "const");
           onnx::AttributeProto *A = N->add_attribute();
           A->set_name("value_ints");
           A->set_type(onnx::AttributeProto::FLOATS);
           A->add_floats(1);
           graph(M).mutable_node(1)->set_input(1, "c");
         },
         "attribute 'value_ints' must be INTS"},
        {"ConstantTwoValues",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::NodeProto *N =
               addNode(graph(M), "Constant", {}, {"c"}, "const");
           addFloatAttr(*N, "value_float", 1);
           addIntAttr(*N, "value_int", 1);
           graph(M).mutable_node(1)->set_input(1, "c");
         },
         "Constant has 2 value attributes; it takes one"},

        // Structure.
        {"Cycle",
         [](onnx::ModelProto &M, const TempDir &) {
           // matmul reads relu's output: matmul -> add -> relu -> matmul.
           graph(M).mutable_node(0)->set_input(0, "y");
         },
         "the graph has a cycle through node 'matmul' (#0, op MatMul)"},
        {"SelfLoop",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->set_input(0, "y");
         },
         "cycle through node 'relu' (#2, op Relu)"},
        {"CycleThroughUnnamedNode",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->set_input(0, "y");
           graph(M).mutable_node(2)->clear_name();
         },
         "cycle through node 'Relu_2' (#2, op Relu)"},
        {"UndefinedInput",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(1)->set_input(1, "nowhere");
         },
         "node 'add' (#1, op Add) reads 'nowhere', which no node, input or "
         "initializer defines"},
        {"DuplicateNodeOutputs",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->set_output(0, "a");
         },
         "value 'a' is defined twice"},
        {"NodeOutputShadowsInput",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(0)->set_output(0, "x");
         },
         "value 'x' is defined twice"},
        {"DuplicateInitializers",
         [](onnx::ModelProto &M, const TempDir &) {
           addFloatInitializer(graph(M), "W", {4, 3});
         },
         "value 'W' is defined twice (initializer)"},
        {"DuplicateGraphOutputs",
         [](onnx::ModelProto &M, const TempDir &) { addOutput(graph(M), "y"); },
         "graph output 'y' is listed twice"},
        {"UndefinedGraphOutput",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_output(0)->set_name("nothing");
         },
         "graph output 'nothing' is not defined"},
        {"MissingRequiredInput",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(0)->mutable_input()->RemoveLast();
         },
         "node 'matmul' (#0, op MatMul): required input 1 is missing (the node "
         "has 1 input)"},
        {"NoInputs",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_node(2)->clear_input();
         },
         "node 'relu' (#2, op Relu): required input 0 is missing (the node has "
         "0 inputs)"},
        {"ReshapeMissingShape",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           addNode(G, "Reshape", {"y"}, {"r"}, "reshape");
           G.mutable_output(0)->set_name("r");
         },
         "node 'reshape' (#3, op Reshape): required input 1 is missing"},
        {"IdentityWithoutInput",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           addNode(G, "Identity", {}, {"i"}, "identity");
           addOutput(G, "i");
         },
         "node 'identity' (#3, op Identity): required input 0 is missing"},
        {"NodeWithoutOutputs",
         [](onnx::ModelProto &M, const TempDir &) {
           // The output-less nodes convert (to nothing) before reshape fails.
           onnx::GraphProto &G = graph(M);
           addNode(G, "Relu", {"y"}, {}, "sink");
           addNode(G, "Shape", {"y"}, {}, "shape");
           addReshape(M, {-2});
         },
         "node 'reshape' (#5, op Reshape): shape [-2] has a negative dim"},
        {"DuplicateGraphInputs",
         [](onnx::ModelProto &M, const TempDir &) {
           addInput(graph(M), "x", {"batch", 4});
         },
         "value 'x' is defined twice (graph input)"},

        // Initializers.
        {"InitializerWrongByteLength",
         [](onnx::ModelProto &M, const TempDir &) {
           findInitializer(graph(M), "W")->mutable_raw_data()->resize(12);
         },
         "initializer 'W': raw_data has 12 bytes, but f32 [4,3] needs 48"},
        {"InitializerNegativeDim",
         [](onnx::ModelProto &M, const TempDir &) {
           findInitializer(graph(M), "W")->set_dims(0, -4);
         },
         "initializer 'W': dims [-4,3] are negative or too large"},
        {"InitializerOverflowingDims",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::TensorProto *W = findInitializer(graph(M), "W");
           W->set_dims(0, int64_t(1) << 40);
           W->set_dims(1, int64_t(1) << 40);
         },
         "initializer 'W': dims [1099511627776,1099511627776] are negative or "
         "too large"},
        {"InitializerTypedFieldsWrongCount",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::TensorProto *B = findInitializer(graph(M), "b");
           B->clear_raw_data();
           B->add_float_data(1);
           B->add_float_data(2);
         },
         "initializer 'b'"},
        {"InitializerUnsupportedType",
         [](onnx::ModelProto &M, const TempDir &) {
           findInitializer(graph(M), "b")
               ->set_data_type(onnx::TensorProto::STRING);
         },
         "initializer 'b': element type"},
        {"InitializerNoName",
         [](onnx::ModelProto &M, const TempDir &) {
           addFloatInitializer(graph(M), "", {2});
         },
         "an initializer has no name"},

        // Graph inputs.
        {"InputNegativeDim",
         [](onnx::ModelProto &M, const TempDir &) {
           setInputDims(M, {"batch", -4});
         },
         "input 'x' has negative dim 1 (-4)"},
        {"InputOverflowingDims",
         [](onnx::ModelProto &M, const TempDir &) {
           setInputDims(M, {int64_t(1) << 40, int64_t(1) << 40});
         },
         "input 'x' shape [1099511627776,1099511627776] is too large"},
        {"InputNotATensor",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_input(0)->mutable_type()->mutable_sequence_type();
         },
         "input 'x' is not a tensor"},
        {"InputNoShape",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M)
               .mutable_input(0)
               ->mutable_type()
               ->mutable_tensor_type()
               ->clear_shape();
         },
         "input 'x' has no shape"},

        // Reshape targets.
        {"ReshapeNegativeTarget",
         [](onnx::ModelProto &M, const TempDir &) {
           addReshape(M, {2, -3});
         },
         "node 'reshape' (#3, op Reshape): shape [2,-3] has a negative dim"},
        {"ReshapeOverflowingTarget",
         [](onnx::ModelProto &M, const TempDir &) {
           addReshape(M, {int64_t(1) << 40, int64_t(1) << 40});
         },
         "node 'reshape' (#3, op Reshape): shape [1099511627776,1099511627776] "
         "is too large"},
        {"ReshapeWrongCount",
         [](onnx::ModelProto &M, const TempDir &) {
           addReshape(M, {5, 5});
         },
         "node 'reshape' (#3, op Reshape)"},
        {"ReshapeTwoInferred",
         [](onnx::ModelProto &M, const TempDir &) {
           addReshape(M, {-1, -1});
         },
         "shape [-1,-1] has more than one -1"},

        {"ExpandNegativeShape",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           addInt64Initializer(G, "target", {-2, 3});
           addNode(G, "Expand", {"y", "target"}, {"e"}, "expand");
           G.mutable_output(0)->set_name("e");
         },
         "node 'expand' (#3, op Expand)"},
        {"ConstantOfShapeHuge",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           addInt64Initializer(G, "target", {int64_t(1) << 40, 1 << 20});
           addNode(G, "ConstantOfShape", {"target"}, {"c"}, "fill");
           addOutput(G, "c");
         },
         "node 'fill' (#3, op ConstantOfShape)"},
        {"RangeHuge",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           addInt64Initializer(G, "start", {0})->clear_dims();
           addInt64Initializer(G, "limit", {int64_t(1) << 60})->clear_dims();
           addInt64Initializer(G, "delta", {1})->clear_dims();
           addNode(G, "Range", {"start", "limit", "delta"}, {"n"}, "range");
           addOutput(G, "n");
         },
         "node 'range' (#3, op Range): Range of "},
        // An integer start with a float delta read integers the delta does
        // not have: a segmentation fault.
        {"RangeMixedTypes",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           addInt64Initializer(G, "start", {0})->clear_dims();
           addInt64Initializer(G, "limit", {5})->clear_dims();
           addInt64Initializer(G, "step", {1})->clear_dims();
           addIntAttr(*addNode(G, "Cast", {"step"}, {"delta"}, "cast"), "to",
                      onnx::TensorProto::FLOAT);
           addNode(G, "Range", {"start", "limit", "delta"}, {"n"}, "range");
           addOutput(G, "n");
         },
         "node 'range' (#4, op Range): Range inputs must have one type "
         "(start i64, limit i64, delta f32)"},

        // Attributes.
        {"WrongAttributeType",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::GraphProto &G = graph(M);
           onnx::NodeProto *N = addNode(G, "Flatten", {"y"}, {"f"}, "flatten");
           addFloatAttr(*N, "axis", 1.5f);
           G.mutable_output(0)->set_name("f");
         },
         "node 'flatten' (#3, op Flatten): attribute 'axis' must be an INT"},
        {"UnknownAttribute",
         [](onnx::ModelProto &M, const TempDir &) {
           addIntAttr(*graph(M).mutable_node(2), "bogus", 1);
         },
         "node 'relu' (#2, op Relu): attribute 'bogus' is not supported"},

        // Symbolic dims and flags.
        {"SymbolicDimNotBound", [](onnx::ModelProto &, const TempDir &) {},
         "input 'x' dim 0 is symbolic ('batch'); give its size with --batch N "
         "or --dim batch=N",
         dims({})},
        {"OtherSymbolicDimNotBound",
         [](onnx::ModelProto &M, const TempDir &) {
           setInputDims(M, {"batch", "features"});
         },
         "input 'x' dim 1 is symbolic ('features'); give its size with --dim "
         "features=N"},
        {"DimForUnknownName", [](onnx::ModelProto &, const TempDir &) {},
         "--dim seq=5: the model's inputs have no symbolic dim 'seq'",
         dims({{"seq", 5}}, 2)},
        // The batch dim given two sizes: --dim's used to win silently.
        {"DimDisagreesWithBatch", [](onnx::ModelProto &, const TempDir &) {},
         "--dim batch=4: 'batch' is the model's batch dim, which --batch 8 "
         "binds to 8",
         dims({{"batch", 4}}, 8)},
        // A batch size no input takes: the model's fixed size was used
        // silently.
        {"BatchBindsNothing",
         [](onnx::ModelProto &M, const TempDir &) {
           setInputDims(M, {3, 4});
         },
         "--batch 2: no input of the model has a batch dim to bind (input "
         "'x' dim 0 is fixed at 3: give --batch 3, or export the model with a "
         "symbolic batch dim)"},
        {"NegativeBatch", [](onnx::ModelProto &, const TempDir &) {},
         "--batch -3: must be positive", batch(-3)},
        // "give the batch with --batch N" even with --batch given.
        {"UnnamedInnerDim",
         [](onnx::ModelProto &M, const TempDir &) {
           graph(M).mutable_input(0)->mutable_type()->mutable_tensor_type()
               ->mutable_shape()->mutable_dim(1)->Clear();
         },
         "input 'x' dim 1 has neither a size nor a name, so no flag can give "
         "it one"},
        {"NegativeDimFlag", [](onnx::ModelProto &, const TempDir &) {},
         "--dim batch=-1: must not be negative", dims({{"batch", -1}})},

        // External data.
        // A shape stored as external data whose file is absent: the
        // message named neither the file nor why.
        {"ExternalShapeAbsent",
         [](onnx::ModelProto &M, const TempDir &) {
           addReshape(M, {2, -1});
           setExternalData(*findInitializer(graph(M), "target"), "shape.bin",
                           0, 16);
         },
         "node 'reshape' (#3, op Reshape): input 'target' (shape) is needed "
         "at import time, but cannot open external data '"},
        {"ExternalAbsolutePath",
         [](onnx::ModelProto &M, const TempDir &) {
           setExternalData(*findInitializer(graph(M), "W"), "/etc/passwd", 0,
                           48);
         },
         "initializer 'W': external data location '/etc/passwd' is absolute"},
        {"ExternalEscapesFolder",
         [](onnx::ModelProto &M, const TempDir &) {
           setExternalData(*findInitializer(graph(M), "W"), "../weights.bin", 0,
                           48);
         },
         "initializer 'W': external data location '../weights.bin' leaves the "
         "model's folder"},
        {"ExternalEscapesFolderInside",
         [](onnx::ModelProto &M, const TempDir &) {
           setExternalData(*findInitializer(graph(M), "W"),
                           "sub/../../weights.bin", 0, 48);
         },
         "leaves the model's folder"},
        {"ExternalNoLocation",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::TensorProto *W = findInitializer(graph(M), "W");
           setExternalData(*W, "w.bin", 0, 48);
           W->mutable_external_data()->DeleteSubrange(0, 1);
         },
         "initializer 'W': external data has no location"},
        {"ExternalWrongLength",
         [](onnx::ModelProto &M, const TempDir &) {
           setExternalData(*findInitializer(graph(M), "W"), "w.bin", 0, 40);
         },
         "initializer 'W': external data length 40 does not match 48 bytes"},
        {"ExternalBadOffset",
         [](onnx::ModelProto &M, const TempDir &) {
           onnx::TensorProto *W = findInitializer(graph(M), "W");
           setExternalData(*W, "w.bin", -1, -1);
           onnx::StringStringEntryProto *E = W->add_external_data();
           E->set_key("offset");
           E->set_value("-8");
         },
         "initializer 'W': external data offset '-8' is not a non-negative "
         "integer"},
        {"ExternalFileTooShort",
         [](onnx::ModelProto &M, const TempDir &Dir) {
           setExternalData(*findInitializer(graph(M), "W"), "w.bin", 0, 48);
           writeBytes(Dir.file("w.bin"), std::string(20, '\0'));
         },
         "initializer 'W': external data file 'w.bin' has 20 bytes, but the "
         "tensor needs 48 bytes at offset 0"},
        {"ExternalOffsetPastEnd",
         [](onnx::ModelProto &M, const TempDir &Dir) {
           setExternalData(*findInitializer(graph(M), "W"), "w.bin", 64, 48);
           writeBytes(Dir.file("w.bin"), std::string(100, '\0'));
         },
         "initializer 'W': external data file 'w.bin' has 100 bytes, but the "
         "tensor needs 48 bytes at offset 64"},
        {"ExternalHugeOffset",
         [](onnx::ModelProto &M, const TempDir &Dir) {
           setExternalData(*findInitializer(graph(M), "W"), "w.bin", 0, 48);
           auto *Offset =
               findInitializer(graph(M), "W")->mutable_external_data(1);
           Offset->set_value("18446744073709551610");
           writeBytes(Dir.file("w.bin"), std::string(100, '\0'));
         },
         "initializer 'W': external data file 'w.bin' has 100 bytes, but the "
         "tensor needs 48 bytes at offset 18446744073709551610"},
        {"ExternalLocationIsFolder",
         [](onnx::ModelProto &M, const TempDir &Dir) {
           setExternalData(*findInitializer(graph(M), "W"), "sub", 0, 48);
           llvm::sys::fs::create_directory(Dir.file("sub"));
         },
         "initializer 'W': external data location 'sub' is a folder"},
};

void PrintTo(const BadModelCase &Case, std::ostream *OS) { *OS << Case.Name; }

class BadModelTest : public ::testing::TestWithParam<BadModelCase> {};

TEST_P(BadModelTest, Rejects) {
  TempDir Dir("onnx2soap-badinput");
  ASSERT_TRUE(Dir.valid());
  onnx::ModelProto Model = makeModel();
  GetParam().Mutate(Model, Dir);
  std::string Path = Dir.file("model.onnx");
  ASSERT_TRUE(writeModel(Model, Path));
  expectErr(Path, GetParam().Options, GetParam().Expected);
}

INSTANTIATE_TEST_SUITE_P(
    BadInputTest, BadModelTest, ::testing::ValuesIn(BadModelCases),
    [](const ::testing::TestParamInfo<BadModelCase> &Info) {
      return std::string(Info.param.Name);
    });

} // namespace
