#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "command.hpp"
#include "cudakit/error.hpp"
#include "cudakit/version.hpp"

namespace cudakit::tool {
namespace {

constexpr const char* footer =
    "exit codes:\n"
    "  0  success: every check passed\n"
    "  1  a check failed, or a benchmark missed its target\n"
    "  2  no usable CUDA driver or GPU on this machine (one line says why)\n"
    "  3  bad command line\n"
    "  4  unexpected internal error\n"
    "\n"
    "environment:\n"
    "  CUDAKIT_LIBCUDA     load the driver from this file instead of libcuda.so.1\n"
    "  CUDAKIT_LIBNVRTC    load NVRTC from this file\n"
    "  CUDAKIT_LIBCUBLAS, CUDAKIT_LIBCUBLASLT\n"
    "                      load cuBLAS and cuBLASLt from these files instead of searching\n"
    "  CUDAKIT_LIBNCCL     load NCCL from this file\n"
    "  CUDA_FORCE_PTX_JIT  1: the driver JIT-compiles PTX even where machine code exists\n"
    "  CUDAKIT_NVTX        0: no NVTX names or ranges, even with a profiler attached\n"
    "  NO_COLOR            set and not empty: no colour in the output\n"
    "\n"
    "`cudakit help COMMAND` (or `cudakit COMMAND --help`) describes each command's options, and its exit codes\n"
    "and environment.";

// An error after which the command stops: the message on stderr, and with --json the
// JSON object on stdout as well.
int fail(const Invocation& invocation, const std::string& message, int code) {
  std::string prefix = invocation.command.empty() ? "cudakit" : "cudakit " + invocation.command;
  std::fprintf(stderr, "%s: %s\n", prefix.c_str(), message.c_str());
  if (invocation.json) {
    nlohmann::ordered_json error = {{"error", message}, {"exit_code", code}};
    if (!invocation.command.empty()) error["command"] = invocation.command;
    std::printf("%s\n", error.dump(2).c_str());
  }
  std::fflush(stdout);
  return code;
}

bool is_subcommand(const std::string& word) {
  if (word == "help") return true;
  for (const auto& s : subcommands())
    if (s.name == word) return true;
  return false;
}

// Before parsing succeeds the options are unknown: a parse error reports as JSON when
// "--json" is among the words, and names the subcommand that the words name.
Invocation guess_invocation(const std::vector<std::string>& args) {
  Invocation guess;
  for (const auto& a : args) {
    if (a == "--json" || a.rfind("--json=", 0) == 0) guess.json = true;
    if (guess.command.empty() && is_subcommand(a)) guess.command = a;
  }
  return guess;
}

std::string parse_error_message(const CLI::ParseError& e, const std::vector<std::string>& args,
                                const Invocation& invocation) {
  std::string what = e.what();
  // A first word that is no command and no option: CLI11 calls it an extra argument.
  if (!args.empty() && args[0].rfind("-", 0) != 0 && !is_subcommand(args[0]))
    return "unknown command '" + args[0] + "' (see cudakit --help)";
  return what + " (see cudakit " + (invocation.command.empty() ? "" : invocation.command + " ") + "--help)";
}

// `cudakit help [COMMAND]`: the same text as `cudakit [COMMAND] --help`, on stdout.
CommandRun setup_help(CLI::App& app) {
  auto topic = std::make_shared<std::string>();
  CLI::App* help = app.add_subcommand("help", "describe the command, or COMMAND: its options, exit codes and environment");
  help->add_option("COMMAND", *topic, "the command to describe");
  help->footer(help_footer("", {{exit_ok, ""}, {exit_usage, "bad command line (COMMAND is no command)"}}, {}));
  return [&app, topic]() -> int {
    // App::help() would describe the chosen subcommand, `help` itself: format the top directly.
    if (topic->empty()) {
      std::printf("%s", app.get_formatter()->make_help(&app, "cudakit", CLI::AppFormatMode::Normal).c_str());
      return exit_ok;
    }
    if (!is_subcommand(*topic)) throw UsageError("unknown command '" + *topic + "'", "see cudakit --help");
    std::printf("%s", app.get_subcommand(*topic)->help("cudakit").c_str());
    return exit_ok;
  };
}

}  // namespace

int run_command_line(const std::vector<std::string>& args) {
  Invocation invocation;
  CLI::App app{"cudakit: a self-test, a benchmark and a description of the GPUs, through the cudakit library",
               "cudakit"};
  app.set_version_flag("--version", std::string("cudakit ") + std::string(cudakit::version()));
  app.footer(footer);
  app.require_subcommand(0, 1);

  auto registered = subcommands();
  std::stable_sort(registered.begin(), registered.end(), [](auto& a, auto& b) { return a.order < b.order; });
  std::map<std::string, CommandRun> runs;
  for (const auto& s : registered) {
    CLI::App* sub = app.add_subcommand(s.name, s.description);
    runs[s.name] = s.setup(*sub, invocation);
  }
  runs["help"] = setup_help(app);

  if (args.empty()) {
    std::fprintf(stderr, "%s", app.help().c_str());
    return exit_usage;
  }
  std::vector<const char*> argv{"cudakit"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());  // the chosen subcommand's help, when there is one
    return exit_ok;
  } catch (const CLI::CallForAllHelp&) {
    std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
    return exit_ok;
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    return exit_ok;
  } catch (const CLI::ParseError& e) {
    Invocation guess = guess_invocation(args);
    return fail(guess, parse_error_message(e, args, guess), exit_usage);
  }

  auto chosen = app.get_subcommands();
  if (chosen.empty()) return fail(invocation, "no command given (see cudakit --help)", exit_usage);
  invocation.command = chosen.front()->get_name();
  try {
    return runs.at(invocation.command)();
  } catch (const UsageError& e) {
    std::string hint = e.hint().empty() ? "see cudakit " + invocation.command + " --help" : e.hint();
    return fail(invocation, std::string(e.what()) + " (" + hint + ")", exit_usage);
  } catch (const DriverUnavailable& e) {
    Invocation plain = invocation;
    plain.command.clear();  // "cudakit: no CUDA driver: ...", the same for every command
    return fail(plain, e.what(), exit_no_gpu);
  } catch (const std::exception& e) {
    return fail(invocation, e.what(), exit_internal);
  } catch (...) {
    return fail(invocation, "an exception that is not a std::exception", exit_internal);
  }
}

}  // namespace cudakit::tool
