// `pagellm logits --model M --token-ids 1,2,3 --output F`: raw little-endian float32 logits,
// [n_tokens][vocab], one causal pass. Used by the reference-comparison tests.
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "engine/model_session.h"
#include "fmt/format.h"

namespace pagellm::cli {

CommandFn RegisterLogits(CLI::App& app) {
  auto opts = std::make_shared<SessionOptions>();
  auto ids_text = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  app.add_option("--model", opts->model_path, "HF model directory or .gguf file")->required();
  app.add_option("--token-ids", *ids_text, "Comma-separated token ids")->required();
  app.add_option("--output", *output, "Output file for float32 logits")->required();
  app.add_option("--threads", opts->threads, "CPU threads (default: all)");
  app.add_option("--block-size", opts->block_size, "KV cache block size in tokens");
  return [=]() {
    std::vector<int32_t> ids;
    std::stringstream ss(*ids_text);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        ids.push_back(std::stoi(item));
      } catch (...) {
        return Fail(fmt::format("bad token id '{}'", item));
      }
    }
    if (ids.empty()) return Fail("no token ids");
    SessionOptions o = *opts;
    o.require_tokenizer = false;
    o.max_model_len = static_cast<int>(ids.size());
    auto session = ModelSession::Open(o);
    if (!session.ok()) return Fail(session.status().message());
    ModelSession& s = **session;
    std::vector<int32_t> blocks;
    for (int i = 0; i * s.block_size() < static_cast<int>(ids.size()); ++i) blocks.push_back(i + 1);
    ForwardBatch batch;
    batch.token_ids = ids;
    batch.seqs.push_back({static_cast<int32_t>(ids.size()), 0, blocks, true});
    ForwardOutput out;
    Status st = s.backend().Forward(batch, &out);
    if (!st.ok()) return Fail(st.message());
    FILE* f = std::fopen(output->c_str(), "wb");
    if (f == nullptr) return Fail("cannot open " + *output);
    const size_t n = out.logits.size();
    const bool ok = std::fwrite(out.logits.data(), sizeof(float), n, f) == n;
    std::fclose(f);
    if (!ok) return Fail("write failed: " + *output);
    return 0;
  };
}

}  // namespace pagellm::cli
