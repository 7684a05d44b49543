#include "cli/hf_quantize_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "cli/commands.h"
#include "fmt/format.h"

extern char** environ;

namespace pagellm::cli {
namespace {

namespace fs = std::filesystem;

// tools/hf_quantize.py: $PAGELLM_TOOLS_DIR, else beside the build tree (<repo>/build/pagellm),
// else an installed share directory (<prefix>/bin/pagellm -> <prefix>/share/pagellm/tools).
std::string FindTool(const std::string& name) {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("PAGELLM_TOOLS_DIR")) dirs.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / ".." / "tools");
    dirs.push_back(exe.parent_path() / ".." / ".." / "tools");
    dirs.push_back(exe.parent_path() / ".." / "share" / "pagellm" / "tools");
  }
  for (const fs::path& d : dirs) {
    const fs::path p = d / name;
    if (fs::is_regular_file(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

// The tools need numpy: Debian's interpreter has it (python3-numpy), a user's pyenv or venv
// may not, so /usr/bin/python3 goes first unless $PAGELLM_PYTHON names one.
std::string PythonInterpreter() {
  if (const char* env = std::getenv("PAGELLM_PYTHON")) return env;
  std::error_code ec;
  if (fs::is_regular_file("/usr/bin/python3", ec)) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

bool IsHfQuantizeMethod(const std::string& type) {
  return type == "awq" || type == "gptq" || type == "rtn";
}

int RunHfQuantize(const HfQuantizeOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(o.input, ec)) {
    return Fail(fmt::format("{}: {} needs a float Hugging Face model directory as input", o.input,
                            o.method));
  }
  if (o.method != "rtn" && o.calib_text.empty()) {
    return Fail(
        fmt::format("{} searches on calibration text: give --calib-text FILE (documents split on "
                    "<|endoftext|>), or use rtn for round-to-nearest",
                    o.method));
  }
  if (o.method != "gptq" && (o.bits != 4 || o.desc_act || o.asym)) {
    return Fail(
        fmt::format("--bits, --desc-act and --asym apply to gptq only ({} is 4-bit "
                    "with zero points)",
                    o.method));
  }
  const std::string script = FindTool("hf_quantize.py");
  if (script.empty()) {
    return Fail(
        "cannot find tools/hf_quantize.py (set PAGELLM_TOOLS_DIR to the repository's tools/)");
  }
  std::vector<std::string> args = {
      PythonInterpreter(),         script, "--model", o.input, "--out", o.output, "--group-size",
      std::to_string(o.group_size)};
  if (o.method == "gptq") {
    args.insert(args.end(), {"--method", "gptq", "--gptq", "--bits", std::to_string(o.bits),
                             "--checkpoint-format", o.checkpoint_format});
    if (o.desc_act) args.push_back("--desc-act");
    if (o.asym) args.push_back("--asym");
  } else {
    args.insert(args.end(), {"--method", "awq"});
    if (o.method == "awq") args.push_back("--awq-search");
  }
  if (!o.calib_text.empty()) {
    args.insert(args.end(),
                {"--calib-text", o.calib_text, "--calib-docs", std::to_string(o.calib_docs),
                 "--calib-tokens", std::to_string(o.calib_tokens)});
  }
  if (!o.modules_to_not_convert.empty()) {
    args.insert(args.end(), {"--modules-to-not-convert", o.modules_to_not_convert});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) return Fail(fmt::format("cannot run {}: {}", args[0], std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return Fail(fmt::format("waiting for {}: {}", script, std::strerror(errno)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(fmt::format("{} quantization failed (see the messages above)", o.method));
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{}: {} int{} group {} checkpoint written in {:.1f} s\n", o.output, o.method, o.bits,
             o.group_size, s);
  return 0;
}

}  // namespace pagellm::cli
