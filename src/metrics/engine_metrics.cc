#include "metrics/engine_metrics.h"

#include <algorithm>

namespace pagellm {
namespace {

// Every vLLM engine metric carries the served model name and the data-parallel engine index
// (always "0" here), in this order.
MetricLabels Base(const EngineMetricsConfig& c) {
  return {{"model_name", c.model_name}, {"engine", "0"}};
}

MetricLabels With(MetricLabels labels, const std::string& name, const std::string& value) {
  labels.emplace_back(name, value);
  return labels;
}

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                  0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                  7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationTokenBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                    512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kParamsNBuckets = {1, 2, 5, 10, 20};

}  // namespace

EngineMetrics::EngineMetrics(const EngineMetricsConfig& c)
    : running_(registry_.AddGauge("vllm:num_requests_running",
                                  "Number of requests in model execution batches.", Base(c))),
      waiting_(registry_.AddGauge("vllm:num_requests_waiting",
                                  "Number of requests waiting to be processed.", Base(c))),
      swapped_(registry_.AddGauge("vllm:num_requests_swapped", "Number of requests swapped to CPU.",
                                  Base(c))),
      kv_usage_(registry_.AddGauge("vllm:kv_cache_usage_perc",
                                   "KV-cache usage. 1 means 100 percent usage.", Base(c))),
      gpu_cache_usage_(
          registry_.AddGauge("vllm:gpu_cache_usage_perc",
                             "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use "
                             "vllm:kv_cache_usage_perc instead.",
                             Base(c))),
      cpu_cache_usage_(registry_.AddGauge(
          "vllm:cpu_cache_usage_perc", "CPU KV-cache usage. 1 means 100 percent usage.", Base(c))),
      prefix_queries_(registry_.AddCounter(
          "vllm:prefix_cache_queries",
          "Prefix cache queries, in terms of number of queried tokens.", Base(c))),
      prefix_hits_(registry_.AddCounter("vllm:prefix_cache_hits",
                                        "Prefix cache hits, in terms of number of cached tokens.",
                                        Base(c))),
      preemptions_(registry_.AddCounter(
          "vllm:num_preemptions", "Cumulative number of preemption from the engine.", Base(c))),
      prompt_tokens_(registry_.AddCounter("vllm:prompt_tokens",
                                          "Number of prefill tokens processed.", Base(c))),
      generation_tokens_(registry_.AddCounter("vllm:generation_tokens",
                                              "Number of generation tokens processed.", Base(c))),
      prompt_tokens_hist_(registry_.AddHistogram("vllm:request_prompt_tokens",
                                                 "Number of prefill tokens processed.", Base(c),
                                                 Buckets125(c.max_model_len))),
      generation_tokens_hist_(registry_.AddHistogram("vllm:request_generation_tokens",
                                                     "Number of generation tokens processed.",
                                                     Base(c), Buckets125(c.max_model_len))),
      iteration_tokens_(registry_.AddHistogram("vllm:iteration_tokens_total",
                                               "Histogram of number of tokens per engine_step.",
                                               Base(c), kIterationTokenBuckets)),
      max_generation_tokens_(
          registry_.AddHistogram("vllm:request_max_num_generation_tokens",
                                 "Histogram of maximum number of requested generation tokens.",
                                 Base(c), Buckets125(c.max_model_len))),
      params_n_(registry_.AddHistogram("vllm:request_params_n",
                                       "Histogram of the n request parameter.", Base(c),
                                       kParamsNBuckets)),
      params_max_tokens_(registry_.AddHistogram("vllm:request_params_max_tokens",
                                                "Histogram of the max_tokens request parameter.",
                                                Base(c), Buckets125(c.max_model_len))),
      ttft_(registry_.AddHistogram("vllm:time_to_first_token_seconds",
                                   "Histogram of time to first token in seconds.", Base(c),
                                   kTtftBuckets)),
      itl_(registry_.AddHistogram("vllm:inter_token_latency_seconds",
                                  "Histogram of inter-token latency in seconds.", Base(c),
                                  kTokenLatencyBuckets)),
      tpot_(registry_.AddHistogram("vllm:request_time_per_output_token_seconds",
                                   "Histogram of time_per_output_token_seconds per request.",
                                   Base(c), kTokenLatencyBuckets)),
      e2e_(registry_.AddHistogram("vllm:e2e_request_latency_seconds",
                                  "Histogram of e2e request latency in seconds.", Base(c),
                                  kRequestLatencyBuckets)),
      queue_time_(registry_.AddHistogram("vllm:request_queue_time_seconds",
                                         "Histogram of time spent in WAITING phase for request.",
                                         Base(c), kRequestLatencyBuckets)),
      inference_time_(
          registry_.AddHistogram("vllm:request_inference_time_seconds",
                                 "Histogram of time spent in RUNNING phase for request.", Base(c),
                                 kRequestLatencyBuckets)),
      prefill_time_(registry_.AddHistogram("vllm:request_prefill_time_seconds",
                                           "Histogram of time spent in PREFILL phase for request.",
                                           Base(c), kRequestLatencyBuckets)),
      decode_time_(registry_.AddHistogram("vllm:request_decode_time_seconds",
                                          "Histogram of time spent in DECODE phase for request.",
                                          Base(c), kRequestLatencyBuckets)) {
  // vLLM creates one request_success series per finish reason up front, so all read 0 before
  // the first request.
  for (const char* reason : {"stop", "length", "abort"}) {
    success_[reason] =
        &registry_.AddCounter("vllm:request_success", "Count of successfully processed requests.",
                              With(Base(c), "finished_reason", reason));
  }
  if (c.num_speculative_tokens > 0) {
    spec_drafts_ = &registry_.AddCounter("vllm:spec_decode_num_drafts",
                                         "Number of spec decoding drafts.", Base(c));
    spec_draft_tokens_ = &registry_.AddCounter("vllm:spec_decode_num_draft_tokens",
                                               "Number of draft tokens.", Base(c));
    spec_accepted_tokens_ = &registry_.AddCounter("vllm:spec_decode_num_accepted_tokens",
                                                  "Number of accepted tokens.", Base(c));
    for (int32_t pos = 0; pos < c.num_speculative_tokens; ++pos) {
      spec_accepted_per_pos_.push_back(&registry_.AddCounter(
          "vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
          With(Base(c), "position", std::to_string(pos))));
    }
  }
  // Structured outputs (pagellm's own; vLLM exports none): grammar token masks and the
  // grammar compile cache, from EngineStats.
  grammar_masks_ = &registry_.AddCounter("pagellm:structured_output_masks",
                                         "Grammar token masks built for sampling.", Base(c));
  grammar_mask_seconds_ =
      &registry_.AddCounter("pagellm:structured_output_mask_seconds",
                            "Time spent building grammar token masks.", Base(c));
  grammar_cache_hits_ = &registry_.AddCounter(
      "pagellm:structured_output_compile_cache_hits",
      "Constraints whose compiled grammar came from the compile cache.", Base(c));
  grammar_cache_misses_ = &registry_.AddCounter("pagellm:structured_output_compile_cache_misses",
                                                "Constraints compiled.", Base(c));
  grammar_compile_seconds_ = &registry_.AddCounter("pagellm:structured_output_compile_seconds",
                                                   "Time spent compiling constraints.", Base(c));
  // Tensor parallelism (pagellm's own): where rank 0's forward time goes.
  if (c.tensor_parallel_size > 1) {
    tp_steps_ =
        &registry_.AddCounter("pagellm:tensor_parallel_forward_steps",
                              "Forward steps run across the tensor-parallel ranks.", Base(c));
    tp_forward_seconds_ =
        &registry_.AddCounter("pagellm:tensor_parallel_forward_seconds",
                              "Rank 0's wall time in tensor-parallel forward steps.", Base(c));
    tp_comm_seconds_ = &registry_.AddCounter(
        "pagellm:tensor_parallel_comm_seconds",
        "Rank 0's wall time inside the tensor-parallel group's collectives (step broadcast, "
        "all-reduces, logits gather).",
        Base(c));
    tp_all_reduces_ =
        &registry_.AddCounter("pagellm:tensor_parallel_all_reduces",
                              "All-reduces run across the tensor-parallel ranks.", Base(c));
    tp_all_reduce_seconds_ =
        &registry_.AddCounter("pagellm:tensor_parallel_all_reduce_seconds",
                              "Rank 0's wall time inside tensor-parallel all-reduces.", Base(c));
  }
  // An info metric: constant 1, the configuration in its labels (engine label last, as vLLM).
  registry_
      .AddGauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                With(c.cache_config, "engine", "0"))
      .Set(1.0);
}

void EngineMetrics::OnFirstToken(int32_t num_prompt_tokens, double time_to_first_token) {
  prompt_tokens_.Inc(num_prompt_tokens);
  ttft_.Observe(time_to_first_token);
}

void EngineMetrics::OnNewTokens(int32_t num_tokens) {
  generation_tokens_.Inc(num_tokens);
}

void EngineMetrics::OnInterTokenLatency(double seconds) {
  itl_.Observe(seconds);
}

void EngineMetrics::OnIteration(int32_t num_tokens) {
  iteration_tokens_.Observe(num_tokens);
}

void EngineMetrics::OnRequestFinished(const FinishedRequestStats& s) {
  auto it = success_.find(s.finish_reason);
  if (it != success_.end()) it->second->Inc();
  e2e_.Observe(s.e2e_latency);
  prompt_tokens_hist_.Observe(s.num_prompt_tokens);
  generation_tokens_hist_.Observe(s.num_generation_tokens);
  if (s.queued_time) queue_time_.Observe(*s.queued_time);
  if (s.prefill_time) prefill_time_.Observe(*s.prefill_time);
  if (s.decode_time) decode_time_.Observe(*s.decode_time);
  if (s.inference_time) inference_time_.Observe(*s.inference_time);
  // vLLM: decode time spread over the tokens after the first.
  if (s.decode_time && s.num_generation_tokens > 1)
    tpot_.Observe(*s.decode_time / (s.num_generation_tokens - 1));
  if (s.record_params) {
    params_n_.Observe(s.n);
    params_max_tokens_.Observe(s.max_tokens);
    max_generation_tokens_.Observe(s.max_tokens);
  }
}

void EngineMetrics::UpdateEngineStats(const EngineStats& s) {
  running_.Set(s.num_running);
  waiting_.Set(s.num_waiting);
  swapped_.Set(s.num_swapped);
  kv_usage_.Set(s.kv_usage);
  gpu_cache_usage_.Set(s.kv_usage);
  cpu_cache_usage_.Set(s.swap_usage);
  std::lock_guard<std::mutex> lock(stats_mu_);
  // The engine's values are cumulative; a smaller one means it restarted its count.
  auto advance = [](Counter& c, int64_t now, int64_t& last) {
    c.Inc(static_cast<double>(now >= last ? now - last : now));
    last = now;
  };
  advance(preemptions_, s.num_preemptions, last_preemptions_);
  advance(prefix_queries_, s.prefix_cache_queries, last_prefix_queries_);
  advance(prefix_hits_, s.prefix_cache_hits, last_prefix_hits_);
  advance(*grammar_masks_, s.grammar_masks, last_grammar_masks_);
  advance(*grammar_cache_hits_, s.grammar_cache_hits, last_grammar_cache_hits_);
  advance(*grammar_cache_misses_, s.grammar_cache_misses, last_grammar_cache_misses_);
  auto advance_seconds = [](Counter& c, double now, double& last) {
    c.Inc(now >= last ? now - last : now);
    last = now;
  };
  advance_seconds(*grammar_mask_seconds_, s.grammar_mask_seconds, last_grammar_mask_seconds_);
  advance_seconds(*grammar_compile_seconds_, s.grammar_compile_seconds,
                  last_grammar_compile_seconds_);
  if (tp_steps_ != nullptr) {
    advance(*tp_steps_, s.tp_forward_steps, last_tp_steps_);
    advance(*tp_all_reduces_, s.tp_all_reduces, last_tp_all_reduces_);
    advance_seconds(*tp_forward_seconds_, s.tp_forward_seconds, last_tp_forward_seconds_);
    advance_seconds(*tp_comm_seconds_, s.tp_comm_seconds, last_tp_comm_seconds_);
    advance_seconds(*tp_all_reduce_seconds_, s.tp_all_reduce_seconds, last_tp_all_reduce_seconds_);
  }
  if (spec_drafts_ != nullptr) {
    const SpecDecodeStats& now = s.spec_decode;
    const SpecDecodeStats delta =
        now.num_drafts >= last_spec_.num_drafts ? now.Since(last_spec_) : now;
    spec_drafts_->Inc(static_cast<double>(delta.num_drafts));
    spec_draft_tokens_->Inc(static_cast<double>(delta.num_draft_tokens));
    spec_accepted_tokens_->Inc(static_cast<double>(delta.num_accepted_tokens));
    for (size_t pos = 0; pos < delta.accepted_per_pos.size() && pos < spec_accepted_per_pos_.size();
         ++pos)
      spec_accepted_per_pos_[pos]->Inc(static_cast<double>(delta.accepted_per_pos[pos]));
    last_spec_ = now;
  }
}

std::string EngineMetrics::Render(const EngineStats& stats) {
  UpdateEngineStats(stats);
  return registry_.Render();
}

}  // namespace pagellm
