#include "metrics/metrics_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "pagellm/check.h"

namespace pagellm {
namespace {

// Python's repr(float): the shortest digits that round-trip, in fixed notation when the
// decimal exponent is in [-4, 16) (always with a fractional part, "1.0"), else scientific
// with a two-digit exponent ("1e+16", "1.5e-07").
std::string PythonFloatRepr(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // "-1.25e+03"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) return sign + "0." + std::string(-exp10 - 1, '0') + digits;
    if (static_cast<size_t>(exp10) + 1 >= digits.size())
      return sign + digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
    return sign + digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  std::string exp_digits = std::to_string(std::abs(exp10));
  if (exp_digits.size() < 2) exp_digits = "0" + exp_digits;
  return sign + mantissa + "e" + (exp10 < 0 ? "-" : "+") + exp_digits;
}

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` (empty when there are no labels), with an optional extra label last, as
// prometheus_client appends `le` after the declared labels.
std::string LabelSet(const MetricLabels& labels, const char* extra_name = nullptr,
                     const std::string& extra_value = "") {
  if (labels.empty() && extra_name == nullptr) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ",";
    first = false;
    out += name + "=\"" + EscapeLabelValue(value) + "\"";
  }
  if (extra_name != nullptr) {
    if (!first) out += ",";
    out += std::string(extra_name) + "=\"" + EscapeLabelValue(extra_value) + "\"";
  }
  return out + "}";
}

}  // namespace

std::string FormatPrometheusValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::string s = PythonFloatRepr(v);
  // prometheus_client's floatToGoString: Go switches to exponent notation for large values
  // sooner than Python does ("1234567.0" -> "1.234567e+06").
  const size_t dot = s.find('.');
  if (v > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.'))
      mantissa.pop_back();
    return mantissa + "e+0" + std::to_string(dot - 1);
  }
  return s;
}

std::vector<double> Buckets125(double max_value) {
  std::vector<double> out;
  for (double scale = 1;; scale *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * scale > max_value) return out;
      out.push_back(m * scale);
    }
  }
}

void Counter::Inc(double v) {
  if (!(v > 0)) return;
  value_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end())) << "histogram bounds must ascend";
}

void Histogram::Observe(double v) {
  // Prometheus buckets are "less than or equal": v lands in the first bound >= v.
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  ++count_;
  sum_ += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

MetricsRegistry::Series& MetricsRegistry::AddSeries(const std::string& name,
                                                    const std::string& help, Type type,
                                                    const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  Family* family;
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    families_.push_back(std::make_unique<Family>(Family{name, help, type, {}}));
    family = families_.back().get();
    by_name_.emplace(name, family);
  } else {
    family = it->second;
    CHECK(family->type == type) << "metric " << name << " registered with two types";
  }
  family->series.push_back(std::make_unique<Series>());
  family->series.back()->labels = labels;
  return *family->series.back();
}

Counter& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  Series& s = AddSeries(name, help, Type::kCounter, labels);
  s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                 const MetricLabels& labels) {
  Series& s = AddSeries(name, help, Type::kGauge, labels);
  s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         const MetricLabels& labels, std::vector<double> bounds) {
  Series& s = AddSeries(name, help, Type::kHistogram, labels);
  s.histogram = std::make_unique<Histogram>(std::move(bounds));
  return *s.histogram;
}

std::string MetricsRegistry::Render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& f : families_) {
    const std::string exposed = f->type == Type::kCounter ? f->name + "_total" : f->name;
    const char* type_name = f->type == Type::kCounter ? "counter"
                            : f->type == Type::kGauge ? "gauge"
                                                      : "histogram";
    out += "# HELP " + exposed + " " + EscapeHelp(f->help) + "\n";
    out += "# TYPE " + exposed + " " + type_name + "\n";
    for (const auto& s : f->series) {
      switch (f->type) {
        case Type::kCounter:
          out += exposed + LabelSet(s->labels) + " " + FormatPrometheusValue(s->counter->value()) +
                 "\n";
          break;
        case Type::kGauge:
          out +=
              exposed + LabelSet(s->labels) + " " + FormatPrometheusValue(s->gauge->value()) + "\n";
          break;
        case Type::kHistogram: {
          const Histogram::Snapshot snap = s->histogram->snapshot();
          for (size_t i = 0; i <= snap.bounds.size(); ++i) {
            const std::string le = i < snap.bounds.size() ? FormatPrometheusValue(snap.bounds[i])
                                                          : std::string("+Inf");
            out += f->name + "_bucket" + LabelSet(s->labels, "le", le) + " " +
                   FormatPrometheusValue(static_cast<double>(snap.cumulative[i])) + "\n";
          }
          out += f->name + "_count" + LabelSet(s->labels) + " " +
                 FormatPrometheusValue(static_cast<double>(snap.count)) + "\n";
          out +=
              f->name + "_sum" + LabelSet(s->labels) + " " + FormatPrometheusValue(snap.sum) + "\n";
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace pagellm
