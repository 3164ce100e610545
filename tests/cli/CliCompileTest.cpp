//===- tests/cli/CliCompileTest.cpp - compile -----------------------------===//
//
// `compile` must write a complete project, the same bytes on every run, and
// leave folders that are not its own alone (building and running projects:
// tests/codegen/).
//
//===----------------------------------------------------------------------===//
#include "CliTestUtil.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"
#include "gmock/gmock.h"
#include <fstream>
#include <map>

using namespace onnx2soap::testing;
using namespace onnx2soap::clitest;

namespace {

std::string fixturePath(llvm::StringRef Name, llvm::StringRef File) {
  return (llvm::Twine(ONNX2SOAP_SOURCE_DIR) + "/tests/fixtures/" + Name + "/" +
          File)
      .str();
}

/// `compile` of the CNN fixture (its weights are in the file) for two CPU
/// ranks, SGD with lr 0.1, plus More.
std::vector<std::string> compileArgs(std::vector<std::string> More) {
  std::vector<std::string> Args{
      "compile",     fixturePath("cnn_bn", "model.onnx"),
      "--batch",     "8",
      "--cluster",   "cpu:2",
      "--optimizer", "sgd",
      "--lr",        "0.1"};
  Args.insert(Args.end(), More.begin(), More.end());
  return Args;
}

/// Every file under Root, by path relative to Root, with its bytes.
std::map<std::string, std::string> readTree(llvm::StringRef Root) {
  std::map<std::string, std::string> Tree;
  std::error_code EC;
  for (llvm::sys::fs::recursive_directory_iterator It(Root, EC), End;
       !EC && It != End; It.increment(EC)) {
    if (!llvm::sys::fs::is_regular_file(It->path()))
      continue;
    llvm::StringRef Path = It->path();
    llvm::StringRef Relative = Path.drop_front(Root.size()).ltrim('/');
    Tree[Relative.str()] = readFile(Path);
  }
  EXPECT_FALSE(EC) << Root.str() << ": " << EC.message();
  return Tree;
}

/// The names beside Out that begin with Out's: what compile left there.
std::vector<std::string> besides(llvm::StringRef Out) {
  std::vector<std::string> Names;
  std::string Prefix = (llvm::sys::path::filename(Out) + ".").str();
  std::error_code EC;
  for (llvm::sys::fs::directory_iterator
           It(llvm::sys::path::parent_path(Out), EC),
       End;
       !EC && It != End; It.increment(EC)) {
    llvm::StringRef Name = llvm::sys::path::filename(It->path());
    if (Name.startswith(Prefix))
      Names.push_back(Name.str());
  }
  std::sort(Names.begin(), Names.end());
  return Names;
}

std::string sha256Hex(llvm::StringRef Bytes) {
  auto Digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(Bytes));
  return llvm::toHex(Digest, /*LowerCase=*/true);
}

TEST_F(CliTest, CompileRefusesBadFlags) {
  expectUserError(run(compileArgs({"--strategy", "data-parallel"})),
                  "-o DIR is required");
  std::string Out = Dir.file("project");
  expectUserError(run(compileArgs({"--strategy", "data-parallel", "--init",
                                   "zeros", "-o", Out})),
                  "--init zeros: expected onnx or random");
  // compile accepts every optimizer the program runs, adamw too.
  std::vector<std::string> Bare{
      "compile",    fixturePath("cnn_bn", "model.onnx"),
      "--batch",    "8",
      "--cluster",  "cpu:2",
      "--strategy", "data-parallel",
      "-o",         Out};
  auto With = [&](std::vector<std::string> More) {
    std::vector<std::string> Args = Bare;
    Args.insert(Args.end(), More.begin(), More.end());
    return Args;
  };
  expectUserError(run(With({"--optimizer", "lbfgs"})),
                  "--optimizer lbfgs: expected sgd, momentum, adam or adamw");
  expectUserError(run(With({"--lr", "0"})), "--lr must be positive");
  // Flags that did nothing were taken without a word.
  expectUserError(run(With({"--optimizer", "adam", "--momentum", "0.5"})),
                  "--momentum is for SGD only, not --optimizer adam");
  expectUserError(run(With({"--budget", "5"})),
                  "--budget sizes the search, which --strategy data-parallel "
                  "skips: give one or the other");
  expectUserError(run(With({"--seed", "5"})),
                  "--seed seeds the search and --init random, neither of "
                  "which runs with --strategy data-parallel and --init onnx");
  expectUserError(run(With({"--iterations", "5"})),
                  "--iterations sizes the search, which --strategy "
                  "data-parallel skips");
  expectUserError(
      run(compileArgs({"--budget", "1", "--iterations", "3", "-o", Out})),
      "--budget and --iterations exclude each other");
  expectUserError(run(compileArgs({"--budget", "-1", "-o", Out})),
                  "--budget must be a positive number of seconds");
  // An infinite budget searched forever; --iterations 0 ran the 10 s
  // budget instead.
  expectUserError(run(compileArgs({"--budget", "inf", "-o", Out})),
                  "--budget must be a positive number of seconds");
  expectUserError(run(compileArgs({"--iterations", "0", "-o", Out})),
                  "--iterations must be at least 1");
  EXPECT_FALSE(llvm::sys::fs::exists(Out));
}

// Names go into plan.cpp's comments and the templates' comment lines: a
// tensor name ending in a backslash spliced the next table row into its
// comment (the table one row short of its recorded size), and a cluster
// name with a newline put a line of its own into CMakeLists.txt.
TEST_F(CliTest, NamesCannotBreakTheGeneratedSources) {
  std::string Model = readFile(samplePath("tiny_mlp.onnx"));
  size_t Renamed = 0;
  for (size_t At = Model.find("2.weight"); At != std::string::npos;
       At = Model.find("2.weight", At + 1), ++Renamed)
    Model.replace(At, 8, "2.weigh\\");
  ASSERT_EQ(Renamed, 2u);
  std::string ModelPath = Dir.file("odd.onnx");
  { std::ofstream(ModelPath, std::ios::binary) << Model; }
  RunResult Shown = run({"clusters", "--show", "cpu:2"});
  ASSERT_EQ(Shown.ExitCode, 0) << Shown.Err;
  std::string Cluster = Shown.Out;
  size_t Name = Cluster.find("\"cpu:2\"");
  ASSERT_NE(Name, std::string::npos) << Cluster;
  Cluster.replace(Name, 7, "\"odd\\nmessage(FATAL_ERROR injected) @MODEL@\"");
  std::string ClusterPath = Dir.file("odd-cluster.json");
  { std::ofstream(ClusterPath) << Cluster; }
  std::string Out = Dir.file("odd-project");
  RunResult R = run({"compile", ModelPath, "--batch", "4", "--cluster",
                     ClusterPath, "--strategy", "data-parallel", "-o", Out});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  std::string Plan = readFile(Out + "/src/plan.cpp");
  EXPECT_EQ(Plan.find("\\\n"), std::string::npos)
      << "a line of plan.cpp ends in a backslash";
  EXPECT_NE(Plan.find("2.weigh\\134"), std::string::npos);
  llvm::SmallVector<llvm::StringRef, 8> Lines;
  llvm::StringRef(readFile(Out + "/CMakeLists.txt"))
      .split(Lines, '\n', /*MaxSplit=*/6);
  ASSERT_GE(Lines.size(), 5u);
  for (unsigned I = 0; I < 5; ++I)
    EXPECT_TRUE(Lines[I].startswith("#")) << Lines[I].str();
  EXPECT_NE(Lines[1].str().find("odd?message(FATAL_ERROR injected) @MODEL@"),
            std::string::npos)
      << Lines[1].str();
}

// The README names the optimizer the program runs, as strategy.json's
// prediction does: --optimizer momentum --momentum 0 is plain SGD.
TEST_F(CliTest, TheReadmeNamesTheOptimizerThatRuns) {
  struct Case {
    std::vector<std::string> Flags;
    const char *Readme;
  } Cases[] = {
      {{}, "by SGD with momentum 0.9 on"},
      {{"--optimizer", "momentum", "--momentum", "0"}, "by SGD on"},
      {{"--optimizer", "sgd", "--momentum", "0.5"},
       "by SGD with momentum 0.5 on"},
      {{"--optimizer", "adamw"}, "by AdamW on"},
  };
  for (const Case &C : Cases) {
    std::string Out = Dir.file("readme-project");
    std::vector<std::string> Args{
        "compile",    fixturePath("cnn_bn", "model.onnx"),
        "--batch",    "8",
        "--cluster",  "cpu:2",
        "--strategy", "data-parallel",
        "-o",         Out};
    Args.insert(Args.end(), C.Flags.begin(), C.Flags.end());
    RunResult R = run(Args);
    ASSERT_EQ(R.ExitCode, 0) << R.Err;
    EXPECT_THAT(readFile(Out + "/README.md"), ::testing::HasSubstr(C.Readme));
  }
}

TEST_F(CliTest, CompileRefusesAStrategyForAnotherCluster) {
  std::string Strategy = Dir.file("cpu2.json");
  RunResult Search = run({"search", fixturePath("cnn_bn", "model.onnx"),
                          "--batch", "8", "--cluster", "cpu:2", "--optimizer",
                          "sgd", "--iterations", "20", "-o", Strategy});
  ASSERT_EQ(Search.ExitCode, 0) << Search.Err;
  std::string Out = Dir.file("project");
  RunResult R = run({"compile", fixturePath("cnn_bn", "model.onnx"), "--batch",
                     "8", "--cluster", "cpu:4", "--optimizer", "sgd",
                     "--strategy", Strategy, "-o", Out});
  expectUserError(R, Strategy + " was made for cluster 'cpu:2' with 2 devices");
  EXPECT_THAT(R.Err, ::testing::HasSubstr("not 'cpu:4' with 4 devices"));
  EXPECT_FALSE(llvm::sys::fs::exists(Out));
}

// search explores only configs generated programs can run, so its answer
// always compiles: an LSTM op (not unrolled), slices of encoder states, a
// concatenation and padded pools, on 4 ranks.
TEST_F(CliTest, SearchedStrategiesCompile) {
  struct Case {
    const char *Fixture;
    const char *Batch;
  } Cases[] = {{"lstm_lm", "4"}, {"seq2seq", "4"}, {"inception_mini", "8"}};
  for (const Case &C : Cases) {
    for (const char *Space : {"", "--any-config"}) {
      std::string Strategy =
          Dir.file(std::string(C.Fixture) + (*Space ? "-any" : "") + ".json");
      std::vector<std::string> Args{
          "search",       fixturePath(C.Fixture, "model.onnx"),
          "--batch",      C.Batch,
          "--cluster",    "cpu:4",
          "--iterations", "200",
          "--seed",       "1",
          "-o",           Strategy};
      if (*Space)
        Args.push_back(Space);
      RunResult Search = run(Args);
      ASSERT_EQ(Search.ExitCode, 0)
          << C.Fixture << " " << Space << ": " << Search.Err;
      if (*Space)
        continue; // the whole space: compile may refuse its answer
      std::string Out = Dir.file(std::string(C.Fixture) + "-project");
      RunResult R = run({"compile", fixturePath(C.Fixture, "model.onnx"),
                         "--batch", C.Batch, "--cluster", "cpu:4", "--strategy",
                         Strategy, "-o", Out});
      EXPECT_EQ(R.ExitCode, 0) << C.Fixture << ": " << R.Err;
    }
  }
}

TEST_F(CliTest, CompileLeavesAFolderThatIsNotAProjectAlone) {
  std::string Out = Dir.file("notes");
  ASSERT_FALSE(llvm::sys::fs::create_directory(Out));
  ASSERT_TRUE(writeBytes(Out + "/todo.txt", "buy milk\n"));
  expectUserError(run(compileArgs({"--strategy", "data-parallel", "-o", Out})),
                  "-o " + Out +
                      ": the folder is not empty and holds no generated "
                      "project (manifest.json)");
  std::map<std::string, std::string> Tree = readTree(Out);
  EXPECT_EQ(Tree,
            (std::map<std::string, std::string>{{"todo.txt", "buy milk\n"}}));
  EXPECT_THAT(besides(Out), ::testing::IsEmpty());
  // Before any work: the folder was refused only after the search (and
  // here the model, which does not exist, would have been the error).
  expectUserError(run({"compile", Dir.file("missing.onnx"), "--batch", "8",
                       "--cluster", "cpu:2", "-o", Out}),
                  "-o " + Out + ": the folder is not empty");
}

// A project written before is replaced, its build/ folder with it, but not
// a file it did not write (a job script put beside its sources, a
// checkpoint), and not a folder whose manifest.json is no project's.
TEST_F(CliTest, CompileReplacesOnlyWhatAProjectWrote) {
  std::string Out = Dir.file("project");
  RunResult First =
      run(compileArgs({"--strategy", "data-parallel", "-o", Out}));
  ASSERT_EQ(First.ExitCode, 0) << First.Err;
  ASSERT_FALSE(llvm::sys::fs::create_directory(Out + "/build"));
  ASSERT_TRUE(writeBytes(Out + "/build/CMakeCache.txt", "x\n"));
  ASSERT_TRUE(writeBytes(Out + "/src/job.sh", "srun ./train\n"));
  std::map<std::string, std::string> Before = readTree(Out);
  expectUserError(run(compileArgs({"--strategy", "expert", "-o", Out})),
                  "-o " + Out +
                      ": holds src/job.sh, which the project written there "
                      "did not write; move it or choose another folder");
  EXPECT_EQ(readTree(Out), Before);
  ASSERT_FALSE(llvm::sys::fs::remove(Out + "/src/job.sh"));
  // "DIR//" is the same folder (its files were taken for others', their
  // names cut short).
  RunResult Again =
      run(compileArgs({"--strategy", "expert", "-o", Out + "//"}));
  ASSERT_EQ(Again.ExitCode, 0) << Again.Err;
  EXPECT_FALSE(llvm::sys::fs::exists(Out + "/build"));

  for (const char *Manifest : {"dir", "{}"}) {
    std::string Other = Dir.file(std::string("other-") + Manifest);
    ASSERT_FALSE(llvm::sys::fs::create_directory(Other));
    ASSERT_TRUE(writeBytes(Other + "/todo.txt", "buy milk\n"));
    if (std::string(Manifest) == "dir")
      ASSERT_FALSE(llvm::sys::fs::create_directory(Other + "/manifest.json"));
    else
      ASSERT_TRUE(writeBytes(Other + "/manifest.json", Manifest));
    RunResult R =
        run(compileArgs({"--strategy", "data-parallel", "-o", Other}));
    EXPECT_EQ(R.ExitCode, 2) << Manifest << ": " << R.Err;
    EXPECT_THAT(R.Err, ::testing::HasSubstr(
                           "-o " + Other +
                           ": the folder is not empty and holds no generated "
                           "project"))
        << Manifest;
    EXPECT_EQ(readFile(Other + "/todo.txt"), "buy milk\n") << Manifest;
  }
}

// When nothing the search found fits, compile writes nothing, as search
// does: the program would not start (it was written with a warning).
TEST_F(CliTest, CompileRefusesASearchWhereNothingFits) {
  std::string Out = Dir.file("project");
  RunResult R = run(sampleArgs("compile", "tiny_cnn.onnx", 1 << 20, "cpu:2",
                               {"--iterations", "10", "-o", Out}));
  expectUserError(R, "no strategy found fits in 4 GiB per device on 2 "
                     "devices: the smallest peak found is ");
  EXPECT_THAT(
      R.Err, ::testing::EndsWith("; give more devices (--gpus), or compile the "
                                 "strategy file of a search with --objective "
                                 "memory\n"));
  EXPECT_FALSE(llvm::sys::fs::exists(Out));
  EXPECT_THAT(besides(Out), ::testing::IsEmpty());
}

// Nothing but build/ is taken for the project's own unless its manifest
// lists it: not an empty folder of the user's (it would have gone with the
// old tree), nor a file named build.
TEST_F(CliTest, CompileKeepsEmptyFoldersAndAFileNamedBuild) {
  std::string Out = Dir.file("project");
  RunResult First =
      run(compileArgs({"--strategy", "data-parallel", "-o", Out}));
  ASSERT_EQ(First.ExitCode, 0) << First.Err;

  ASSERT_FALSE(llvm::sys::fs::create_directories(Out + "/runs/2026"));
  ASSERT_FALSE(llvm::sys::fs::create_directory(Out + "/src/old"));
  expectUserError(run(compileArgs({"--strategy", "expert", "-o", Out})),
                  "-o " + Out +
                      ": holds runs/2026/ (and 1 more), which the project "
                      "written there did not write");
  EXPECT_TRUE(llvm::sys::fs::is_directory(Out + "/runs/2026"));
  EXPECT_TRUE(llvm::sys::fs::is_directory(Out + "/src/old"));
  ASSERT_FALSE(llvm::sys::fs::remove(Out + "/runs/2026"));
  ASSERT_FALSE(llvm::sys::fs::remove(Out + "/runs"));
  expectUserError(run(compileArgs({"--strategy", "expert", "-o", Out})),
                  "-o " + Out + ": holds src/old/, which");
  ASSERT_FALSE(llvm::sys::fs::remove(Out + "/src/old"));

  ASSERT_TRUE(writeBytes(Out + "/build", "notes\n"));
  expectUserError(run(compileArgs({"--strategy", "expert", "-o", Out})),
                  "-o " + Out + ": holds build, which");
  EXPECT_EQ(readFile(Out + "/build"), "notes\n");
  ASSERT_FALSE(llvm::sys::fs::remove(Out + "/build"));
  RunResult Again = run(compileArgs({"--strategy", "expert", "-o", Out}));
  EXPECT_EQ(Again.ExitCode, 0) << Again.Err;
}

// -o's folder named the ways a shell gives it: through "." (it could not
// be renamed), below a file (the error named a folder "cannot be created"),
// or as a link (the link was replaced, the project it named left as it
// was).
TEST_F(CliTest, CompileNamesTheFolderItCannotUse) {
  std::string Empty = Dir.file("empty");
  ASSERT_FALSE(llvm::sys::fs::create_directory(Empty));
  RunResult Dot =
      run(compileArgs({"--strategy", "data-parallel", "-o", Empty + "/."}));
  ASSERT_EQ(Dot.ExitCode, 0) << Dot.Err;
  EXPECT_TRUE(llvm::sys::fs::is_regular_file(Empty + "/manifest.json"));
  EXPECT_THAT(besides(Empty), ::testing::IsEmpty());

  std::string Notes = Dir.file("notes.txt");
  ASSERT_TRUE(writeBytes(Notes, "x\n"));
  expectUserError(run(compileArgs({"--strategy", "data-parallel", "-o",
                                   Notes + "/project"})),
                  "-o " + Notes + "/project: " + Notes + " is not a folder");

  // ".." below a folder that does not exist: collapsed as text it named a
  // folder never checked (here results/, which was replaced).
  std::string Results = Dir.file("results");
  ASSERT_FALSE(llvm::sys::fs::create_directory(Results));
  ASSERT_TRUE(writeBytes(Results + "/run.log", "loss 0.1\n"));
  expectUserError(run(compileArgs({"--strategy", "data-parallel", "-o",
                                   Dir.file("typo") + "/../results"})),
                  "/../results: '..' follows a folder that does not exist");
  EXPECT_EQ(readTree(Results),
            (std::map<std::string, std::string>{{"run.log", "loss 0.1\n"}}));
  EXPECT_FALSE(llvm::sys::fs::exists(Dir.file("typo")));

  std::string Link = Dir.file("link");
  ASSERT_FALSE(llvm::sys::fs::create_link(Empty, Link));
  expectUserError(
      run(compileArgs({"--strategy", "data-parallel", "-o", Link + "/"})),
      "-o " + Link + ": is a symbolic link; give the folder it points to");
  EXPECT_TRUE(llvm::sys::fs::is_symlink_file(Link));
}

TEST_F(CliTest, CompileWritesTheProject) {
  std::string Out = Dir.file("cnn_bn-cpu2");
  RunResult R = run(compileArgs({"--strategy", "data-parallel", "-o", Out}));
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_EQ(R.Err, "");
  EXPECT_THAT(R.Out, ::testing::StartsWith("wrote " + Out +
                                           ": 2 ranks on cpu:2, strategy "
                                           "data-parallel, predicted "));
  std::map<std::string, std::string> Tree = readTree(Out);
  for (const char *File :
       {"manifest.json", "CMakeLists.txt", "src/plan.cpp", "src/main.cpp",
        "weights/shards.bin", "strategy.json", "model.onnx", "README.md"})
    EXPECT_FALSE(Tree[File].empty()) << File;
  EXPECT_EQ(Tree["model.onnx"], readFile(fixturePath("cnn_bn", "model.onnx")));
  // The README states the prediction as compile reported it (in a unit that
  // shows its digits: a step of microseconds once read "0.00 s").
  llvm::StringRef Predicted = llvm::StringRef(R.Out)
                                  .split(", predicted ")
                                  .second.split(" per step")
                                  .first;
  EXPECT_THAT(Predicted.str(), ::testing::MatchesRegex("[0-9.]+ (us|ms|s)"));
  EXPECT_THAT(Tree["README.md"],
              ::testing::HasSubstr("the planner predicted " + Predicted.str() +
                                   " per training step"));

  // The manifest lists every other file with its SHA-256.
  auto Parsed = llvm::json::parse(Tree["manifest.json"]);
  ASSERT_TRUE(static_cast<bool>(Parsed)) << llvm::toString(Parsed.takeError());
  const llvm::json::Object *Manifest = Parsed->getAsObject();
  ASSERT_NE(Manifest, nullptr);
  EXPECT_EQ(Manifest->getString("format").getValueOr(""), "onnx2soap-project");
  EXPECT_EQ(Manifest->getString("backend").getValueOr(""), "cpu");
  EXPECT_EQ(Manifest->getInteger("ranks").getValueOr(0), 2);
  const llvm::json::Object *Hashes = Manifest->getObject("files");
  ASSERT_NE(Hashes, nullptr);
  EXPECT_EQ(Hashes->size() + 1, Tree.size());
  for (const auto &[Path, Bytes] : Tree) {
    if (Path == "manifest.json")
      continue;
    EXPECT_EQ(Hashes->getString(Path).getValueOr(""), sha256Hex(Bytes)) << Path;
  }

  // The strategy the project was made with reads back for the same
  // settings.
  RunResult Simulated =
      run({"simulate", fixturePath("cnn_bn", "model.onnx"), "--batch", "8",
           "--cluster", "cpu:2", "--optimizer", "sgd", "--strategy",
           Out + "/strategy.json"});
  EXPECT_EQ(Simulated.ExitCode, 0) << Simulated.Err;

  // A folder holding a project is replaced by the new one.
  RunResult Again = run(compileArgs({"--strategy", "expert", "-o", Out}));
  ASSERT_EQ(Again.ExitCode, 0) << Again.Err;
  EXPECT_THAT(Again.Out, ::testing::HasSubstr("strategy expert"));
  EXPECT_THAT(besides(Out), ::testing::IsEmpty());
}

// -o a/b/project makes a/b (make demo's build/demo/...): the temporary
// tree's folder, made beside DIR, once needed it to exist.
// And a relative -o is beside the working folder's DIR: the temporary
// tree once went to the system's temporary folder, where a/b was missing.
TEST_F(CliTest, CompileMakesTheFoldersAboveTheProject) {
  std::string Out = Dir.file("a/b/project");
  RunResult R = run(compileArgs({"--strategy", "data-parallel", "-o", Out}));
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_TRUE(llvm::sys::fs::is_regular_file(Out + "/manifest.json"));
  EXPECT_THAT(besides(Out), ::testing::IsEmpty());
  if (!llvm::sys::fs::can_execute("/bin/sh"))
    GTEST_SKIP() << "no /bin/sh";
  std::string Err;
  EXPECT_EQ(
      runIn(Dir.file(""),
            compileArgs({"--strategy", "data-parallel", "-o", "c/d/project"}),
            &Err, Dir.file("stderr-relative.txt")),
      0)
      << Err;
  EXPECT_TRUE(
      llvm::sys::fs::is_regular_file(Dir.file("c/d/project/manifest.json")));
  EXPECT_THAT(besides(Dir.file("c/d/project")), ::testing::IsEmpty());
}

// Folders beside DIR of the names compile used for its temporary trees
// (DIR.tmp-onnx2soap, DIR.old-onnx2soap) were removed unchecked, whatever
// they held.
TEST_F(CliTest, CompileLeavesFoldersBesideItAlone) {
  std::string Out = Dir.file("project");
  ASSERT_EQ(
      run(compileArgs({"--strategy", "data-parallel", "-o", Out})).ExitCode, 0);
  for (const char *Suffix : {".tmp-onnx2soap", ".old-onnx2soap"}) {
    ASSERT_FALSE(llvm::sys::fs::create_directory(Out + Suffix));
    ASSERT_TRUE(writeBytes(Out + Suffix + "/notes.txt", "keep\n"));
  }
  RunResult Again = run(compileArgs({"--strategy", "expert", "-o", Out}));
  ASSERT_EQ(Again.ExitCode, 0) << Again.Err;
  EXPECT_THAT(Again.Out, ::testing::HasSubstr("strategy expert"));
  for (const char *Suffix : {".tmp-onnx2soap", ".old-onnx2soap"})
    EXPECT_EQ(readTree(Out + Suffix),
              (std::map<std::string, std::string>{{"notes.txt", "keep\n"}}))
        << Suffix;
  EXPECT_THAT(besides(Out), ::testing::ElementsAre("project.old-onnx2soap",
                                                   "project.tmp-onnx2soap"));
}

// OptCNN's strategy is chosen among the configs generated programs can run.
TEST_F(CliTest, CompileWritesOptCnnsStrategy) {
  std::string Out = Dir.file("cnn_bn-optcnn");
  RunResult R = run(compileArgs({"--strategy", "optcnn", "-o", Out}));
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_THAT(R.Out, ::testing::StartsWith("wrote " + Out +
                                           ": 2 ranks on cpu:2, strategy "
                                           "optcnn, predicted "));
}

TEST_F(CliTest, CompileTwiceGivesTheSameBytes) {
  // A search with --iterations depends only on the seed; the folder's name
  // must not show up in what is written.
  std::vector<std::string> Search{"--iterations", "50", "--seed", "1"};
  auto Into = [&](const std::string &Out) {
    std::vector<std::string> More = Search;
    More.insert(More.end(), {"-o", Out});
    return compileArgs(More);
  };
  std::string A = Dir.file("first"), B = Dir.file("second-project");
  RunResult First = run(Into(A));
  ASSERT_EQ(First.ExitCode, 0) << First.Err;
  RunResult Second = run(Into(B));
  ASSERT_EQ(Second.ExitCode, 0) << Second.Err;
  std::map<std::string, std::string> TreeA = readTree(A), TreeB = readTree(B);
  ASSERT_GT(TreeA.size(), 8u);
  ASSERT_EQ(TreeA.size(), TreeB.size());
  for (const auto &[Path, Bytes] : TreeA) {
    auto It = TreeB.find(Path);
    ASSERT_NE(It, TreeB.end()) << Path << " only in the first tree";
    EXPECT_TRUE(It->second == Bytes) << Path << " differs";
  }
}

TEST_F(CliTest, CompileGraphOnlyModelNeedsRandomInit) {
  // The weights are external data whose file is absent, as in the samples.
  onnx::ModelProto Model = makeModel();
  setExternalData(*findInitializer(*Model.mutable_graph(), "W"), "w.bin", 0,
                  48);
  setExternalData(*findInitializer(*Model.mutable_graph(), "b"), "w.bin", 48,
                  12);
  std::string Path = writeModelFile(Model);
  auto Compile = [&](llvm::StringRef Init, const std::string &Out) {
    return run({"compile", Path, "--batch", "8", "--cluster", "cpu:2",
                "--strategy", "data-parallel", "--init", Init.str(), "-o",
                Out});
  };
  std::string FromOnnx = Dir.file("onnx-init");
  expectUserError(Compile("onnx", FromOnnx),
                  "the weights of 'W' are needed to generate the program and "
                  "are absent");
  EXPECT_FALSE(llvm::sys::fs::exists(FromOnnx));

  std::string Random = Dir.file("random-init");
  RunResult R = Compile("random", Random);
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_FALSE(readFile(Random + "/weights/shards.bin").empty());
  EXPECT_FALSE(readFile(Random + "/manifest.json").empty());
}

// compile says how much device memory the program will allocate per rank
// and the kernel scratch it takes on top (manifest.json: allocated_bytes
// and kernel_scratch_bytes, next to the planner's peak; the codegen cases
// check that the program allocates exactly that), and warns when a rank's
// device is too small for them.
TEST_F(CliTest, CompileReportsTheMemoryTheProgramAllocates) {
  std::string Out = Dir.file("project");
  RunResult R = run(compileArgs({"--strategy", "data-parallel", "-o", Out}));
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_EQ(R.Err, "");
  EXPECT_THAT(R.Out,
              ::testing::HasSubstr("allocated on rank 0 (the fullest; kernel "
                                   "scratch on top: "));
  EXPECT_THAT(R.Out, ::testing::HasSubstr("; the planner's peak there: "));
  auto Manifest = llvm::json::parse(readFile(Out + "/manifest.json"));
  ASSERT_TRUE(bool(Manifest)) << llvm::toString(Manifest.takeError());
  const llvm::json::Array *Allocated =
      Manifest->getAsObject()->getArray("allocated_bytes");
  const llvm::json::Array *Peak =
      Manifest->getAsObject()->getArray("predicted_peak_memory");
  ASSERT_TRUE(Allocated && Peak);
  ASSERT_EQ(Allocated->size(), 2u);
  ASSERT_EQ(Peak->size(), 2u);
  // The CNN's loss and BatchNorm take a little scratch; a CPU device
  // has no convolution or cuBLAS workspace.
  const llvm::json::Array *Scratch =
      Manifest->getAsObject()->getArray("kernel_scratch_bytes");
  ASSERT_TRUE(Scratch);
  ASSERT_EQ(Scratch->size(), 2u);
  EXPECT_EQ(Manifest->getAsObject()->getInteger("conv_workspace_bytes"),
            llvm::Optional<int64_t>(0));
  const llvm::json::Array *Library =
      Manifest->getAsObject()->getArray("library_bytes");
  ASSERT_TRUE(Library);
  EXPECT_EQ(*Library, llvm::json::Array({0, 0})); // no cuBLAS on a CPU
  const llvm::json::Array *Runtime =
      Manifest->getAsObject()->getArray("runtime_bytes");
  ASSERT_TRUE(Runtime);
  EXPECT_EQ(*Runtime, llvm::json::Array({0, 0})); // no CUDA or NCCL either
  for (size_t Rank = 0; Rank < 2; ++Rank) {
    EXPECT_GT(*(*Allocated)[Rank].getAsInteger(), 0);
    EXPECT_GT(*(*Scratch)[Rank].getAsInteger(), 0);
    EXPECT_GE(*(*Peak)[Rank].getAsInteger(),
              *(*Allocated)[Rank].getAsInteger() +
                  *(*Scratch)[Rank].getAsInteger());
  }

  // The same two ranks with 100 KiB each.
  std::string Cluster = Dir.file("small.json");
  ASSERT_TRUE(writeBytes(Cluster, R"json({
  "name": "small",
  "device_types": [{"name": "c", "peak_TFLOPS_f32": 0.1,
    "memory_bandwidth_GBps": 10, "memory_GiB": 0.00009536743,
    "launch_overhead_us": 1}],
  "nodes": [{"devices": {"type": "c", "count": 2}, "switches": ["shm"],
    "links": [{"from": "cpu0", "to": "shm", "kind": "shm",
               "bandwidth_GBps": 10, "latency_us": 0.5},
              {"from": "cpu1", "to": "shm", "kind": "shm",
               "bandwidth_GBps": 10, "latency_us": 0.5}]}]
})json"));
  std::string Small = Dir.file("small-project");
  R = run({"compile", fixturePath("cnn_bn", "model.onnx"), "--batch", "8",
           "--cluster", Cluster, "--optimizer", "sgd", "--strategy",
           "data-parallel", "-o", Small});
  ASSERT_EQ(R.ExitCode, 0) << R.Err;
  EXPECT_THAT(R.Err, ::testing::HasSubstr("warning: rank 0 allocates "));
  // CPU ranks: no start-up check, no CUDA context or NCCL.
  EXPECT_THAT(R.Err, ::testing::HasSubstr(
                         "of kernel scratch, more than its device's 100 KiB: "
                         "the rank may run out of the host's memory"));
}

// `--optimizer sgd --momentum X` trains with a momentum slot per parameter,
// as `--optimizer momentum` does: the planner simulates and counts the same
// (it used to simulate plain SGD, without the slots' memory).
TEST_F(CliTest, CompilePlansTheMomentumTheProgramRuns) {
  auto Peak = [&](std::vector<std::string> Flags) {
    std::string Out = Dir.file("momentum-" + llvm::join(Flags, "-"));
    std::vector<std::string> Args{
        "compile",    fixturePath("cnn_bn", "model.onnx"),
        "--batch",    "8",
        "--cluster",  "cpu:2",
        "--strategy", "data-parallel",
        "-o",         Out};
    Args.insert(Args.end(), Flags.begin(), Flags.end());
    RunResult R = run(Args);
    EXPECT_EQ(R.ExitCode, 0) << R.Err;
    auto Manifest = llvm::json::parse(readFile(Out + "/manifest.json"));
    EXPECT_TRUE(bool(Manifest)) << llvm::toString(Manifest.takeError());
    return *(*Manifest->getAsObject()->getArray("predicted_peak_memory"))[0]
                .getAsInteger();
  };
  int64_t Plain = Peak({"--optimizer", "sgd"});
  int64_t Slot = Peak({"--optimizer", "momentum"});
  EXPECT_GT(Slot, Plain);
  EXPECT_EQ(Peak({"--optimizer", "sgd", "--momentum", "0.9"}), Slot);
  EXPECT_EQ(Peak({"--optimizer", "momentum", "--momentum", "0"}), Plain);
}

// The plan hash heads the weight shard file and every checkpoint: programs
// whose first weights differ (--init, the seed of random values) must not
// share it, or a shard file copied from one would load into the other.
TEST_F(CliTest, ThePlanHashDependsOnWhereTheWeightsComeFrom) {
  auto PlanHash = [&](std::vector<std::string> Init) {
    std::string Out = Dir.file("project-" + llvm::join(Init, "-"));
    std::vector<std::string> More{"--strategy", "data-parallel", "-o", Out};
    More.insert(More.end(), Init.begin(), Init.end());
    RunResult R = run(compileArgs(More));
    EXPECT_EQ(R.ExitCode, 0) << R.Err;
    std::string Plan = readFile(Out + "/src/plan.cpp");
    size_t At = Plan.find("ull, // plan hash");
    EXPECT_NE(At, std::string::npos);
    return At == std::string::npos ? std::string() : Plan.substr(At - 18, 18);
  };
  std::string Onnx = PlanHash({"--init", "onnx"});
  std::string Seven = PlanHash({"--init", "random", "--seed", "7"});
  std::string Eight = PlanHash({"--init", "random", "--seed", "8"});
  ASSERT_EQ(Onnx.substr(0, 2), "0x");
  EXPECT_NE(Onnx, Seven);
  EXPECT_NE(Seven, Eight);
  EXPECT_EQ(Seven, PlanHash({"--seed", "7", "--init", "random"}));
}

} // namespace
