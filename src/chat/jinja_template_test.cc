// Jinja engine unit tests: semantics spot checks (expected strings are what Python jinja2
// 3.1 renders with transformers' settings), error reporting, and the resource bounds that
// keep hostile templates from crashing or hanging the server. The broad byte-for-byte
// comparison with Python lives in tests/test_chat_templates.py.
#include "chat/jinja_template.h"

#include <gtest/gtest.h>

#include "chat/python_json.h"
#include "chat/python_text.h"

namespace pagellm::jinja {
namespace {

StatusOr<std::string> Render(const std::string& source, const std::string& context_json = "{}",
                             const RenderLimits& limits = {}) {
  ASSIGN_OR_RETURN(Template tmpl, Template::Parse(source));
  ASSIGN_OR_RETURN(Value ctx, ValueFromJson(nlohmann::ordered_json::parse(context_json)));
  return tmpl.Render(ctx.dict(), limits);
}

std::string RenderOk(const std::string& source, const std::string& context_json = "{}") {
  auto out = Render(source, context_json);
  EXPECT_TRUE(out.ok()) << source.substr(0, 200) << ": " << out.status().ToString();
  return out.ok() ? *out : "<error>";
}

std::string ErrorOf(const std::string& source, const std::string& context_json = "{}",
                    const RenderLimits& limits = {}) {
  auto out = Render(source, context_json, limits);
  EXPECT_FALSE(out.ok()) << source.substr(0, 200) << " rendered "
                         << (out.ok() ? out->substr(0, 200) : "");
  return out.ok() ? "" : out.status().message();
}

TEST(JinjaTemplateTest, WhitespaceControl) {
  EXPECT_EQ(RenderOk("a\n  {% if true %}\n  b\n  {% endif %}\nc\n"), "a\n  b\nc");
  EXPECT_EQ(RenderOk("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(RenderOk("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(RenderOk("{# c #}\nx"), "x");
  EXPECT_EQ(RenderOk("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(RenderOk("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaTemplateTest, ScopingFollowsJinja) {
  EXPECT_EQ(RenderOk("{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }};"
                     "{% endfor %}{{ x }}"),
            "12;12;12;1");
  EXPECT_EQ(RenderOk("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");
  EXPECT_EQ(RenderOk("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
                     "{% endfor %}{{ ns.n }}"),
            "6");
  EXPECT_EQ(
      RenderOk("{% macro m(a, b=a * 2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }},{{ m(1, 5) }}"),
      "1-2,1-5");
}

TEST(JinjaTemplateTest, PythonValueFormatting) {
  EXPECT_EQ(RenderOk("{{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 1e-5 }} {{ 7 / 2 }}"),
            "1.0 1e+16 1000000000000000.0 0.0001 1e-05 3.5");
  EXPECT_EQ(RenderOk("{{ (1,2) }} {{ ['a', \"b'c\", 1.5, none, true] }} {{ {'a': [1]} }}"),
            "(1, 2) ['a', \"b'c\", 1.5, None, True] {'a': [1]}");
  EXPECT_EQ(RenderOk("{{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2.5|round }} {{ 3.5|round }}"),
            "-4 2 1024 2.0 4.0");
  EXPECT_EQ(RenderOk("{{ x | tojson(indent=2) }}", R"({"x": {"b": [1, "é"], "a": null}})"),
            "{\n  \"b\": [\n    1,\n    \"é\"\n  ],\n  \"a\": null\n}");
}

TEST(JinjaTemplateTest, UndefinedSemantics) {
  EXPECT_EQ(RenderOk("[{{ missing }}]{{ missing | length }}{% for x in missing %}x{% endfor %}"
                     "{{ missing is defined }}{{ d.nokey is defined }}",
                     R"({"d": {}})"),
            "[]0FalseFalse");
  EXPECT_EQ(ErrorOf("{{ missing.attr }}"), "'missing' is undefined (template line 1)");
  EXPECT_EQ(ErrorOf("{{ [1].append(2) }}"),
            "access to attribute 'append' of 'list' object is unsafe. (template line 1)");
}

TEST(JinjaTemplateTest, ErrorsAreStatuses) {
  EXPECT_EQ(ErrorOf("{{ raise_exception('bad role') }}"), "bad role");
  EXPECT_NE(ErrorOf("{% for x in y %}").find("Unexpected end of template"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ x | nosuchfilter }}").find("No filter named 'nosuchfilter'."),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ x is nosuchtest }}").find("No test named 'nosuchtest'."),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'a' + 1 }}").find("can only concatenate str"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(ErrorOf("{% break %}").find("outside loop"), std::string::npos);
  EXPECT_NE(ErrorOf("\n\n{{ 1 +* 2 }}").find("line 3"), std::string::npos);
}

TEST(JinjaTemplateTest, HostileTemplatesAreBounded) {
  // Unbounded macro recursion.
  EXPECT_NE(ErrorOf("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("too deep"),
            std::string::npos);
  // Deeply nested source.
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("too deep"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '-') + "1 }}").find("too deep"), std::string::npos);
  std::string chain = "{{ x";
  for (int i = 0; i < 5000; ++i) chain += ".a";
  EXPECT_NE(ErrorOf(chain + " }}").find("too long"), std::string::npos);
  // Runaway loops and output.
  EXPECT_NE(ErrorOf("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}"
                    "{% endfor %}")
                .find("steps"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ range(1000000) }}").find("Range too big"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'a' * 1000000000 }}").find("too large"), std::string::npos);
  RenderLimits small;
  small.max_output_bytes = 1000;
  EXPECT_NE(ErrorOf("{% for i in range(2000) %}xx{% endfor %}", "{}", small).find("output"),
            std::string::npos);
  // Values nested without bound, and namespaces that contain themselves.
  EXPECT_NE(ErrorOf("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                    "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}")
                .find("nested too deeply"),
            std::string::npos);
  auto out = Render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_TRUE(out.ok());
}

TEST(PythonTextTest, FloatReprMatchesPython) {
  EXPECT_EQ(PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(PyFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(PyFloatRepr(123456789012345680.0), "1.2345678901234568e+17");
  EXPECT_EQ(PyFloatRepr(1.5e-7), "1.5e-07");
  EXPECT_EQ(PyFloatRepr(1e22), "1e+22");
}

TEST(PythonTextTest, StripAndSplitUseUnicodeWhitespace) {
  EXPECT_EQ(PyStrip("\u3000 x\xc2\xa0\n", StripSide::kBoth), "x");
  EXPECT_EQ(PySplit(" a  b\tc ", std::nullopt, -1), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(PySplit("a,b,,c", std::string(","), 2), (std::vector<std::string>{"a", "b", ",c"}));
  EXPECT_EQ(PyStringRepr("it's"), "\"it's\"");
}

}  // namespace
}  // namespace pagellm::jinja
