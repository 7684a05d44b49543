#include "spec/draft_model_proposer.h"

#include <algorithm>

#include "backend/backend_factory.h"
#include "fmt/format.h"
#include "pagellm/check.h"
#include "sample/rejection_sampler.h"
#include "tokenizer/tokenizer.h"

namespace pagellm {

namespace {

// The draft's tokens must mean what the target's mean: a draft token id is fed to the target
// as is. Compares the model vocabularies and every tokenizer piece.
Status CheckSameTokenizer(const LoadedModel& target, const Tokenizer& t, const LoadedModel& draft,
                          const Tokenizer& d) {
  const std::string what =
      fmt::format("draft model '{}' does not share the tokenizer of '{}'", draft.path, target.path);
  if (target.config.vocab_size != draft.config.vocab_size)
    return InvalidArgumentError(fmt::format("{}: vocab_size {} vs {}", what,
                                            draft.config.vocab_size, target.config.vocab_size));
  if (t.vocab_size() != d.vocab_size())
    return InvalidArgumentError(
        fmt::format("{}: tokenizer size {} vs {}", what, d.vocab_size(), t.vocab_size()));
  if (t.bos_id() != d.bos_id() || t.eos_id() != d.eos_id())
    return InvalidArgumentError(fmt::format("{}: BOS/EOS ids {}/{} vs {}/{}", what, d.bos_id(),
                                            d.eos_id(), t.bos_id(), t.eos_id()));
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    if (t.IdToPiece(id) != d.IdToPiece(id))
      return InvalidArgumentError(
          fmt::format("{}: token {} is '{}' in the draft but '{}' in the "
                      "target",
                      what, id, d.IdToPiece(id), t.IdToPiece(id)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<DraftModelProposer>> DraftModelProposer::Load(
    const SpeculativeConfig& config, const LoadedModel& target, const Tokenizer& target_tokenizer,
    int32_t target_max_model_len) {
  std::unique_ptr<DraftModelProposer> p(new DraftModelProposer());
  auto model = LoadModel(config.model);
  if (!model.ok()) return model.status().WithContext("loading the speculative draft model");
  p->model_ = std::move(model).value();
  auto tok = LoadTokenizerForModel(*p->model_);
  if (!tok.ok())
    return InvalidArgumentError(
        fmt::format("draft model '{}' has no tokenizer to check against the target's: {}",
                    config.model, tok.status().ToString()));
  RETURN_IF_ERROR(CheckSameTokenizer(target, target_tokenizer, *p->model_, **tok));
  const int32_t draft_ctx = p->model_->config.max_position_embeddings;
  p->max_model_len_ =
      config.max_model_len > 0 ? config.max_model_len : std::min(target_max_model_len, draft_ctx);
  p->max_model_len_ = std::min(p->max_model_len_, target_max_model_len);
  if (p->max_model_len_ < 2)
    return InvalidArgumentError(
        fmt::format("speculative max_model_len {} is too small", p->max_model_len_));
  return p;
}

int64_t DraftModelProposer::kv_bytes_per_token() const {
  KvCacheShape shape;
  shape.num_layers = model_->config.num_layers;
  shape.num_kv_heads = model_->config.num_kv_heads;
  shape.head_dim = model_->config.head_dim;
  return shape.bytes_per_token();
}

Status DraftModelProposer::AllocateKv(int32_t block_size, int32_t num_blocks,
                                      int32_t num_swap_blocks, ThreadPool* pool,
                                      std::span<const int32_t> eos_ids) {
  const ModelConfig& mc = model_->config;
  KvCacheShape shape;
  shape.num_layers = mc.num_layers;
  shape.num_kv_heads = mc.num_kv_heads;
  shape.head_dim = mc.head_dim;
  shape.block_size = block_size;
  shape.num_blocks = num_blocks;
  ASSIGN_OR_RETURN(backend_, CreateBackend(*model_, BackendOptions(pool, max_model_len_)));
  RETURN_IF_ERROR(backend_->AllocateKvCache(shape, num_swap_blocks));
  pool_ = pool;
  samplers_.resize(pool->num_threads());
  eos_ids_.assign(eos_ids.begin(), eos_ids.end());
  return Status::Ok();
}

void DraftModelProposer::ResetRequest(const std::string& request_id, int32_t num_computed) {
  RequestState& st = states_[request_id];
  st.valid = num_computed;
  st.fed_drafts.clear();
}

void DraftModelProposer::RemoveRequest(const std::string& request_id) {
  states_.erase(request_id);
}

void DraftModelProposer::SwapOutBlock(int32_t device_block, int32_t host_block) {
  const BlockCopy copy{device_block, host_block};
  backend_->CopyKvBlocks(KvPool::kPrimary, KvPool::kSwap, {&copy, 1});
}

void DraftModelProposer::SwapInBlock(int32_t host_block, int32_t device_block) {
  const BlockCopy copy{host_block, device_block};
  backend_->CopyKvBlocks(KvPool::kSwap, KvPool::kPrimary, {&copy, 1});
}

int32_t DraftModelProposer::DrawDraft(const float* logits, const Input& in,
                                      std::span<const int32_t> drafts, Sampler& sampler,
                                      std::vector<float>& probs) {
  const int32_t vocab = model_->config.vocab_size;
  // Penalties see the drafts before this one as outputs, as the target's verification will.
  std::vector<int32_t> outputs(in.tokens.begin() + in.num_prompt_tokens, in.tokens.end());
  outputs.insert(outputs.end(), drafts.begin(), drafts.end());
  const SamplingInput si{*in.params, in.tokens.first(in.num_prompt_tokens), outputs, eos_ids_};
  const size_t at = probs.size();
  probs.resize(at + vocab);
  std::span<float> row(probs.data() + at, vocab);
  sampler.ComputeProbs(std::span<const float>(logits, vocab), si, row);
  if (Sampler::IsGreedy(*in.params)) {
    const int32_t id = ArgmaxProb(row);
    probs.resize(at);  // greedy verification needs no draft distribution
    return id;
  }
  const int32_t id = SampleFromProbs(row, *in.rng);
  return id >= 0 ? id : ArgmaxProb(row);
}

Status DraftModelProposer::Propose(std::span<const Input> inputs,
                                   std::vector<Proposal>* proposals) {
  proposals->assign(inputs.size(), Proposal{});
  // Sub-step 1: catch up (and, for proposing requests, feed the newest token).
  batch_.token_ids.clear();
  batch_.seqs.clear();
  std::vector<int32_t> proposing;  // input indices
  std::vector<int32_t> seq_of;     // their sequence index in the batch
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    RequestState& st = states_[in.request_id];
    const int32_t num_tokens = static_cast<int32_t>(in.tokens.size());
    // Drafts fed last step are valid KV as far as the target accepted them.
    int32_t v = std::min(st.valid, num_tokens);
    for (size_t j = 0; j < st.fed_drafts.size() && v < num_tokens; ++j, ++v)
      if (in.tokens[v] != st.fed_drafts[j]) break;
    st.fed_drafts.clear();
    int32_t end = in.max_drafts > 0 ? num_tokens : std::min(in.num_target_computed, num_tokens);
    end = std::min(end, max_model_len_);
    if (in.max_drafts > 0) {
      CHECK_LE(num_tokens, max_model_len_) << "drafts requested past the draft's max_model_len";
      v = std::min(v, num_tokens - 1);  // the newest token's logits give draft 1
    }
    st.valid = std::max(v, end);
    if (end <= v) continue;
    if (in.max_drafts > 0) {
      proposing.push_back(static_cast<int32_t>(i));
      seq_of.push_back(static_cast<int32_t>(batch_.seqs.size()));
    }
    batch_.token_ids.insert(batch_.token_ids.end(), in.tokens.begin() + v, in.tokens.begin() + end);
    batch_.seqs.push_back({end - v, v, in.block_table, false});
  }
  if (batch_.seqs.empty()) return Status::Ok();
  RETURN_IF_ERROR(backend_->Forward(batch_, &out_));
  pool_->Run(static_cast<int64_t>(proposing.size()), [&](int64_t k, int thread) {
    const Input& in = inputs[proposing[k]];
    Proposal& p = (*proposals)[proposing[k]];
    p.tokens.push_back(
        DrawDraft(out_.row(out_.row_offset[seq_of[k]]), in, {}, samplers_[thread], p.probs));
  });

  // Sub-steps 2..k: feed draft j at position num_tokens - 1 + j for draft j + 1.
  for (int32_t j = 1;; ++j) {
    batch_.token_ids.clear();
    batch_.seqs.clear();
    std::vector<int32_t> active;
    for (int32_t i : proposing) {
      const Input& in = inputs[i];
      if (in.max_drafts <= j) continue;
      const int32_t pos = static_cast<int32_t>(in.tokens.size()) - 1 + j;
      const int32_t block_size = backend_->kv_shape().block_size;
      CHECK_LT(pos, max_model_len_);
      CHECK_LT(pos, static_cast<int32_t>(in.block_table.size()) * block_size)
          << "no lookahead slot for draft position " << pos << " of " << in.request_id;
      const int32_t token = (*proposals)[i].tokens[j - 1];
      states_[in.request_id].fed_drafts.push_back(token);
      batch_.token_ids.push_back(token);
      batch_.seqs.push_back({1, pos, in.block_table, false});
      active.push_back(i);
    }
    if (active.empty()) break;
    RETURN_IF_ERROR(backend_->Forward(batch_, &out_));
    pool_->Run(static_cast<int64_t>(active.size()), [&](int64_t k, int thread) {
      const Input& in = inputs[active[k]];
      Proposal& p = (*proposals)[active[k]];
      const int32_t id =
          DrawDraft(out_.row(out_.row_offset[k]), in, p.tokens, samplers_[thread], p.probs);
      p.tokens.push_back(id);
    });
  }
  return Status::Ok();
}

}  // namespace pagellm
