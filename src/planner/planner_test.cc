// Exact numbers of the capacity planner on hand-computed configurations.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "backend/backend_factory.h"
#include "kv/kv_cache_storage.h"
#include "model/model_weights.h"
#include "planner/memory_planner.h"

namespace pagellm {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

ModelConfig Llama(int hidden, int inter, int layers, int heads, int kv_heads, int vocab,
                  int max_pos) {
  ModelConfig c;
  c.hf_architecture = "LlamaForCausalLM";
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.vocab_size = vocab;
  c.max_position_embeddings = max_pos;
  c.rope_theta = 500000.0f;
  c.weight_dtype = DType::kBF16;
  return c;
}

// Public shapes of Meta's Llama-3-8B and Llama-3-70B (config.json).
ModelConfig Llama3_8B() {
  return Llama(4096, 14336, 32, 32, 8, 128256, 8192);
}
ModelConfig Llama3_70B() {
  return Llama(8192, 28672, 80, 64, 8, 128256, 8192);
}

KvElementFormat Format(KvCacheDtype d, int auto_bits = 16) {
  StatusOr<KvElementFormat> f = ResolveKvElementFormat(d, auto_bits);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return *f;
}

// A plan input with a KV budget given directly, so block arithmetic is easy to follow.
PlanInput SmallInput(std::optional<int64_t> kv_cache_memory) {
  PlanInput in;
  in.model = Llama(256, 512, 2, 4, 2, 1000, 4096);  // head_dim 64
  in.device_name = "test";
  in.device_memory_bytes = 1 * kGiB;
  in.kv_format = Format(KvCacheDtype::kFloat16);
  in.block_size = 16;
  in.max_model_len = 1024;
  in.kv_cache_memory_bytes = kv_cache_memory;
  return in;
}

TEST(KvCacheDtypeTest, ParsesVllmNames) {
  EXPECT_EQ(*ParseKvCacheDtype("auto"), KvCacheDtype::kAuto);
  EXPECT_EQ(*ParseKvCacheDtype("fp8"), KvCacheDtype::kFp8);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e5m2"), KvCacheDtype::kFp8E5m2);
  EXPECT_EQ(*ParseKvCacheDtype("half"), KvCacheDtype::kFloat16);
  EXPECT_EQ(KvCacheDtypeName(KvCacheDtype::kFloat16), "float16");
  StatusOr<KvCacheDtype> bad = ParseKvCacheDtype("fp4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fp8_e4m3"), std::string::npos);
}

TEST(KvCacheDtypeTest, ElementWidthsAndScales) {
  EXPECT_EQ(Format(KvCacheDtype::kAuto, 32).bits_per_element, 32);
  EXPECT_EQ(Format(KvCacheDtype::kAuto, 16).bits_per_element, 16);
  EXPECT_EQ(Format(KvCacheDtype::kBFloat16).bits_per_element, 16);
  EXPECT_EQ(Format(KvCacheDtype::kFp8E4m3).bits_per_element, 8);
  EXPECT_EQ(Format(KvCacheDtype::kFp8E4m3).scale_bytes_per_head_per_token, 0);
  EXPECT_EQ(Format(KvCacheDtype::kInt8).scale_bytes_per_head_per_token, 4);
  EXPECT_EQ(Format(KvCacheDtype::kInt4).bits_per_element, 4);
  EXPECT_FALSE(ResolveKvElementFormat(KvCacheDtype::kAuto, 12).ok());
}

TEST(KvCacheDtypeTest, BytesPerTokenPerLayer) {
  // 2 (K and V) x 8 heads x 128 dims x 2 bytes.
  EXPECT_EQ(KvBytesPerTokenPerLayer(Format(KvCacheDtype::kFloat16), 8, 128), 4096);
  EXPECT_EQ(KvBytesPerTokenPerLayer(Format(KvCacheDtype::kFp8), 8, 128), 2048);
  // int8: 2 x 8 x (128 + 4); int4: 2 x 8 x (64 + 4).
  EXPECT_EQ(KvBytesPerTokenPerLayer(Format(KvCacheDtype::kInt8), 8, 128), 2112);
  EXPECT_EQ(KvBytesPerTokenPerLayer(Format(KvCacheDtype::kInt4), 8, 128), 1088);
}

TEST(MemoryPlanTest, Llama3KvBytesPerTokenMatchTheFormula) {
  PlanInput in = SmallInput(64 * kGiB);
  in.model = Llama3_8B();
  in.max_model_len = 8192;
  StatusOr<MemoryPlan> p8 = ComputeMemoryPlan(in);
  ASSERT_TRUE(p8.ok()) << p8.status().ToString();
  EXPECT_EQ(p8->kv_bytes_per_token, 131072);  // 2 x 32 x 8 x 128 x 2
  EXPECT_EQ(p8->kv_bytes_per_token_per_device, 131072);
  EXPECT_EQ(p8->kv_bytes_per_block, 131072 * 16);
  EXPECT_EQ(p8->blocks_per_request, 512);
  EXPECT_EQ(p8->kv_bytes_per_request, int64_t{131072} * 8192);  // exactly 1 GiB

  in.model = Llama3_70B();
  StatusOr<MemoryPlan> p70 = ComputeMemoryPlan(in);
  ASSERT_TRUE(p70.ok());
  EXPECT_EQ(p70->kv_bytes_per_token, 327680);                    // 2 x 80 x 8 x 128 x 2
  EXPECT_EQ(p70->kv_bytes_per_request, int64_t{327680} * 8192);  // 2.5 GiB

  // The CPU cache is float32: "auto" resolves to 4 bytes there.
  in.kv_format = Format(KvCacheDtype::kAuto, 32);
  EXPECT_EQ(ComputeMemoryPlan(in)->kv_bytes_per_token, 655360);
}

TEST(MemoryPlanTest, Fp8HalvesKvAndDoublesBlocks) {
  PlanInput in = SmallInput(std::nullopt);
  in.model = Llama3_70B();
  in.kv_cache_memory_bytes = 10 * kGiB;
  in.max_model_len = 8192;
  const MemoryPlan fp16 = *ComputeMemoryPlan(in);
  in.kv_format = Format(KvCacheDtype::kFp8);
  const MemoryPlan fp8 = *ComputeMemoryPlan(in);
  EXPECT_EQ(fp8.kv_bytes_per_token * 2, fp16.kv_bytes_per_token);
  EXPECT_EQ(fp8.kv_bytes_per_token, 163840);
  // 10 GiB / (327680 x 16) = 2048 blocks exactly; fp8 holds twice as many.
  EXPECT_EQ(fp16.num_blocks, 2048);
  EXPECT_EQ(fp8.num_blocks, 4096);
  EXPECT_DOUBLE_EQ(fp16.max_concurrency, 4.0);
  EXPECT_DOUBLE_EQ(fp8.max_concurrency, 8.0);
}

TEST(MemoryPlanTest, TensorParallelSplitsWeightsAndKvHeads) {
  const ModelConfig c = Llama3_70B();
  EXPECT_EQ(KvHeadsPerDevice(c, 1), 8);
  EXPECT_EQ(KvHeadsPerDevice(c, 4), 2);
  EXPECT_EQ(KvHeadsPerDevice(c, 8), 1);
  EXPECT_EQ(KvHeadsPerDevice(c, 16), 1);  // replicated: every rank keeps one whole head
  EXPECT_TRUE(ValidateTensorParallel(c, 16).ok());
  EXPECT_FALSE(ValidateTensorParallel(c, 3).ok());  // 64 heads
  EXPECT_FALSE(ValidateTensorParallel(c, 0).ok());
  ModelConfig odd = Llama(1536, 4096, 2, 12, 6, 1000, 1024);  // 12 heads, 6 KV heads
  EXPECT_FALSE(ValidateTensorParallel(odd, 4).ok());          // 6 % 4 and 4 % 6 both non-zero
  EXPECT_TRUE(ValidateTensorParallel(odd, 12).ok());          // 12 % 6 == 0: replicate

  PlanInput in = SmallInput(20 * kGiB);
  in.model = c;
  in.max_model_len = 8192;
  for (int tp : {1, 2, 4, 8, 16}) {
    in.tensor_parallel_size = tp;
    const MemoryPlan p = *ComputeMemoryPlan(in);
    EXPECT_EQ(p.kv_bytes_per_token, 327680) << tp;  // the model's, whatever the split
    const int64_t heads = tp <= 8 ? 8 / tp : 1;
    EXPECT_EQ(p.kv_bytes_per_token_per_device, 2 * 80 * heads * 128 * 2) << tp;
  }
}

// Pipeline stages: a device holds its stage's layers (vLLM's split: 80 layers on 3 stages are
// 27 + 27 + 26), the KV per token of the largest; skip layers count where they fall.
TEST(MemoryPlanTest, PipelineStagesSplitLayers) {
  PlanInput in = SmallInput(20 * kGiB);
  in.model = Llama3_70B();
  in.max_model_len = 8192;
  in.tensor_parallel_size = 2;
  in.pipeline_parallel_size = 3;
  const MemoryPlan p = *ComputeMemoryPlan(in);
  EXPECT_EQ(p.kv_layers_per_device, 27);
  EXPECT_EQ(p.kv_bytes_per_token_per_device, 2 * 27 * 4 * 128 * 2);
  EXPECT_EQ(p.kv_bytes_per_token, 327680);
  in.layer_partition = {20, 20, 40};
  EXPECT_EQ(ComputeMemoryPlan(in)->kv_layers_per_device, 40);
  in.layer_partition = {20, 20};
  EXPECT_EQ(ComputeMemoryPlan(in).status().code(), StatusCode::kInvalidArgument);
  in.layer_partition.clear();
  in.kv_group_windows = {0, 4096};
  in.kv_layers_per_group = 40;
  EXPECT_EQ(ComputeMemoryPlan(in).status().code(), StatusCode::kInvalidArgument);

  // Weights: the first stage holds the embedding, the last the final norm and lm_head.
  ModelConfig c = Llama(64, 128, 5, 4, 2, 100, 512);  // untied, head_dim 16, kv_dim 32
  const int64_t layer = 2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64;
  const WeightsFootprint w = EstimateWeights(c, 2, 1, 2);  // 3 + 2 layers
  EXPECT_EQ(w.num_parameters, 2 * 6400 + 5 * layer + 64);
  EXPECT_EQ(w.num_parameters_per_device, std::max(6400 + 3 * layer, 2 * layer + 6400 + 64));
  c.tie_word_embeddings = true;  // the last stage holds the table for its lm_head
  EXPECT_EQ(EstimateWeights(c, 2, 1, 2, {1, 4}).num_parameters_per_device, 4 * layer + 6400 + 64);
}

TEST(ModelFootprintTest, WeightsFromShapes) {
  // Llama-3-8B: 8,030,261,248 parameters (Meta's published 8.03B).
  const WeightsFootprint w8 = EstimateWeights(Llama3_8B(), 2, 1);
  EXPECT_EQ(w8.num_parameters, 8030261248);
  EXPECT_EQ(w8.bytes, 16060522496);
  EXPECT_EQ(w8.bytes_per_device, w8.bytes);

  // Llama-3-70B: 70,553,706,496 parameters; per rank at tp 4 the norms are replicated.
  const WeightsFootprint w70 = EstimateWeights(Llama3_70B(), 2, 4);
  EXPECT_EQ(w70.num_parameters, 70553706496);
  EXPECT_EQ(w70.bytes, 141107412992);
  EXPECT_EQ(w70.num_parameters_per_device, 17639415808);
  EXPECT_EQ(w70.bytes_per_device, 35278831616);

  // Tied embeddings drop the lm_head; Qwen2-style biases add q_dim + 2 kv_dim per layer.
  ModelConfig c = Llama(64, 128, 2, 4, 2, 100, 512);  // head_dim 16, kv_dim 32
  c.tie_word_embeddings = true;
  c.attention_bias = true;
  // embed 6400; per layer 2*64*64 + 2*32*64 + 3*128*64 + 2*64 + (64 + 64) = 37120; final 64.
  EXPECT_EQ(EstimateWeights(c, 4, 1).num_parameters, 6400 + 2 * 37120 + 64);

  const WeightsFootprint total = WeightsFromTotal(1001, 500, 4);
  EXPECT_EQ(total.bytes_per_device, 251);  // rounded up
}

// A Qwen2-MoE-shaped layer: each rank holds ceil(30 / 4) = 8 columns of every expert and
// ceil(50 / 4) = 13 of the shared expert (as the engine's shards, model/tensor_parallel_shard.h);
// the router and the shared expert's gate are replicated.
TEST(ModelFootprintTest, MixtureOfExpertsSplitsEveryExpert) {
  ModelConfig c = Llama(64, 96, 1, 4, 4, 100, 512);  // head_dim 16
  c.arch = Architecture::kQwen2Moe;
  c.moe.num_experts = 4;
  c.moe.num_experts_per_tok = 2;
  c.moe.expert_intermediate = 30;
  c.moe.shared_expert_intermediate = 50;
  // Whole: embed + lm_head 12800; attention 2*64*64*2 + 2*64 = 16512; router 256, experts
  // 4*3*30*64 = 23040, shared expert 3*50*64 + 64 = 9664; final norm 64.
  const WeightsFootprint w = EstimateWeights(c, 4, 4);
  EXPECT_EQ(w.num_parameters, 12800 + 16512 + 256 + 23040 + 9664 + 64);
  // Rank: vocabulary 25 rows x2 = 3200; attention 2*16*64*2 + 128 = 4224; router 256, experts
  // 4*3*8*64 = 6144, shared expert 3*13*64 + 64 = 2560; final norm 64.
  EXPECT_EQ(w.num_parameters_per_device, 3200 + 4224 + 256 + 6144 + 2560 + 64);
  EXPECT_EQ(w.bytes_per_device, 4 * w.num_parameters_per_device);
}

TEST(ModelFootprintTest, GpuActivationEstimate) {
  // T=2048, R=256, tp 4, bf16: 2048 x (3x8192 + (2x8192 + 3x28672)/4 + 2x256) x 2
  //   + 256 x (8192 x 2 + 2 x 128256 x 4)
  EXPECT_EQ(EstimateGpuActivationBytes(Llama3_70B(), 2048, 256, 4, 2), 474480640);
  // Fewer tokens than sequences: one sampled row per token at most.
  ModelConfig c = Llama(64, 128, 2, 4, 2, 100, 512);
  EXPECT_EQ(EstimateGpuActivationBytes(c, 4, 256, 1, 2),
            4 * (3 * 64 + 2 * 64 + 3 * 128 + 2 * 32) * 2 + 4 * (64 * 2 + 2 * 100 * 4));
}

TEST(MemoryPlanTest, Llama3_70BOnFourA100s) {
  PlanInput in;
  in.model = Llama3_70B();
  in.device_name = "A100-80GB";
  in.tensor_parallel_size = 4;
  in.device_memory_bytes = FindDevice("a100-80gb")->memory_bytes;
  in.gpu_memory_utilization = 0.9;
  in.weights = EstimateWeights(in.model, 2, 4);
  in.activation_bytes = EstimateGpuActivationBytes(in.model, 2048, 256, 4, 2);
  in.kv_format = Format(KvCacheDtype::kAuto, 16);
  in.block_size = 16;
  in.max_model_len = 8192;
  const MemoryPlan p = *PlanMemory(in);
  EXPECT_EQ(in.device_memory_bytes, 81050 * kMiB);
  EXPECT_EQ(p.usable_memory_bytes, 76488376320);  // floor(0.9 x 84987084800)
  EXPECT_EQ(p.kv_cache_budget_bytes, 76488376320 - 35278831616 - 474480640);
  EXPECT_EQ(p.kv_bytes_per_token_per_device, 81920);
  EXPECT_EQ(p.kv_bytes_per_block, 1310720);
  EXPECT_EQ(p.num_blocks, 31078);  // floor(40735064064 / 1310720)
  EXPECT_EQ(p.num_blocks_allocated, 31079);
  EXPECT_EQ(p.num_tokens, 497248);
  EXPECT_DOUBLE_EQ(p.max_concurrency, 31078.0 / 512.0);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(p.max_model_len_that_fits, 8192);

  in.kv_format = Format(KvCacheDtype::kFp8);
  const MemoryPlan p8 = *PlanMemory(in);
  EXPECT_EQ(p8.num_blocks, 62156);
  EXPECT_DOUBLE_EQ(p8.max_concurrency, 62156.0 / 512.0);
}

TEST(MemoryPlanTest, BlockCountIsTheFloorOfTheBudget) {
  PlanInput in = SmallInput(std::nullopt);
  // 2 layers x 2 heads x 64 dims x 2 (K,V) x 2 bytes = 1024 bytes/token; 16384 per block.
  for (int64_t extra : {int64_t{0}, int64_t{1}, int64_t{16383}}) {
    in.kv_cache_memory_bytes = 10 * 16384 + extra;
    const MemoryPlan p = *ComputeMemoryPlan(in);
    EXPECT_EQ(p.kv_bytes_per_token, 1024);
    EXPECT_EQ(p.kv_bytes_per_block, 16384);
    EXPECT_EQ(p.num_blocks, 10) << extra;
    EXPECT_EQ(p.num_blocks_allocated, 11);
    EXPECT_EQ(p.kv_cache_bytes_allocated, 11 * 16384);
    EXPECT_EQ(p.num_tokens, 160);
  }
}

TEST(MemoryPlanTest, ConcurrencyCountsWholeBlocksPerRequest) {
  PlanInput in = SmallInput(100 * 16384);  // 100 blocks
  in.max_model_len = 1000;                 // 63 blocks (the last one partly used)
  const MemoryPlan p = *ComputeMemoryPlan(in);
  EXPECT_EQ(p.blocks_per_request, 63);
  EXPECT_DOUBLE_EQ(p.max_concurrency, 100.0 / 63.0);
  EXPECT_EQ(p.kv_bytes_per_request, 63 * 16 * 1024);
}

TEST(MemoryPlanTest, UtilizationBudgetSubtractsWeightsAndActivations) {
  PlanInput in = SmallInput(std::nullopt);
  in.device_memory_bytes = 1000000;
  in.gpu_memory_utilization = 0.5;
  in.weights = WeightsFromTotal(200000, 100000, 1);
  in.activation_bytes = 50000;
  const MemoryPlan p = *ComputeMemoryPlan(in);
  EXPECT_EQ(p.usable_memory_bytes, 500000);
  EXPECT_EQ(p.kv_cache_budget_bytes, 250000);
  EXPECT_EQ(p.num_blocks, 15);  // floor(250000 / 16384)
  EXPECT_FALSE(p.budget_from_kv_cache_memory);
}

TEST(MemoryPlanTest, KvCacheMemoryOverridesUtilization) {
  PlanInput in = SmallInput(64 * 16384);
  in.gpu_memory_utilization = 0.01;  // would leave nothing: 10 MiB < the weights
  in.weights = WeightsFromTotal(512 * kMiB, 0, 1);
  const MemoryPlan p = *PlanMemory(in);
  EXPECT_TRUE(p.budget_from_kv_cache_memory);
  EXPECT_EQ(p.kv_cache_budget_bytes, 64 * 16384);
  EXPECT_EQ(p.num_blocks, 64);
  EXPECT_TRUE(p.fits);  // 1024 tokens = 64 blocks
}

TEST(MemoryPlanTest, NumGpuBlocksOverrideReplacesTheBudget) {
  PlanInput in = SmallInput(10 * 16384);
  in.num_gpu_blocks_override = 70;
  const MemoryPlan p = *ComputeMemoryPlan(in);
  EXPECT_TRUE(p.num_blocks_from_override);
  EXPECT_EQ(p.num_blocks, 70);
  EXPECT_EQ(p.num_blocks_allocated, 71);
  EXPECT_EQ(p.num_tokens, 1120);
  EXPECT_TRUE(p.fits);               // 1024 tokens need 64 blocks
  ASSERT_EQ(p.warnings.size(), 1u);  // 70 blocks exceed the 10 the budget holds
  EXPECT_NE(p.warnings[0].find("exceeds"), std::string::npos);

  in.num_gpu_blocks_override = 63;
  const MemoryPlan small = *ComputeMemoryPlan(in);
  EXPECT_FALSE(small.fits);
  EXPECT_EQ(small.max_model_len_that_fits, 63 * 16);
  const Status refused = CheckPlanFits(small);
  EXPECT_NE(refused.message().find("--num-gpu-blocks-override 63"), std::string::npos);
}

TEST(MemoryPlanTest, RefusesAMaxModelLenThatDoesNotFit) {
  PlanInput in = SmallInput(std::nullopt);
  in.device_memory_bytes = 4 * kMiB;
  in.gpu_memory_utilization = 0.5;
  in.weights = WeightsFromTotal(1 * kMiB, 0, 1);
  in.activation_bytes = 256 * 1024;
  in.max_model_len = 4096;  // 256 blocks = 4 MiB of KV
  // Budget 2 MiB - 1 MiB - 256 KiB = 786432 bytes = 48 blocks = 768 tokens.
  const MemoryPlan p = *ComputeMemoryPlan(in);
  EXPECT_EQ(p.kv_cache_budget_bytes, 786432);
  EXPECT_EQ(p.num_blocks, 48);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.max_model_len_that_fits, 768);

  StatusOr<MemoryPlan> refused = PlanMemory(in);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("max model length (4096 tokens)"), std::string::npos) << m;
  EXPECT_NE(m.find("4194304 bytes"), std::string::npos) << m;  // 256 blocks x 16384
  EXPECT_NE(m.find("48 blocks = 786432 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("largest max model length that fits is 768"), std::string::npos) << m;
  EXPECT_NE(m.find("--gpu-memory-utilization"), std::string::npos) << m;

  // One token more than the blocks hold does not fit; exactly the blocks' tokens does.
  in.max_model_len = 769;
  EXPECT_FALSE(PlanMemory(in).ok());
  in.max_model_len = 768;
  EXPECT_TRUE(PlanMemory(in).ok());
}

TEST(MemoryPlanTest, RefusesWhenWeightsLeaveNoRoom) {
  PlanInput in = SmallInput(std::nullopt);
  in.device_memory_bytes = 10 * kGiB;
  in.weights = WeightsFromTotal(12 * kGiB, 0, 1);
  const MemoryPlan p = *ComputeMemoryPlan(in);
  EXPECT_LT(p.kv_cache_budget_bytes, 0);
  EXPECT_EQ(p.num_blocks, 0);
  EXPECT_EQ(p.max_model_len_that_fits, 0);
  const Status s = CheckPlanFits(p);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("no memory is left for the KV cache"), std::string::npos);
  EXPECT_NE(s.message().find("12.00 GiB"), std::string::npos) << s.message();
}

TEST(MemoryPlanTest, LargestFittingLengthIsABinarySearch) {
  for (int64_t blocks : {0, 1, 2, 7, 100}) {
    for (int64_t bs : {1, 16, 256}) {
      for (int64_t upper : {1, 15, 16, 17, 1000, 100000}) {
        int calls = 0;
        const int64_t got = LargestFittingLength(upper, [&](int64_t len) {
          ++calls;
          return (len + bs - 1) / bs <= blocks;
        });
        EXPECT_EQ(got, std::min(upper, blocks * bs)) << blocks << " " << bs << " " << upper;
        EXPECT_LE(calls, 20);
      }
    }
  }
}

TEST(MemoryPlanTest, RejectsBadInputs) {
  PlanInput in = SmallInput(kGiB);
  in.gpu_memory_utilization = 0.0;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.gpu_memory_utilization = 1.01;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.gpu_memory_utilization = 1.0;
  EXPECT_TRUE(ComputeMemoryPlan(in).ok());
  in.block_size = 0;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.block_size = 257;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.block_size = 256;
  EXPECT_TRUE(ComputeMemoryPlan(in).ok());
  in.max_model_len = 0;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.max_model_len = 16;
  in.num_gpu_blocks_override = 0;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.num_gpu_blocks_override.reset();
  in.kv_cache_memory_bytes = 0;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());
  in.kv_cache_memory_bytes.reset();
  in.device_memory_bytes = 0;
  EXPECT_FALSE(ComputeMemoryPlan(in).ok());  // nothing to size the cache from
}

TEST(MemoryPlanTest, SummaryLinesNameEveryQuantity) {
  const MemoryPlan p = *ComputeMemoryPlan(SmallInput(10 * 16384));
  const std::vector<std::string> lines = PlanSummaryLines(p);
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  EXPECT_NE(all.find("weights:"), std::string::npos);
  EXPECT_NE(all.find("activation peak:"), std::string::npos);
  EXPECT_NE(all.find("1024 bytes per token"), std::string::npos) << all;
  EXPECT_NE(all.find("10 usable + 1 null = 11 allocated"), std::string::npos) << all;
  EXPECT_NE(all.find("holding 160 tokens"), std::string::npos) << all;
  EXPECT_NE(all.find("maximum concurrency for 1024 tokens per request: 0.16x"), std::string::npos)
      << all;
}

TEST(DeviceCatalogTest, NamedDevices) {
  EXPECT_EQ(FindDevice("H100-80GB")->memory_bytes, 81008 * kMiB);
  EXPECT_EQ(FindDevice("h200")->memory_bytes, 143165 * kMiB);
  EXPECT_EQ(FindDevice("l4")->memory_bytes, 22491 * kMiB);
  EXPECT_TRUE(FindDevice("CPU")->is_host);
  StatusOr<DeviceSpec> bad = FindDevice("V100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("A100-80GB"), std::string::npos);
  for (const DeviceSpec& d : KnownDevices()) {
    if (d.is_host) continue;
    // CUDA reports less than nvidia-smi's total, by under 1 GiB.
    EXPECT_LT(d.memory_bytes, d.nominal_mib * kMiB) << d.name;
    EXPECT_GT(d.memory_bytes, d.nominal_mib * kMiB - kGiB) << d.name;
  }
}

// ---- The CPU engine's plan ----

std::string SharedModel(const char* name) {
  return std::string(PAGELLM_SHARED_DIR) + "/models/" + name;
}

TEST(CpuPlanTest, MatchesTheFormulaAndTheStorageShape) {
  StatusOr<std::unique_ptr<LoadedModel>> m = LoadModel(SharedModel("stories260K"));
  if (!m.ok()) GTEST_SKIP() << m.status().ToString();
  const LoadedModel& model = **m;
  const ModelConfig& c = model.config;
  CpuKvOptions o;
  o.host_memory_bytes = kGiB;
  o.gpu_memory_utilization = 0.25;
  o.max_num_batched_tokens = 512;
  o.max_num_seqs = 8;
  const MemoryPlan p = *PlanCpuKvCache(model, o);

  // 5 layers x 4 KV heads x 8 dims: 2 x 5 x 4 x 8 x 4 bytes = 1280 bytes per token.
  EXPECT_EQ(p.kv_bytes_per_token, 1280);
  const int64_t act =
      (512 * (3 * 64 + 2 * 64 + 2 * 32 + 2 * 172) + 8 * (64 + 512)) * int64_t{sizeof(float)};
  EXPECT_EQ(p.activation_bytes, act);
  EXPECT_EQ(p.activation_bytes, BackendActivationBytes(BackendKind::kCpu, c, 512, 8));
  EXPECT_EQ(p.weights_bytes, model.weights.total_bytes);
  const int64_t budget = kGiB / 4 - model.weights.total_bytes - act;
  EXPECT_EQ(p.num_blocks, budget / (1280 * 16));
  EXPECT_EQ(p.input.max_model_len, c.max_position_embeddings);

  const KvCacheShape shape = CpuKvCacheShape(p);
  EXPECT_EQ(shape.num_blocks, p.num_blocks + 1);
  EXPECT_EQ(shape.bytes_per_token(), p.kv_bytes_per_token);
  EXPECT_EQ(shape.bytes_per_block(), p.kv_bytes_per_block);
  EXPECT_EQ(shape.total_bytes(), p.kv_cache_bytes_allocated);
}

TEST(CpuPlanTest, OverridesAndRefusals) {
  ModelConfig c = Llama(64, 172, 5, 8, 4, 512, 512);
  c.weight_dtype = DType::kF32;  // "auto" stores float32 for an F32 model: 1280 bytes per token
  CpuKvOptions o;
  o.host_memory_bytes = kGiB;
  o.num_gpu_blocks_override = 40;  // 640 tokens
  MemoryPlan p = *PlanCpuKvCache(c, 1000000, o);
  EXPECT_EQ(p.num_blocks, 40);
  EXPECT_EQ(CpuKvCacheShape(p).num_blocks, 41);

  o.num_gpu_blocks_override = 31;  // 496 tokens < 512
  StatusOr<MemoryPlan> refused = PlanCpuKvCache(c, 1000000, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("largest max model length that fits is 496"),
            std::string::npos)
      << refused.status().message();
  o.max_model_len = 496;
  EXPECT_TRUE(PlanCpuKvCache(c, 1000000, o).ok());

  o.num_gpu_blocks_override.reset();
  o.kv_cache_memory = 100 * 1280 * 16;
  o.activation_bytes = 0;
  p = *PlanCpuKvCache(c, 1000000, o);
  EXPECT_EQ(p.num_blocks, 100);
  EXPECT_EQ(p.activation_bytes, 0);

  // Quantised caches: the same budget holds 4x (fp8) and 32/(4 + 8 x 4 / head_dim)... blocks.
  o.kv_cache_dtype = KvCacheDtype::kFp8;
  StatusOr<MemoryPlan> fp8 = PlanCpuKvCache(c, 1000000, o);
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  EXPECT_EQ(fp8->num_blocks, 400);
  EXPECT_EQ(CpuKvCacheShape(*fp8).dtype, KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(CpuKvCacheShape(*fp8).bytes_per_block(), fp8->kv_bytes_per_block);
  o.kv_cache_dtype = KvCacheDtype::kInt4;
  o.kv_cache_dtype_skip_layers = {0};
  StatusOr<MemoryPlan> int4 = PlanCpuKvCache(c, 1000000, o);
  ASSERT_TRUE(int4.ok()) << int4.status().ToString();
  const KvCacheShape shape = CpuKvCacheShape(*int4);
  EXPECT_EQ(shape.layer_dtype(0), KvCacheDtype::kFloat32);
  EXPECT_EQ(shape.layer_dtype(1), KvCacheDtype::kInt4);
  EXPECT_EQ(shape.bytes_per_token(), int4->kv_bytes_per_token);
  o.kv_cache_dtype_skip_layers = {99};
  EXPECT_EQ(PlanCpuKvCache(c, 1000000, o).status().code(), StatusCode::kInvalidArgument);
  o.kv_cache_dtype_skip_layers.clear();
  o.kv_cache_dtype = KvCacheDtype::kFloat32;
  EXPECT_TRUE(PlanCpuKvCache(c, 1000000, o).ok());
}

TEST(CpuPlanTest, AutoFollowsTheModelDtype) {
  EXPECT_EQ(AutoKvCacheDtype(DType::kF32), KvCacheDtype::kFloat32);
  EXPECT_EQ(AutoKvCacheDtype(DType::kBF16), KvCacheDtype::kBFloat16);
  EXPECT_EQ(AutoKvCacheDtype(DType::kF16), KvCacheDtype::kFloat16);
  EXPECT_EQ(AutoKvCacheDtype(DType::kQ8_0), KvCacheDtype::kFloat16);
  ModelConfig c = Llama(64, 172, 5, 8, 4, 512, 512);  // BF16 weights
  CpuKvOptions o;
  o.host_memory_bytes = kGiB;
  o.kv_cache_memory = 100 * 640 * 16;
  o.activation_bytes = 0;
  StatusOr<MemoryPlan> p = PlanCpuKvCache(c, 1000000, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->kv_bytes_per_token, 640);
  EXPECT_EQ(p->num_blocks, 100);
  EXPECT_EQ(CpuKvCacheShape(*p).dtype, KvCacheDtype::kBFloat16);
  o.kv_cache_dtype = KvCacheDtype::kInt8;  // 8 + 4 bytes per 8-dim row: 2 x 5 x 4 x 12 = 480
  p = PlanCpuKvCache(c, 1000000, o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kv_bytes_per_token, 480);
  EXPECT_EQ(CpuKvCacheShape(*p).bytes_per_token(), 480);
}

TEST(CpuPlanTest, DraftModelSharesTheBudget) {
  ModelConfig c = Llama(64, 172, 5, 8, 4, 512, 512);
  c.weight_dtype = DType::kF32;  // 1280 bytes per token
  const ModelConfig dc = Llama(64, 172, 2, 8, 4, 512, 512);
  const DraftFootprint d = CpuDraftFootprint(dc, 500000, 2048, 256);
  KvCacheShape dshape;
  dshape.num_layers = 2;
  dshape.num_kv_heads = 4;
  dshape.head_dim = 8;
  EXPECT_EQ(d.kv_bytes_per_token, dshape.bytes_per_token());
  EXPECT_EQ(d.activation_bytes, CpuActivationBytes(dc, 2048, 256));
  EXPECT_EQ(d.weights_bytes, 500000);

  CpuKvOptions o;
  o.host_memory_bytes = kGiB;
  o.gpu_memory_utilization = 0.01;
  o.activation_bytes = 0;
  const MemoryPlan alone = *ComputeCpuKvPlan(c, 1000000, 0, o);
  StatusOr<MemoryPlan> with = ComputeCpuKvPlanWithDraft(c, 1000000, 0, o, d);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  // The draft's weights and activations are counted, and its KV comes out of the same budget.
  EXPECT_EQ(with->weights_bytes, 1500000);
  EXPECT_EQ(with->activation_bytes, d.activation_bytes);
  EXPECT_EQ(with->kv_bytes_per_token, 1280);
  const int64_t budget = with->usable_memory_bytes - 1500000 - d.activation_bytes;
  const int64_t both_per_block = 16 * (1280 + d.kv_bytes_per_token);
  EXPECT_LE(with->num_blocks * both_per_block, budget);
  EXPECT_GT((with->num_blocks + 2) * both_per_block, budget);  // and it is tight
  EXPECT_LT(with->num_blocks, alone.num_blocks);

  // A draft that takes nothing changes nothing.
  const MemoryPlan zero = *ComputeCpuKvPlanWithDraft(c, 1000000, 0, o, DraftFootprint{});
  EXPECT_EQ(zero.num_blocks, alone.num_blocks);
  EXPECT_EQ(zero.weights_bytes, alone.weights_bytes);
  // --kv-cache-memory is split too; --num-gpu-blocks-override fixes both caches' blocks.
  o.kv_cache_memory = 100 * both_per_block + 1000;  // + slack for the rounding of the split
  EXPECT_EQ(ComputeCpuKvPlanWithDraft(c, 1000000, 0, o, d)->num_blocks, 100);
  o.kv_cache_memory.reset();
  o.num_gpu_blocks_override = 40;
  EXPECT_EQ(ComputeCpuKvPlanWithDraft(c, 1000000, 0, o, d)->num_blocks, 40);
}

TEST(CpuPlanTest, FreeMemoryBoundsTheDefaultBudget) {
  ModelConfig c = Llama(64, 172, 5, 8, 4, 512, 512);
  c.weight_dtype = DType::kF32;  // 1280 bytes per token, 20,480 per block
  CpuKvOptions o;
  o.host_memory_bytes = 16 * kGiB;  // headroom = max(1 GiB, 16 GiB / 10)
  o.activation_bytes = 0;
  const int64_t headroom = 16 * kGiB / 10;
  o.host_free_bytes = 4 * kGiB;  // another process holds most of the host
  MemoryPlan p = *PlanCpuKvCache(c, 1000000, o);
  EXPECT_EQ(p.kv_cache_budget_bytes, 4 * kGiB - 1000000 - headroom);
  EXPECT_EQ(p.num_blocks, (4 * kGiB - 1000000 - headroom) / 20480);
  EXPECT_NE(p.kv_budget_capped_by.find("memory free at start-up"), std::string::npos);
  bool said = false;
  for (const std::string& line : PlanSummaryLines(p)) {
    said = said || line.find("bounded by memory free at start-up") != std::string::npos;
  }
  EXPECT_TRUE(said);

  // Plenty free: the utilization rule binds, and nothing is said.
  o.host_free_bytes = 16 * kGiB;
  p = *PlanCpuKvCache(c, 1000000, o);
  EXPECT_EQ(p.kv_cache_budget_bytes,
            static_cast<int64_t>(16 * kGiB * 0.9) - 1000000);  // 0.9 x host - weights
  EXPECT_TRUE(p.kv_budget_capped_by.empty());

  // Nothing free beyond the headroom: refused, naming the bound and --kv-cache-memory.
  o.host_free_bytes = headroom;
  StatusOr<MemoryPlan> refused = PlanCpuKvCache(c, 1000000, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("memory free at start-up"), std::string::npos);
  EXPECT_NE(refused.status().message().find("--kv-cache-memory"), std::string::npos);

  // An explicit budget is the operator's choice: not bounded.
  o.kv_cache_memory = 100 * 20480;
  EXPECT_EQ(PlanCpuKvCache(c, 1000000, o)->num_blocks, 100);
}

TEST(CpuPlanTest, DefaultsComeFromTheHost) {
  ModelConfig c = Llama(64, 172, 5, 8, 4, 512, 512);
  CpuKvOptions o;  // host memory detected
  o.gpu_memory_utilization = 0.001;
  StatusOr<MemoryPlan> p = ComputeCpuKvPlan(c, 1000, 0, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(static_cast<uint64_t>(p->input.device_memory_bytes), AvailableHostMemoryBytes());
  EXPECT_GT(p->input.device_memory_bytes, 0);
  // The free-memory bound is read from the host too (MemAvailable moves, so only its presence
  // and range are checked).
  ASSERT_TRUE(p->input.free_memory_bytes.has_value());
  EXPECT_GT(*p->input.free_memory_bytes, 0);
  EXPECT_LE(*p->input.free_memory_bytes, p->input.device_memory_bytes);
}

}  // namespace
}  // namespace pagellm
