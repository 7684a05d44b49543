#include "server/cors_policy.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "fmt/format.h"
#include "fmt/ranges.h"

namespace pagellm {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

CorsPolicy::CorsPolicy(std::vector<std::string> origins, std::vector<std::string> methods,
                       std::vector<std::string> headers, bool allow_credentials)
    : origins_(std::move(origins)), credentials_(allow_credentials) {
  all_origins_ = Contains(origins_, "*");
  // "*" stands for every method the CORS protocol knows.
  methods_ = Contains(methods, "*") ? std::vector<std::string>{"DELETE", "GET",  "HEAD", "OPTIONS",
                                                               "PATCH",  "POST", "PUT"}
                                    : std::move(methods);
  all_headers_ = Contains(headers, "*");
  // The CORS-safelisted request headers are always allowed.
  std::set<std::string> h = {"Accept", "Accept-Language", "Content-Language", "Content-Type"};
  for (const std::string& x : headers)
    if (x != "*") h.insert(x);
  allow_headers_.assign(h.begin(), h.end());  // sorted, as sent back
}

bool CorsPolicy::OriginAllowed(const std::string& origin) const {
  return all_origins_ || Contains(origins_, origin);
}

CorsPolicy::Preflight CorsPolicy::Answer(const std::string& origin,
                                         const std::string& requested_method,
                                         const std::string& requested_headers) const {
  Preflight p;
  // With credentials a wildcard may not be sent back: the origin is echoed instead.
  if (!all_origins_ || credentials_) {
    p.headers.emplace_back("Access-Control-Allow-Origin", origin);
    p.headers.emplace_back("Vary", "Origin");
  } else {
    p.headers.emplace_back("Access-Control-Allow-Origin", "*");
  }
  p.headers.emplace_back("Access-Control-Allow-Methods",
                         fmt::format("{}", fmt::join(methods_, ", ")));
  p.headers.emplace_back("Access-Control-Max-Age", "600");
  if (credentials_) p.headers.emplace_back("Access-Control-Allow-Credentials", "true");

  std::vector<std::string> failures;
  if (!OriginAllowed(origin)) failures.push_back("origin");
  if (!Contains(methods_, requested_method)) failures.push_back("method");
  if (all_headers_) {
    if (!requested_headers.empty())
      p.headers.emplace_back("Access-Control-Allow-Headers", requested_headers);
  } else {
    p.headers.emplace_back("Access-Control-Allow-Headers",
                           fmt::format("{}", fmt::join(allow_headers_, ", ")));
    std::vector<std::string> allowed;
    for (const std::string& h : allow_headers_) allowed.push_back(Lower(h));
    size_t pos = 0;
    while (!requested_headers.empty() && pos <= requested_headers.size()) {
      const size_t comma = std::min(requested_headers.find(',', pos), requested_headers.size());
      const std::string h = Lower(Trim(requested_headers.substr(pos, comma - pos)));
      if (!h.empty() && !Contains(allowed, h)) {
        failures.push_back("headers");
        break;
      }
      pos = comma + 1;
    }
  }
  if (failures.empty()) {
    p.status = 200;
    p.body = "OK";
  } else {
    p.status = 400;
    p.body = fmt::format("Disallowed CORS {}", fmt::join(failures, ", "));
  }
  return p;
}

std::vector<std::pair<std::string, std::string>> CorsPolicy::SimpleHeaders(
    const std::string& origin, bool has_cookie) const {
  std::vector<std::pair<std::string, std::string>> h;
  if (credentials_) h.emplace_back("Access-Control-Allow-Credentials", "true");
  if (all_origins_) {
    // A request with cookies needs its own origin echoed (a wildcard is refused by browsers).
    if (has_cookie) {
      h.emplace_back("Access-Control-Allow-Origin", origin);
      h.emplace_back("Vary", "Origin");
    } else {
      h.emplace_back("Access-Control-Allow-Origin", "*");
    }
  } else if (OriginAllowed(origin)) {
    h.emplace_back("Access-Control-Allow-Origin", origin);
    h.emplace_back("Vary", "Origin");
  }
  return h;
}

}  // namespace pagellm
