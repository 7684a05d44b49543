// `pagellm plan` on this machine must predict exactly the KV blocks the engine allocates, and
// the engine must refuse a max_model_len that cannot fit one request, with the numbers and
// the largest length that would fit.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <thread>

#include "backend/tensor_parallel_backend.h"
#include "dist/local_communicator.h"
#include "engine/engine_core.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm {
namespace {

namespace fs = std::filesystem;
const std::string kModel = std::string(PAGELLM_SHARED_DIR) + "/models/stories260K";

std::string RunCommand(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

struct Config {
  std::string flags;  // for `pagellm plan`
  EngineConfig engine;
};

TEST(PlanEngineAgreementTest, BlockCountsMatchOnFiveConfigurations) {
  if (!fs::exists(kModel + "/model.safetensors")) GTEST_SKIP() << "shared assets absent";
  std::vector<Config> configs(3);
  configs[0].flags = "--gpu-memory-utilization 0.002";
  configs[0].engine.gpu_memory_utilization = 0.002;
  configs[1].flags = "--kv-cache-memory 1MiB --block-size 1";
  configs[1].engine.kv_cache_memory = 1 << 20;
  configs[1].engine.block_size = 1;
  configs[2].flags =
      "--kv-cache-memory 3000000 --block-size 256 --max-num-seqs 8 "
      "--max-num-batched-tokens 256";
  configs[2].engine.kv_cache_memory = 3000000;
  configs[2].engine.block_size = 256;
  configs[2].engine.scheduler.max_num_seqs = 8;
  configs[2].engine.scheduler.max_num_batched_tokens = 256;
  // Quantised caches: int8 rows carry their scale and zero point; int4 with a skipped layer.
  configs.resize(5);
  configs[3].flags = "--kv-cache-memory 1MiB --kv-cache-dtype int8";
  configs[3].engine.kv_cache_memory = 1 << 20;
  configs[3].engine.kv_cache_dtype = KvCacheDtype::kInt8;
  configs[4].flags = "--kv-cache-memory 1MiB --kv-cache-dtype int4 --kv-cache-dtype-skip-layers 0";
  configs[4].engine.kv_cache_memory = 1 << 20;
  configs[4].engine.kv_cache_dtype = KvCacheDtype::kInt4;
  configs[4].engine.kv_cache_dtype_skip_layers = {0};
  for (Config& c : configs) {
    c.engine.model = kModel;
    auto core = EngineCore::Create(c.engine);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    const std::string out = RunCommand(std::string(PAGELLM_BINARY) + " plan --model " + kModel +
                                       " " + c.flags + " --json 2>/dev/null");
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["num_blocks"].get<int64_t>(), (*core)->kv_report().num_blocks) << c.flags;
    EXPECT_EQ(j["kv_bytes_per_token"].get<int64_t>(), (*core)->kv_report().kv_bytes_per_token);
    EXPECT_EQ((*core)->stats().num_usable_blocks, (*core)->kv_report().num_blocks);
  }
}

// Split across ranks (threads here, rank 0 running the engine), `pagellm plan -tp N -pp M`
// plans per device: a rank's KV heads of its stage's layers per block, the largest rank's
// weights, and the block count every rank allocates. KV budgets per device, in three formats.
TEST(PlanEngineAgreementTest, TensorAndPipelineParallelBlocksMatchPerDevice) {
  if (!fs::exists(kModel + "/model.safetensors")) GTEST_SKIP() << "shared assets absent";
  struct Case {
    std::string flags;
    int64_t kv_bytes;
    KvCacheDtype dtype;
    std::vector<int> skip;
    int largest_stage;  // at PP 2 (layers [0, 3) and [3, 5)): the stage with the most KV bytes
  };
  const std::vector<Case> cases = {
      {"--kv-cache-memory 1MiB", 1 << 20, KvCacheDtype::kAuto, {}, 0},
      {"--kv-cache-memory 3000000 --kv-cache-dtype int8", 3000000, KvCacheDtype::kInt8, {}, 0},
      // Layer 4 kept in float32 makes stage 1's two layers the larger block.
      {"--kv-cache-memory 1MiB --kv-cache-dtype int4 --kv-cache-dtype-skip-layers 4",
       1 << 20,
       KvCacheDtype::kInt4,
       {4},
       1}};
  for (const auto& [tp, pp] : {std::pair{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(fmt::format("TP {} x PP {}: {}", tp, pp, k.flags));
      const int ranks = tp * pp;
      auto comms = CreateLocalGroup(ranks, std::chrono::milliseconds(60000));
      std::vector<std::thread> workers;
      for (int r = 1; r < ranks; ++r)
        workers.emplace_back([&, r] { EXPECT_TRUE(RunTensorParallelWorker(*comms[r]).ok()); });
      {
        EngineConfig c;
        c.model = kModel;
        c.threads = 1;
        c.kv_cache_memory = k.kv_bytes;
        c.kv_cache_dtype = k.dtype;
        c.kv_cache_dtype_skip_layers = k.skip;
        c.tensor_parallel_size = tp;
        c.pipeline_parallel_size = pp;
        c.tensor_parallel_group = comms[0].get();
        auto core = EngineCore::Create(c);
        ASSERT_TRUE(core.ok()) << core.status().ToString();
        const std::string out =
            RunCommand(fmt::format("{} plan --model {} {} -tp {} -pp {} --json 2>/dev/null",
                                   PAGELLM_BINARY, kModel, k.flags, tp, pp));
        nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << out;
        EXPECT_EQ(j["num_blocks"].get<int64_t>(), (*core)->kv_report().num_blocks);
        EXPECT_EQ(j["weights_bytes_per_device"].get<int64_t>(),
                  (*core)->kv_report().weights_bytes_per_device);
        // Rank 0's allocation: the plan's blocks; of the plan's per-device size when stage 0
        // is the largest (else smaller: the plan's size is the largest stage's).
        const KvCacheShape& mine = (*core)->local_kv_shape();
        EXPECT_EQ(mine.num_blocks, j["num_blocks_allocated"].get<int64_t>());
        EXPECT_EQ(mine.num_kv_heads, j["kv_heads_per_device"].get<int>());
        if (pp == 1 || k.largest_stage == 0) {
          EXPECT_EQ(mine.bytes_per_block(), j["kv_bytes_per_block"].get<int64_t>());
          EXPECT_EQ(mine.num_layers, j["kv_layers_per_device"].get<int>());
        } else {
          EXPECT_LT(mine.bytes_per_block(), j["kv_bytes_per_block"].get<int64_t>());
          EXPECT_EQ(j["kv_layers_per_device"].get<int>(), 2);
        }
      }
      EXPECT_TRUE(ShutDownTensorParallelWorkers(*comms[0]).ok());
      for (std::thread& t : workers) t.join();
    }
  }
}

TEST(PlanEngineAgreementTest, Gemma3BlocksAndConcurrencyMatch) {
  // Gemma 3's local layers free the blocks their window (8 tokens here) no longer sees: a pool
  // block holds one layer (5 local + 1 global layers, kv/kv_cache_groups.h), and a request of
  // 256 tokens holds 16 global blocks of 16 tokens + 5 x 2 local ones. Plan and engine must agree
  // on the blocks and on the concurrency they give, and the full-KV layout
  // (--disable-hybrid-kv-cache-manager) must give fewer requests.
  if (!fs::exists(std::string(PAGELLM_SHARED_DIR) + "/models/stories260K/tokenizer.model"))
    GTEST_SKIP() << "shared assets absent (the random model borrows tok512)";
  const fs::path dir = fs::temp_directory_path() / "pagellm_plan_gemma3";
  const std::string gen = std::string("/usr/bin/python3 ") + PAGELLM_SOURCE_DIR +
                          "/tools/gen_model.py --preset tiny-gemma3 --quiet --shared-dir " +
                          PAGELLM_SHARED_DIR + " --out " + dir.string();
  if (std::system(gen.c_str()) != 0) GTEST_SKIP() << "model generator unavailable";
  for (int64_t kv_bytes : {int64_t{1} << 20, int64_t{3000000}}) {
    EngineConfig c;
    c.model = dir.string();
    c.kv_cache_memory = kv_bytes;
    c.max_model_len = 256;
    auto core = EngineCore::Create(c);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    const std::string out = RunCommand(std::string(PAGELLM_BINARY) + " plan --model " +
                                       dir.string() + " --max-model-len 256 --kv-cache-memory " +
                                       std::to_string(kv_bytes) + " --json 2>/dev/null");
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out;
    EXPECT_EQ(j["num_blocks"].get<int64_t>(), (*core)->kv_report().num_blocks);
    EXPECT_EQ(j["kv_bytes_per_token"].get<int64_t>(), (*core)->kv_report().kv_bytes_per_token);
    EXPECT_EQ(j["max_concurrency"].get<double>(), (*core)->kv_report().max_concurrency);
    EXPECT_EQ(j["blocks_per_request"].get<int64_t>(), 16 + 5 * 2);
    EXPECT_EQ(j["kv_layers_per_group"].get<int>(), 1);
    EXPECT_EQ((*core)->stats().num_usable_blocks, (*core)->kv_report().num_blocks);
    EXPECT_DOUBLE_EQ((*core)->kv_report().max_concurrency,
                     static_cast<double>((*core)->kv_report().num_blocks) / (16 + 5 * 2));
    c.disable_hybrid_kv_cache_manager = true;
    auto full = EngineCore::Create(c);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    EXPECT_TRUE((*full)->kv_report().kv_group_windows.empty());
    // Same bytes: one full block holds 6 layers, and a request needs 16 of them.
    EXPECT_NEAR((*full)->kv_report().num_blocks, (*core)->kv_report().num_blocks / 6.0, 1.0);
    EXPECT_GT((*core)->kv_report().max_concurrency, 3.0 * (*full)->kv_report().max_concurrency);
  }
}

TEST(PlanEngineAgreementTest, RefusesImpossibleMaxModelLen) {
  if (!fs::exists(kModel + "/model.safetensors")) GTEST_SKIP() << "shared assets absent";
  EngineConfig c;
  c.model = kModel;
  c.max_model_len = 512;
  c.kv_cache_memory = 100 * 1280;  // 100 tokens of KV at 1280 bytes/token
  auto core = EngineCore::Create(c);
  ASSERT_FALSE(core.ok());
  EXPECT_EQ(core.status().code(), StatusCode::kResourceExhausted);
  const std::string& msg = core.status().message();
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
  // 100 tokens -> 6 whole blocks of 16 = 96 tokens is the largest length that fits.
  EXPECT_NE(msg.find("96"), std::string::npos) << msg;
}

}  // namespace
}  // namespace pagellm
