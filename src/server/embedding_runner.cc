#include "server/embedding_runner.h"

#include <cmath>
#include <numeric>

#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm {

StatusOr<PoolerConfig> ParsePoolerConfig(const std::string& text, PoolerConfig base) {
  if (text.empty()) return base;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgumentError("--pooler-config: expected a JSON object");
  if (auto it = j.find("pooling_type"); it != j.end() && !it->is_null()) {
    const std::string t = it->is_string() ? it->get<std::string>() : "";
    if (t == "LAST") {
      base.pooling = PoolingType::kLast;
    } else if (t == "MEAN") {
      base.pooling = PoolingType::kMean;
    } else if (t == "CLS") {
      base.pooling = PoolingType::kCls;
    } else {
      return InvalidArgumentError(fmt::format(
          "--pooler-config: pooling_type {} not supported (LAST, MEAN or CLS)", it->dump()));
    }
  }
  if (auto it = j.find("normalize"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidArgumentError("--pooler-config: normalize is a boolean");
    base.normalize = it->get<bool>();
  }
  return base;
}

StatusOr<std::unique_ptr<EmbeddingRunner>> EmbeddingRunner::Create(const SessionOptions& options,
                                                                   PoolerConfig pooler) {
  std::unique_ptr<EmbeddingRunner> r(new EmbeddingRunner());
  ASSIGN_OR_RETURN(r->session_, ModelSession::Open(options));
  r->pooler_ = pooler;
  return r;
}

StatusOr<std::vector<float>> EmbeddingRunner::Embed(const std::vector<int32_t>& ids,
                                                    std::optional<bool> normalize) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 1) return InvalidArgumentError("the input is empty");
  if (n > max_model_len())
    return InvalidArgumentError(fmt::format(
        "This model's maximum context length is {} tokens. However, you requested {} tokens in "
        "the input for embedding generation. Please reduce the length of the input.",
        max_model_len(), n));
  std::lock_guard<std::mutex> lock(mu_);
  const int block = session_->block_size();
  std::vector<int32_t> table((n + block - 1) / block);
  std::iota(table.begin(), table.end(), 1);  // block 0 is the null block
  ForwardBatch batch;
  batch.token_ids = ids;
  SequenceChunk chunk;
  chunk.num_tokens = static_cast<int32_t>(n);
  chunk.start_pos = 0;
  chunk.block_table = table;
  chunk.hidden_states = true;
  batch.seqs.push_back(chunk);
  ForwardOutput out;
  RETURN_IF_ERROR(session_->backend().Forward(batch, &out));
  const int64_t h = out.hidden_size;
  std::vector<double> acc(h, 0.0);
  const float* rows = out.hidden.data();
  switch (pooler_.pooling) {
    case PoolingType::kLast:
      for (int64_t d = 0; d < h; ++d) acc[d] = rows[(n - 1) * h + d];
      break;
    case PoolingType::kCls:
      for (int64_t d = 0; d < h; ++d) acc[d] = rows[d];
      break;
    case PoolingType::kMean:
      for (int64_t t = 0; t < n; ++t)
        for (int64_t d = 0; d < h; ++d) acc[d] += rows[t * h + d];
      for (double& v : acc) v /= static_cast<double>(n);
      break;
  }
  std::vector<float> result(h);
  if (normalize.value_or(pooler_.normalize)) {
    // torch.nn.functional.normalize: x / max(||x||_2, 1e-12).
    double norm = 0;
    for (double v : acc) norm += v * v;
    norm = std::max(std::sqrt(norm), 1e-12);
    for (int64_t d = 0; d < h; ++d) result[d] = static_cast<float>(acc[d] / norm);
  } else {
    for (int64_t d = 0; d < h; ++d) result[d] = static_cast<float>(acc[d]);
  }
  return result;
}

}  // namespace pagellm
