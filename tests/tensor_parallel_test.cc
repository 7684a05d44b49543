// Tensor parallelism against the whole model on one rank: the ranks of a group run as threads of
// this process (dist/local_communicator.h), rank 0 through CreateBackend with the group (the
// engine's path), the others in RunTensorParallelWorker. For TP 2 and 4 on synthetic GGUF
// models (4 query heads, 2 KV heads: replicated at TP 4; F32, F16, BF16) and on the shared models
// when present (F32; Q5_0 and Q4_1 GGUF): the same greedy ids as TP 1 over a prefill (two
// sequences, one chunked) and decode steps with a swap-out / swap-in in between, every logit within
// 1e-5 of the row's largest magnitude, and a repeated run bitwise identical. The same for
// mixture-of-experts models (Mixtral, Qwen3-MoE, Qwen2-MoE with its shared expert: every
// expert's columns split) and, with greedy ids only, for quantised KV caches (int8, int4, fp8)
// whose calibration every rank takes its heads' part of.
//
// Pipeline parallelism runs here too: PP 2 (and 3, 4) and TP 2 x PP 2 worlds of threads, layers
// split as vLLM splits them or by an explicit partition, steps cut into micro-batches (every
// step of two or more sequences, with a micro-batch threshold of one token, as well as the
// default rule). PP alone equals TP 1 bit for bit (the stages hand over exact float32 hidden
// states and the kernels are batch-invariant); TP 2 x PP 2 within 1e-5 as TP 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/rank_placement.h"
#include "backend/tensor_parallel_backend.h"
#include "backend/tensor_parallel_messages.h"
#include "backend/tensor_parallel_threads.h"
#include "dist/local_communicator.h"
#include "fmt/ranges.h"
#include "gptq_test_util.h"
#include "model/model_weights.h"
#include "model/test_file_writers.h"

namespace pagellm {
namespace {

using testing::TinyModelSpec;

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 64;
constexpr int kDecodeSteps = 12;

// The greedy ids and every step's logits of one run.
struct Run {
  std::vector<int32_t> ids[2];
  std::vector<std::vector<float>> logits;
};

int32_t Argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Two sequences: A's 7-token prompt in chunks of 4 and 3 (all logits), B's 5-token prompt in
// one; then decode steps of both, greedy. Between decode steps 5 and 6, A's blocks are swapped
// out and back in to other blocks (Backend::CopyKvBlocks).
Status Drive(Backend& b, int32_t vocab, Run* run) {
  std::vector<int32_t> table[2] = {{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}};
  const std::vector<int32_t> prompt[2] = {{1, 5, 9, 13, 17, 21, 25}, {3, 6, 12, 24, 48 % vocab}};
  int32_t len[2] = {0, 0};
  auto step = [&](ForwardBatch batch) -> StatusOr<ForwardOutput> {
    ForwardOutput out;
    RETURN_IF_ERROR(b.Forward(batch, &out));
    run->logits.push_back(out.logits);
    return out;
  };
  // Prefill: A's first chunk with B's prompt, then A's second chunk.
  ForwardBatch first;
  first.token_ids = {1, 5, 9, 13};
  first.token_ids.insert(first.token_ids.end(), prompt[1].begin(), prompt[1].end());
  first.seqs = {{4, 0, table[0], true, false}, {5, 0, table[1], false, false}};
  ASSIGN_OR_RETURN(ForwardOutput o1, step(first));
  run->ids[1].push_back(Argmax(o1.row(o1.row_offset[1]), vocab));
  ForwardBatch second;
  second.token_ids = {17, 21, 25};
  second.seqs = {{3, 4, table[0], true, false}};
  ASSIGN_OR_RETURN(ForwardOutput o2, step(second));
  run->ids[0].push_back(Argmax(o2.row(2), vocab));
  len[0] = 7;
  len[1] = 5;
  for (int s = 0; s < kDecodeSteps; ++s) {
    if (s == 6) {
      const BlockCopy out[] = {{1, 0}, {2, 1}, {3, 2}, {4, 3}};
      b.CopyKvBlocks(KvPool::kPrimary, KvPool::kSwap, out);
      const BlockCopy in[] = {{0, 20}, {1, 21}, {2, 22}, {3, 23}};
      b.CopyKvBlocks(KvPool::kSwap, KvPool::kPrimary, in);
      table[0] = {20, 21, 22, 23, 5, 6};
    }
    ForwardBatch d;
    d.token_ids = {run->ids[0].back(), run->ids[1].back()};
    d.seqs = {{1, len[0], table[0], false, false}, {1, len[1], table[1], false, false}};
    ASSIGN_OR_RETURN(ForwardOutput o, step(d));
    for (int i = 0; i < 2; ++i) run->ids[i].push_back(Argmax(o.row(o.row_offset[i]), vocab));
    ++len[0];
    ++len[1];
  }
  return Status::Ok();
}

// The KV cache of a run: its format and, for a quantised one, a calibration of every head.
struct KvOptions {
  KvCacheDtype dtype = KvCacheDtype::kFloat32;
  const KvCalibration* calibration = nullptr;
};

KvCacheShape Shape(const ModelConfig& c, const KvOptions& kv) {
  KvCacheShape s;
  s.num_layers = c.num_layers;
  s.num_kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.block_size = kBlockSize;
  s.num_blocks = kNumBlocks;
  s.dtype = kv.dtype;
  return s;
}

Status PrepareKv(Backend& b, const ModelConfig& c, const KvOptions& kv) {
  RETURN_IF_ERROR(b.AllocateKvCache(Shape(c, kv), 8));
  if (kv.calibration != nullptr) RETURN_IF_ERROR(b.SetKvCalibration(*kv.calibration));
  b.PoisonKvCache();
  return Status::Ok();
}

StatusOr<Run> RunWhole(const LoadedModel& model, const KvOptions& kv = {}) {
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackend(model, BackendOptions(nullptr, 64)));
  RETURN_IF_ERROR(PrepareKv(*b, model.config, kv));
  Run run;
  RETURN_IF_ERROR(Drive(*b, model.config.vocab_size, &run));
  return run;
}

// The same on `tp` x `pipeline.pipeline_parallel_size` ranks (threads); the workers' results are
// checked too.
StatusOr<Run> RunSplit(const LoadedModel& model, int tp, const KvOptions& kv = {},
                       const PipelineOptions& pipeline = {}) {
  const int ranks = tp * pipeline.pipeline_parallel_size;
  auto comms = CreateLocalGroup(ranks, std::chrono::milliseconds(60000));
  std::vector<Status> worker_status(ranks);
  std::vector<std::thread> workers;
  for (int r = 1; r < ranks; ++r)
    workers.emplace_back([&, r] { worker_status[r] = RunTensorParallelWorker(*comms[r]); });
  StatusOr<Run> result = [&]() -> StatusOr<Run> {
    BackendOptions options(nullptr, 64);
    options.tensor_parallel_group = comms[0].get();
    options.pipeline = pipeline;
    ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackend(model, options));
    RETURN_IF_ERROR(PrepareKv(*b, model.config, kv));
    Run run;
    RETURN_IF_ERROR(Drive(*b, model.config.vocab_size, &run));
    return run;
  }();
  EXPECT_TRUE(ShutDownTensorParallelWorkers(*comms[0]).ok());
  for (std::thread& t : workers) t.join();
  for (int r = 1; r < ranks; ++r) EXPECT_TRUE(worker_status[r].ok()) << worker_status[r].ToString();
  return result;
}

// A split of the ranks: tp per stage, pp stages (layers per stage and micro-batch rule in
// `pipeline`).
struct Split {
  int tp = 1;
  PipelineOptions pipeline;
  std::string Name() const {
    return fmt::format("TP {} x PP {}{}{}", tp, pipeline.pipeline_parallel_size,
                       pipeline.layer_partition.empty()
                           ? ""
                           : fmt::format(" layers {}", fmt::join(pipeline.layer_partition, ",")),
                       pipeline.min_micro_batch_tokens == 1 ? " (every step micro-batched)" : "");
  }
};

Split Pp(int pp, int tp = 1, int min_tokens = 1, std::vector<int> partition = {}) {
  Split s;
  s.tp = tp;
  s.pipeline.pipeline_parallel_size = pp;
  s.pipeline.min_micro_batch_tokens = min_tokens;
  s.pipeline.layer_partition = std::move(partition);
  return s;
}

// `logit_tolerance` relative to each row's largest magnitude; a quantised KV cache may round
// a K or V element of the split differently from one rank (its inputs differ in the last bits)
// and is checked on the greedy ids (and a loose tolerance) instead.
void ExpectSplitsMatch(const std::string& path, const std::vector<Split>& splits,
                       const KvOptions& kv = {}, float logit_tolerance = 1e-5f) {
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto whole = RunWhole(**model, kv);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  // Once more on one rank: bitwise identical (the experts' routing and sums are deterministic).
  auto whole_again = RunWhole(**model, kv);
  ASSERT_TRUE(whole_again.ok()) << whole_again.status().ToString();
  for (size_t s = 0; s < whole->logits.size(); ++s)
    ASSERT_EQ(0, std::memcmp(whole->logits[s].data(), whole_again->logits[s].data(),
                             whole->logits[s].size() * sizeof(float)))
        << "TP 1 step " << s;
  for (const Split& sp : splits) {
    const int tp = sp.tp;
    SCOPED_TRACE(fmt::format("{} at {}", path, sp.Name()));
    auto split = RunSplit(**model, tp, kv, sp.pipeline);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    EXPECT_EQ(split->ids[0], whole->ids[0]);
    EXPECT_EQ(split->ids[1], whole->ids[1]);
    ASSERT_EQ(split->logits.size(), whole->logits.size());
    const int32_t vocab = (*model)->config.vocab_size;
    for (size_t s = 0; s < whole->logits.size(); ++s) {
      const std::vector<float>& a = split->logits[s];
      const std::vector<float>& w = whole->logits[s];
      ASSERT_EQ(a.size(), w.size());
      // Stages alone split no sum: the very same bits as one rank.
      if (tp == 1) {
        ASSERT_EQ(0, std::memcmp(a.data(), w.data(), w.size() * sizeof(float))) << "step " << s;
      }
      for (size_t row = 0; row < w.size() / vocab; ++row) {
        float scale = 0.0f;
        for (int32_t i = 0; i < vocab; ++i) scale = std::max(scale, std::fabs(w[row * vocab + i]));
        for (int32_t i = 0; i < vocab; ++i)
          ASSERT_LE(std::fabs(a[row * vocab + i] - w[row * vocab + i]), logit_tolerance * scale)
              << "step " << s << " row " << row << " token " << i;
      }
    }
    // Bitwise repeatable: the reduction order is fixed.
    auto again = RunSplit(**model, tp, kv, sp.pipeline);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    for (size_t s = 0; s < split->logits.size(); ++s)
      ASSERT_EQ(0, std::memcmp(split->logits[s].data(), again->logits[s].data(),
                               split->logits[s].size() * sizeof(float)))
          << "step " << s;
  }
}

void ExpectSplitMatches(const std::string& path, const std::vector<int>& sizes,
                        const KvOptions& kv = {}, float logit_tolerance = 1e-5f) {
  std::vector<Split> splits;
  for (int tp : sizes) splits.push_back(Split{tp, {}});
  ExpectSplitsMatch(path, splits, kv, logit_tolerance);
}

TinyModelSpec Synthetic(uint32_t matrix_type) {
  TinyModelSpec s;
  s.hidden = 64;
  s.intermediate = 128;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.vocab = 96;
  s.context = 64;
  s.tied = false;
  s.matrix_type = matrix_type;
  return s;
}

TEST(TensorParallel, SyntheticF32MatchesOneRankWithKvHeadsReplicated) {
  testing::TempDir dir;
  ExpectSplitMatches(dir.Write("m.gguf", testing::TinyGguf(Synthetic(testing::kGgmlF32)).Build()),
                     {2, 4});
}

TEST(TensorParallel, SyntheticF16AndBf16MatchOneRank) {
  testing::TempDir dir;
  ExpectSplitMatches(dir.Write("f16.gguf", testing::TinyGguf(Synthetic(testing::kGgmlF16)).Build()),
                     {2, 4});
  ExpectSplitMatches(
      dir.Write("bf16.gguf", testing::TinyGguf(Synthetic(testing::kGgmlBF16)).Build()), {2});
}

// At TP 4 the Q8_0 attention output would be split inside its 32-element blocks: a clear error
// on every rank, and the workers still shut down.
TEST(TensorParallel, SplitInsideAQuantizationBlockIsAnError) {
  testing::TempDir dir;
  auto model =
      LoadModel(dir.Write("m.gguf", testing::TinyGguf(Synthetic(testing::kGgmlQ8_0)).Build()));
  ASSERT_TRUE(model.ok());
  auto split = RunSplit(**model, 4);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("quantization blocks"), std::string::npos)
      << split.status().ToString();
}

TEST(TensorParallel, SharedModelsMatchOneRank) {
  const std::string shared = PAGELLM_SHARED_DIR;
  if (!std::filesystem::exists(shared + "/models")) GTEST_SKIP() << "no ../shared";
  ExpectSplitMatches(shared + "/models/stories260K", {2, 4});
  ExpectSplitMatches(shared + "/models/babyllama-tok105", {2, 4});  // vocab 105: uneven split
  // Quantized blocks of 32 (the split falls between blocks), 2 KV heads replicated at TP 4.
  ExpectSplitMatches(shared + "/models/kquant-ref/kquant-ref-Q5_0.gguf", {2, 4});
  ExpectSplitMatches(shared + "/models/kquant-ref/kquant-ref-Q4_1.gguf", {2});
}

// Mixture-of-experts shapes on the synthetic model: 8 experts, 2 per token, each 32 wide (16 at
// TP 2, 8 at TP 4).
TinyModelSpec SyntheticMoe(uint32_t matrix_type) {
  TinyModelSpec s = Synthetic(matrix_type);
  s.experts = 8;
  s.experts_used = 2;
  s.expert_intermediate = 32;
  return s;
}

TEST(TensorParallel, MixtralStyleExpertsMatchOneRank) {
  testing::TempDir dir;
  ExpectSplitMatches(
      dir.Write("mixtral.gguf", testing::TinyGguf(SyntheticMoe(testing::kGgmlF32)).Build()),
      {2, 4});
}

TEST(TensorParallel, Qwen3MoeMatchesOneRank) {
  testing::TempDir dir;
  TinyModelSpec s = SyntheticMoe(testing::kGgmlF32);
  s.qk_norm = true;
  ExpectSplitMatches(dir.Write("qwen3moe.gguf", testing::TinyGguf(s).Build()), {2, 4});
}

// The shared expert (48 wide: 24 and 12 per rank) is split too; its sigmoid gate is replicated.
TEST(TensorParallel, Qwen2MoeWithSharedExpertMatchesOneRank) {
  testing::TempDir dir;
  TinyModelSpec s = SyntheticMoe(testing::kGgmlF32);
  s.attention_bias = true;
  s.shared_intermediate = 48;
  ExpectSplitMatches(dir.Write("qwen2moe.gguf", testing::TinyGguf(s).Build()), {2, 4});
  s.matrix_type = testing::kGgmlF16;
  ExpectSplitMatches(dir.Write("qwen2moe-f16.gguf", testing::TinyGguf(s).Build()), {2});
}

// Q8_0 experts 64 wide split at TP 2 between 32-element blocks; 32 wide they would be cut
// inside one: a clear error naming the expert.
TEST(TensorParallel, QuantizedExpertsSplitBetweenBlocksOnly) {
  testing::TempDir dir;
  TinyModelSpec s = SyntheticMoe(testing::kGgmlQ8_0);
  s.expert_intermediate = 64;
  ExpectSplitMatches(dir.Write("q8.gguf", testing::TinyGguf(s).Build()), {2});
  s.expert_intermediate = 32;
  auto model = LoadModel(dir.Write("q8-narrow.gguf", testing::TinyGguf(s).Build()));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto split = RunSplit(**model, 2);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("expert 0 down_proj"), std::string::npos)
      << split.status().ToString();
  EXPECT_NE(split.status().message().find("quantization blocks"), std::string::npos)
      << split.status().ToString();
}

// A calibration with a different offset, range and scale for every head and layer (what
// engine/kv_calibration.h computes from the whole model on rank 0).
KvCalibration DistinctCalibration(const ModelConfig& c, bool fp8_scales) {
  KvCalibration cal;
  cal.num_kv_heads = c.num_kv_heads;
  cal.head_dim = c.head_dim;
  const int n = c.num_kv_heads * c.head_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    std::vector<float> off(n), range(n);
    for (int i = 0; i < n; ++i) {
      off[i] = 0.05f * std::sin(0.7f * i + l);
      range[i] = 0.5f + 0.25f * ((i * 7 + l) % 5) + 0.5f * (i / c.head_dim);
    }
    cal.k_offset.push_back(off);
    cal.k_smooth.push_back(range);
    cal.k_scale.push_back(fp8_scales ? 0.004f * (l + 1) : 0.0f);
    cal.v_scale.push_back(fp8_scales ? 0.003f * (l + 1) : 0.0f);
  }
  return cal;
}

// Quantised KV caches: every rank stores its heads with the whole model's calibration of those
// heads, so the split picks the same tokens as one rank (KV heads replicated at TP 4).
TEST(TensorParallel, QuantizedKvCachesMatchOneRank) {
  testing::TempDir dir;
  for (const bool moe : {false, true}) {
    const std::string path = dir.Write(
        moe ? "moe.gguf" : "m.gguf",
        testing::TinyGguf(moe ? SyntheticMoe(testing::kGgmlF32) : Synthetic(testing::kGgmlF32))
            .Build());
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    for (const KvCacheDtype dtype :
         {KvCacheDtype::kInt8, KvCacheDtype::kInt4, KvCacheDtype::kFp8E4m3}) {
      SCOPED_TRACE(KvCacheDtypeName(dtype));
      const KvCalibration cal =
          DistinctCalibration((*model)->config, dtype == KvCacheDtype::kFp8E4m3);
      ExpectSplitMatches(path, {2, 4}, {dtype, &cal}, 1e-2f);
    }
  }
}

// Each rank keeps its heads' part of the calibration: KV heads [1, 2) of a two-head one.
TEST(TensorParallel, KvCalibrationAppliesTheRanksHeads) {
  ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  const KvCalibration cal = DistinctCalibration(c, true);
  KvCacheShape shape;
  shape.num_layers = 2;
  shape.num_kv_heads = 1;
  shape.head_dim = 16;
  shape.num_blocks = 2;
  shape.dtype = KvCacheDtype::kInt8;
  auto kv = KvCacheStorage::Create(shape);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  ASSERT_TRUE(ApplyKvCalibration(cal, 1, &*kv).ok());
  for (int l = 0; l < 2; ++l) {
    ASSERT_TRUE(kv->k_smoothed(l));
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(kv->k_offset(l)[i], cal.k_offset[l][16 + i]);
      EXPECT_EQ(kv->k_smooth(l)[i], cal.k_smooth[l][16 + i]);
    }
  }
  EXPECT_EQ(ApplyKvCalibration(cal, 2, &*kv).code(), StatusCode::kInvalidArgument);  // no head 2
  auto round = DecodeKvCalibration(EncodeKvCalibration(cal));
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->num_kv_heads, 2);
  EXPECT_EQ(round->k_smooth, cal.k_smooth);
  EXPECT_EQ(round->v_scale, cal.v_scale);
}

// Three layers: PP 2 splits them 2 + 1 (vLLM's rule), PP 3 one each.
TinyModelSpec Synthetic3(uint32_t matrix_type) {
  TinyModelSpec s = Synthetic(matrix_type);
  s.layers = 3;
  return s;
}

TEST(PipelineParallel, SyntheticMatchesOneRankBitwise) {
  testing::TempDir dir;
  ExpectSplitsMatch(dir.Write("m.gguf", testing::TinyGguf(Synthetic3(testing::kGgmlF32)).Build()),
                    {Pp(2), Pp(3), Pp(2, 1, kDefaultMinMicroBatchTokens), Pp(2, 1, 1, {1, 2}),
                     Pp(2, 2), Pp(2, 2, kDefaultMinMicroBatchTokens)});
  ExpectSplitsMatch(dir.Write("f16.gguf", testing::TinyGguf(Synthetic3(testing::kGgmlF16)).Build()),
                    {Pp(2), Pp(2, 2)});
}

// stories260K and babyllama (5 layers: 3 + 2 at PP 2, 1 + 1 + 2 + 1 at PP 4; tied embeddings, so
// the last stage holds the table for lm_head); the Q5_0 GGUF (2 layers, untied).
TEST(PipelineParallel, SharedModelsMatchOneRank) {
  const std::string shared = PAGELLM_SHARED_DIR;
  if (!std::filesystem::exists(shared + "/models")) GTEST_SKIP() << "no ../shared";
  ExpectSplitsMatch(shared + "/models/stories260K", {Pp(2), Pp(4), Pp(2, 2), Pp(2, 4)});
  ExpectSplitsMatch(shared + "/models/babyllama-tok105", {Pp(2), Pp(2, 2)});
  ExpectSplitsMatch(shared + "/models/kquant-ref/kquant-ref-Q5_0.gguf", {Pp(2), Pp(2, 2)});
}

TEST(PipelineParallel, MixtureOfExpertsMatchesOneRank) {
  testing::TempDir dir;
  TinyModelSpec s = SyntheticMoe(testing::kGgmlF32);
  s.attention_bias = true;
  s.shared_intermediate = 48;
  ExpectSplitsMatch(dir.Write("qwen2moe.gguf", testing::TinyGguf(s).Build()), {Pp(2), Pp(2, 2)});
}

// Every rank keeps its stage's layers of the calibration (and its heads of them).
TEST(PipelineParallel, QuantizedKvCachesMatchOneRank) {
  testing::TempDir dir;
  const std::string path =
      dir.Write("m.gguf", testing::TinyGguf(Synthetic3(testing::kGgmlF32)).Build());
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (const KvCacheDtype dtype : {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4m3}) {
    SCOPED_TRACE(KvCacheDtypeName(dtype));
    const KvCalibration cal =
        DistinctCalibration((*model)->config, dtype == KvCacheDtype::kFp8E4m3);
    ExpectSplitsMatch(path, {Pp(2), Pp(2, 2)}, {dtype, &cal}, 1e-2f);
  }
}

// What each rank holds: the weight bytes the planner counts without cutting the matrices equal
// those of the rank's model, and the KV shape keeps the stage's layers (skip layers renumbered).
TEST(PipelineParallel, RankPlacementAndWeightBytes) {
  testing::TempDir dir;
  TinyModelSpec spec = SyntheticMoe(testing::kGgmlF32);
  spec.layers = 3;
  spec.attention_bias = true;  // Qwen2-MoE, with its shared expert
  spec.shared_intermediate = 48;
  for (const bool tied : {false, true}) {
    spec.tied = tied;
    auto model = LoadModel(dir.Write(tied ? "t.gguf" : "u.gguf", testing::TinyGguf(spec).Build()));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    for (const auto& [tp, pp] : {std::pair{1, 2}, {2, 2}, {1, 3}, {4, 1}, {2, 3}}) {
      for (int r = 0; r < tp * pp; ++r) {
        auto p = PlaceRank((*model)->config, r, tp, pp, {});
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        EXPECT_EQ(p->stage.stage, r / tp);
        EXPECT_EQ(p->shard.rank, r % tp);
        std::unique_ptr<LoadedModel> stage;
        auto part = RankModel(**model, *p, &stage);
        ASSERT_TRUE(part.ok()) << part.status().ToString();
        EXPECT_EQ(RankWeightBytes(**model, *p), (*part)->weights.total_bytes)
            << "tp " << tp << " pp " << pp << " rank " << r << (tied ? " tied" : "");
        EXPECT_EQ((*part)->weights.layer_begin, p->stage.layer_begin);
        EXPECT_EQ(static_cast<int>((*part)->weights.layers.size()), p->stage.num_layers());
        EXPECT_EQ((*part)->weights.embed.data != nullptr,
                  p->stage.first() || (p->stage.last() && tied));
        EXPECT_EQ((*part)->weights.lm_head.data != nullptr, p->stage.last());
      }
    }
  }
  KvCacheShape whole;
  whole.num_layers = 5;
  whole.num_kv_heads = 4;
  whole.head_dim = 8;
  whole.num_blocks = 9;
  whole.skip_layers = {0, 3, 4};
  ModelConfig c;
  c.num_layers = 5;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 8;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.vocab_size = 100;
  auto p = PlaceRank(c, 3, 2, 2, {});  // stage 1 (layers 3, 4), TP rank 1
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto s = RankKvShape(whole, *p);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->num_layers, 2);
  EXPECT_EQ(s->num_kv_heads, 2);
  EXPECT_EQ(s->num_blocks, 9);
  EXPECT_EQ(s->skip_layers, (std::vector<int>{0, 1}));
  whole.layer_group = {0, 0, 0, 0, 1};
  EXPECT_EQ(RankKvShape(whole, *p).status().code(), StatusCode::kInvalidArgument);
}

TEST(PipelineParallel, BadPartitionsAreErrors) {
  testing::TempDir dir;
  auto model =
      LoadModel(dir.Write("m.gguf", testing::TinyGguf(Synthetic3(testing::kGgmlF32)).Build()));
  ASSERT_TRUE(model.ok());
  auto sum = RunSplit(**model, 1, {}, Pp(2, 1, 1, {1, 1}).pipeline);
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("adds up to 2 layers but the model has 3"),
            std::string::npos)
      << sum.status().ToString();
  auto stages = RunSplit(**model, 1, {}, Pp(4).pipeline);
  ASSERT_FALSE(stages.ok());
  EXPECT_NE(stages.status().message().find("only 3 layers"), std::string::npos)
      << stages.status().ToString();
}

// A GPTQ checkpoint of the synthetic shape (4 query heads of `head_dim`, 2 KV heads).
testing::GptqSpec Gptq(int head_dim, int intermediate, int bits, int group) {
  testing::GptqSpec s;
  s.model = Synthetic(testing::kGgmlF32);
  s.model.head_dim = head_dim;
  s.model.hidden = 4 * head_dim;
  s.model.intermediate = intermediate;
  s.bits = bits;
  s.group = group;
  return s;
}

// Writes the checkpoint and checks that its o_proj / down_proj repacked to `dtype` with an input
// permutation (the case the act-order split is for).
std::string WriteActOrder(const testing::TempDir& dir, const testing::GptqSpec& s, DType dtype) {
  testing::WriteGptqModel(dir, s);
  auto model = LoadModel(dir.path());
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (model.ok()) {
    for (const WeightMatrix* w :
         {&(*model)->weights.layers[0].wo, &(*model)->weights.layers[1].w_down}) {
      EXPECT_EQ(w->dtype, dtype) << DTypeName(w->dtype);
      EXPECT_NE(w->input_perm, nullptr);
    }
  }
  return dir.path();
}

// GPTQ act-order: q/k/v/gate/up keep their input permutation over the replicated input; o_proj
// and down_proj are split by their stored blocks, each rank multiplying the whole input (its
// columns summed over the ranks first), so every block's activation scale is one rank's:
// logits within 1e-5 of one rank, greedy ids equal.
TEST(TensorParallel, GptqActOrderMatchesOneRank) {
  {
    SCOPED_TRACE("4 bits, groups of 32 (Q4_Z): o_proj's 128 inputs are 4 blocks");
    testing::TempDir dir;
    ExpectSplitMatches(WriteActOrder(dir, Gptq(32, 256, 4, 32), DType::kQ4_Z), {2, 4});
  }
  {
    SCOPED_TRACE("8 bits, groups of 32 (Q8_0)");
    testing::TempDir dir;
    ExpectSplitMatches(WriteActOrder(dir, Gptq(32, 256, 8, 32), DType::kQ8_0), {2, 4});
  }
  {
    SCOPED_TRACE("4 bits, groups of 128 (Q4_Z128): o_proj's 256 inputs are 2 blocks");
    testing::TempDir dir;
    const std::string path = WriteActOrder(dir, Gptq(64, 512, 4, 128), DType::kQ4_Z128);
    ExpectSplitMatches(path, {2});
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto split = RunSplit(**model, 4);  // 2 blocks for 4 ranks: a clear error
    ASSERT_FALSE(split.ok());
    EXPECT_NE(split.status().message().find("layer 0 o_proj (GPTQ act-order) has 2 stored blocks"),
              std::string::npos)
        << split.status().ToString();
  }
}

// One prefill step's output on backend `b` of `model` (its KV cache allocated here).
StatusOr<ForwardOutput> OneStep(Backend& b, const LoadedModel& model) {
  RETURN_IF_ERROR(PrepareKv(b, model.config, {}));
  const std::vector<int32_t> table = {1};
  ForwardBatch batch;
  batch.token_ids = {1, 5, 9};
  batch.seqs = {{3, 0, table, false, false}};
  ForwardOutput out;
  RETURN_IF_ERROR(b.Forward(batch, &out));
  return out;
}

// Rank 0's time inside the collectives of a step: the step's broadcast, the all-reduces (the
// embedding's and two per layer; two more per layer gathering act-order inputs) and the logits
// gather. Nothing on one rank.
TEST(TensorParallel, StepsReportTheirTimeInCollectives) {
  testing::TempDir dir;
  const std::string gguf =
      dir.Write("m.gguf", testing::TinyGguf(Synthetic(testing::kGgmlF32)).Build());
  testing::TempDir gptq_dir;
  const std::string gptq = WriteActOrder(gptq_dir, Gptq(32, 256, 4, 32), DType::kQ4_Z);
  for (const auto& [path, per_layer] : {std::pair{gguf, 2}, std::pair{gptq, 4}}) {
    SCOPED_TRACE(path);
    auto model = LoadModel(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto whole = CreateBackend(**model, BackendOptions(nullptr, 64));
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    auto one = OneStep(**whole, **model);
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    EXPECT_EQ(one->comm_seconds, 0.0);
    EXPECT_EQ(one->num_all_reduces, 0);

    TensorParallelThreads tp(2);
    BackendOptions options(nullptr, 64);
    options.tensor_parallel_group = tp.rank0();
    auto split = CreateBackend(**model, options);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    auto two = OneStep(**split, **model);
    ASSERT_TRUE(two.ok()) << two.status().ToString();
    EXPECT_EQ(two->num_all_reduces, 1 + per_layer * (*model)->config.num_layers);
    EXPECT_GT(two->all_reduce_seconds, 0.0);
    EXPECT_GT(two->comm_seconds, two->all_reduce_seconds);  // + the broadcast and the gather
    split->reset();
    EXPECT_TRUE(tp.Stop().ok());
  }
}

// The ranks of the Python LLM (threads of one process): a worker that fails ends the group at
// once, so rank 0 gets its error, naming its rank, within moments rather than the 30 s bound;
// one that throws is caught the same way; Stop() joins every worker, also when idle.
TEST(TensorParallelThreads, AFailedWorkerEndsTheGroupAtOnce) {
  testing::TempDir dir;
  auto model =
      LoadModel(dir.Write("m.gguf", testing::TinyGguf(Synthetic(testing::kGgmlF32)).Build()));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const TensorParallelThreads::WorkerFn fails = [](Communicator& c) -> Status {
    std::vector<uint8_t> message;
    RETURN_IF_ERROR(c.Broadcast(&message, true));
    if (c.rank() == 2) throw std::runtime_error("out of threads");
    return ResourceExhaustedError("no memory for the shard");
  };
  for (const int size : {2, 3}) {
    TensorParallelThreads tp(size, TensorParallelThreads::kDefaultTimeout, fails);
    BackendOptions options(nullptr, 64);
    options.tensor_parallel_group = tp.rank0();
    const auto start = std::chrono::steady_clock::now();
    auto b = CreateBackend(**model, options);
    ASSERT_FALSE(b.ok());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    const std::string message = b.status().message();
    EXPECT_TRUE(message == "tensor-parallel rank 1: no memory for the shard" ||
                message == "tensor-parallel rank 2: out of threads")
        << message;
    EXPECT_EQ(tp.Stop().message(), message);
  }
  TensorParallelThreads idle(4);
  EXPECT_TRUE(idle.Stop().ok());
  EXPECT_TRUE(idle.Stop().ok());  // idempotent
}

// Each message decodes to what was encoded; a truncated one is DataLoss, never a crash.
TEST(TensorParallelMessages, RoundTripAndTruncation) {
  TpInit init{"/models/m.gguf", {DType::kBF16, "gptq"}, 4096, 3, 2, 2, {3, 2}, 16};
  auto i = DecodeInit(EncodeInit(init));
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->pipeline_parallel_size, 2);
  EXPECT_EQ(i->layer_partition, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(i->min_micro_batch_tokens, 16);
  EXPECT_EQ(i->model_path, "/models/m.gguf");
  EXPECT_EQ(i->load_options.float_matrix_dtype, DType::kBF16);
  EXPECT_EQ(i->load_options.quantization, "gptq");
  EXPECT_EQ(i->max_positions, 4096);
  EXPECT_EQ(i->threads, 3);
  EXPECT_EQ(i->simd_level, 2);

  TpAllocateKv kv;
  kv.shape.num_layers = 3;
  kv.shape.num_kv_heads = 2;
  kv.shape.head_dim = 16;
  kv.shape.block_size = 8;
  kv.shape.num_blocks = 11;
  kv.shape.dtype = KvCacheDtype::kBFloat16;
  kv.shape.skip_layers = {0, 2};
  kv.num_swap_blocks = 5;
  auto a = DecodeAllocateKv(EncodeAllocateKv(kv));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape.num_blocks, 11);
  EXPECT_EQ(a->shape.dtype, KvCacheDtype::kBFloat16);
  EXPECT_EQ(a->shape.skip_layers, (std::vector<int>{0, 2}));
  EXPECT_EQ(a->num_swap_blocks, 5);

  const BlockCopy copies[] = {{1, 4}, {2, 7}};
  auto c = DecodeCopyKv(EncodeCopyKv(KvPool::kSwap, KvPool::kPrimary, copies));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->src, KvPool::kSwap);
  EXPECT_EQ(c->copies, (std::vector<BlockCopy>{{1, 4}, {2, 7}}));

  const std::vector<int32_t> t0 = {3, 4}, t1 = {9};
  ForwardBatch batch;
  batch.token_ids = {10, 11, 12};
  batch.seqs = {{2, 5, t0, true, false}, {1, 0, t1, false, true}};
  const std::vector<uint8_t> bytes = EncodeForward(batch);
  TpForward f;
  ASSERT_TRUE(DecodeForward(bytes, &f).ok());
  EXPECT_EQ(f.batch.token_ids, batch.token_ids);
  ASSERT_EQ(f.batch.seqs.size(), 2u);
  EXPECT_EQ(f.batch.seqs[0].start_pos, 5);
  EXPECT_TRUE(f.batch.seqs[0].all_logits);
  EXPECT_TRUE(f.batch.seqs[1].hidden_states);
  EXPECT_EQ(
      std::vector<int32_t>(f.batch.seqs[0].block_table.begin(), f.batch.seqs[0].block_table.end()),
      t0);
  for (size_t n = 1; n < bytes.size(); ++n) {
    TpForward g;
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    EXPECT_EQ(DecodeForward(cut, &g).code(), StatusCode::kDataLoss) << n;
  }
  EXPECT_EQ(MessageKind({99}).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace pagellm
