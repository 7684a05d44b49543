// `pagellm tokenize --model PATH TEXT`: token ids as a JSON array.
#include "cli/commands.h"
#include "engine/model_session.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace pagellm::cli {

CommandFn RegisterTokenize(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto no_special = std::make_shared<bool>(false);
  auto parse_special = std::make_shared<bool>(false);
  app.add_option("--model", *model, "HF model directory or .gguf file")->required();
  app.add_option("text", *text, "Text to tokenize")->required();
  app.add_flag("--no-special", *no_special, "Do not add BOS/EOS");
  app.add_flag("--parse-special", *parse_special,
               "Recognise special-token text such as <|eot_id|> as single tokens");
  return [=]() {
    auto loaded = LoadModel(*model);
    if (!loaded.ok()) return Fail(loaded.status().message());
    auto tok = LoadTokenizerForModel(**loaded);
    if (!tok.ok()) return Fail(tok.status().message());
    std::vector<int32_t> ids = (*tok)->Encode(*text, !*no_special, *parse_special);
    fmt::print("{}\n", nlohmann::json(ids).dump());
    return 0;
  };
}

}  // namespace pagellm::cli
