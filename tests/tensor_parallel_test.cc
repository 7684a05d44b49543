// Tensor parallelism against the whole model on one rank: the ranks of a group run as threads of
// this process (dist/local_communicator.h), rank 0 through CreateBackend with the group (the
// engine's path), the others in RunTensorParallelWorker. For TP 2 and 4 on synthetic GGUF
// models (4 query heads, 2 KV heads: replicated at TP 4; F32, F16, BF16) and on the shared models
// when present (F32; Q5_0 and Q4_1 GGUF): the same greedy ids as TP 1 over a prefill (two
// sequences, one chunked) and decode steps with a swap-out / swap-in in between, every logit within
// 1e-5 of the row's largest magnitude, and a repeated run bitwise identical.
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
#include "backend/tensor_parallel_backend.h"
#include "backend/tensor_parallel_messages.h"
#include "dist/local_communicator.h"
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

KvCacheShape Shape(const ModelConfig& c) {
  KvCacheShape s;
  s.num_layers = c.num_layers;
  s.num_kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.block_size = kBlockSize;
  s.num_blocks = kNumBlocks;
  return s;
}

StatusOr<Run> RunWhole(const LoadedModel& model) {
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackend(model, BackendOptions(nullptr, 64)));
  RETURN_IF_ERROR(b->AllocateKvCache(Shape(model.config), 8));
  b->PoisonKvCache();
  Run run;
  RETURN_IF_ERROR(Drive(*b, model.config.vocab_size, &run));
  return run;
}

// The same on `tp` ranks (threads); the workers' results are checked too.
StatusOr<Run> RunSplit(const LoadedModel& model, int tp) {
  auto comms = CreateLocalGroup(tp, std::chrono::milliseconds(60000));
  std::vector<Status> worker_status(tp);
  std::vector<std::thread> workers;
  for (int r = 1; r < tp; ++r)
    workers.emplace_back([&, r] { worker_status[r] = RunTensorParallelWorker(*comms[r]); });
  StatusOr<Run> result = [&]() -> StatusOr<Run> {
    BackendOptions options(nullptr, 64);
    options.tensor_parallel_group = comms[0].get();
    ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackend(model, options));
    RETURN_IF_ERROR(b->AllocateKvCache(Shape(model.config), 8));
    b->PoisonKvCache();
    Run run;
    RETURN_IF_ERROR(Drive(*b, model.config.vocab_size, &run));
    return run;
  }();
  EXPECT_TRUE(ShutDownTensorParallelWorkers(*comms[0]).ok());
  for (std::thread& t : workers) t.join();
  for (int r = 1; r < tp; ++r) EXPECT_TRUE(worker_status[r].ok()) << worker_status[r].ToString();
  return result;
}

void ExpectSplitMatches(const std::string& path, const std::vector<int>& sizes) {
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto whole = RunWhole(**model);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  for (int tp : sizes) {
    SCOPED_TRACE(fmt::format("{} at TP {}", path, tp));
    auto split = RunSplit(**model, tp);
    ASSERT_TRUE(split.ok()) << split.status().ToString();
    EXPECT_EQ(split->ids[0], whole->ids[0]);
    EXPECT_EQ(split->ids[1], whole->ids[1]);
    ASSERT_EQ(split->logits.size(), whole->logits.size());
    const int32_t vocab = (*model)->config.vocab_size;
    for (size_t s = 0; s < whole->logits.size(); ++s) {
      const std::vector<float>& a = split->logits[s];
      const std::vector<float>& w = whole->logits[s];
      ASSERT_EQ(a.size(), w.size());
      for (size_t row = 0; row < w.size() / vocab; ++row) {
        float scale = 0.0f;
        for (int32_t i = 0; i < vocab; ++i) scale = std::max(scale, std::fabs(w[row * vocab + i]));
        for (int32_t i = 0; i < vocab; ++i)
          ASSERT_LE(std::fabs(a[row * vocab + i] - w[row * vocab + i]), 1e-5f * scale)
              << "step " << s << " row " << row << " token " << i;
      }
    }
    // Bitwise repeatable: the reduction order is fixed.
    auto again = RunSplit(**model, tp);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    for (size_t s = 0; s < split->logits.size(); ++s)
      ASSERT_EQ(0, std::memcmp(split->logits[s].data(), again->logits[s].data(),
                               split->logits[s].size() * sizeof(float)))
          << "step " << s;
  }
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

// Each message decodes to what was encoded; a truncated one is DataLoss, never a crash.
TEST(TensorParallelMessages, RoundTripAndTruncation) {
  TpInit init{"/models/m.gguf", {DType::kBF16, "gptq"}, 4096, 3, 2};
  auto i = DecodeInit(EncodeInit(init));
  ASSERT_TRUE(i.ok());
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
